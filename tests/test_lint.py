"""The whole tree passes ruff (issue 59, item 9), with pyproject.toml's [tool.ruff] settings: pyflakes'
errors (unused imports and variables, undefined names), pycodestyle's E4/E7/E9 and warnings, lines
of at most 120 characters. ruff is a dev dependency (`make test` installs it): a missing ruff fails
this test rather than skipping it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes_on_the_whole_tree():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        "ruff check failed (fix the lines below; `python -m ruff check .` shows them again; "
        "a missing ruff: pip install -e '.[dev]'):\n" + done.stdout + done.stderr)
