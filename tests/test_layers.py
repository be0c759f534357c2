"""The packages' imports run one way: nothing imports the command line (`app`), and the two bottom
packages (kernels, store) import none of ours, and no installed package imports research/ (one-off
diagnostics kept outside the product). Checked on the source, so a lazy import inside a function
counts too (that is where `from app import emit` used to hide)."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"app", "cli_io", "drt_core", "kernels", "ingest", "ui", "store", "bench", "research"}


def imported(package: str) -> dict[str, set[str]]:
    """{file: the top-level names of ours it imports} for every .py under `package`."""
    out = {}
    for f in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=str(f))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        out[str(f.relative_to(ROOT))] = (names & OURS) - {package}
    return out


@pytest.mark.parametrize("package", ["drt_core", "kernels", "ingest", "ui", "store", "bench"])
def test_no_package_imports_the_command_line(package):
    bad = {f: n for f, n in imported(package).items() if "app" in n}
    assert not bad, f"import cli_io (UserError, emit) instead of app: {bad}"


@pytest.mark.parametrize("package", ["kernels", "store"])
def test_bottom_packages_import_none_of_ours(package):
    bad = {f: n for f, n in imported(package).items() if n}
    assert not bad, bad


@pytest.mark.parametrize("package", ["drt_core", "kernels", "ingest", "ui", "store", "bench"])
def test_no_package_imports_research(package):
    bad = {f: n for f, n in imported(package).items() if "research" in n}
    assert not bad, f"research/ is not installed; move what the package needs into it: {bad}"


def test_the_scan_sees_imports_inside_functions(tmp_path, monkeypatch):
    # the check must be able to fail: a lazy `from app import emit` in a function is found
    pkg = tmp_path / "drt_core"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    from app import emit\n    return emit\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert imported("drt_core") == {"drt_core/m.py": {"app"}}
