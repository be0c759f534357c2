"""The command line starts at once (issue 59, item 8): `drt-reader --help`, each command's `--help`
and `list` load none of the heavy libraries (torch, transformers, gradio, ...), which take seconds
to import and which those commands do not use. Checked on what a new process has in sys.modules
when it exits, not on timings (docs/cli.md#start-up has those): app.py builds its parser from each
package's `register`, so one heavy import at the top of a command module, or in a package's
`__init__`, would bring the seconds back for every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the top-level packages none of these commands may import
HEAVY = {"torch", "transformers", "gradio", "faiss", "fitz", "pymupdf", "pandas", "scipy", "matplotlib",
         "tokenizers", "safetensors", "triton"}

# runs app.main(argv) as the `drt-reader` script does, then writes the loaded modules when the
# process exits, however it exits (--help raises SystemExit)
RUN = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
import app
sys.exit(app.main(sys.argv[2:]))
"""


def loaded(tmp_path: Path, code: str, *argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """(the finished process, the top-level packages it had imported)."""
    out = tmp_path / "modules.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DRT_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-c", code, str(out), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert out.exists(), proc.stderr
    return proc, {m.split(".")[0] for m in json.loads(out.read_text())}


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["ask", "--help"],
    ["eval", "niah", "--help"],
    ["eval", "qa", "--help"],
    ["train", "--help"],
    ["serve", "--help"],
    ["bench", "--help"],
])
def test_help_imports_nothing_heavy(tmp_path, argv):
    proc, mods = loaded(tmp_path, RUN, *argv)
    assert proc.returncode == 0, proc.stderr
    assert "usage: drt-reader" in proc.stdout
    assert not mods & HEAVY, f"`drt-reader {' '.join(argv)}` imports {sorted(mods & HEAVY)}"
    assert "sqlite_utils" not in mods and "numpy" not in mods  # no library to open, no arrays


def test_list_opens_the_library_and_nothing_heavier(tmp_path):
    proc, mods = loaded(tmp_path, RUN, "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "the library is empty"
    assert (tmp_path / "home" / "library.db").exists()  # it did open (create) the library
    assert not mods & HEAVY, f"`drt-reader list` imports {sorted(mods & HEAVY)}"
    proc, mods = loaded(tmp_path, RUN, "list", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"documents": []}
    assert not mods & HEAVY


def test_lazy_package_names_and_pandas_afterwards(tmp_path):
    """drt_core's names load on first use; the library's sqlite-utils loads without pandas, and
    pandas (the web UI's) still imports afterwards."""
    code = """
import json, sys
out = sys.argv[1]
import drt_core, drt_core.errors, drt_core.train.cli, drt_core.evals.cli, store.library
light = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "pandas"))
import pandas
from drt_core import DRTConfig, PRESETS
from transformers import AutoConfig
json.dump({"light": light, "drt": AutoConfig.for_model("drt").model_type, "cls": DRTConfig.__name__,
           "presets": sorted(PRESETS), "dir": "DRTForCausalLM" in dir(drt_core),
           "pandas": pandas.__name__}, open(out, "w"))
"""
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert res["light"] == []
    assert res["drt"] == "drt" and res["cls"] == "DRTConfig" and "tiny" in res["presets"] and res["dir"]
    assert res["pandas"] == "pandas"
