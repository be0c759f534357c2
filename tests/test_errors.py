"""One root for the errors meant for people (issue 59): `cli_io.UserError`, which every package's
errors subclass and which the command line catches once, printing one clean line (exit status 2),
with no traceback; any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from cli_io import UserError

ROOT = Path(__file__).resolve().parents[1]
# each package's module of errors meant for people
ERROR_MODULES = ["drt_core.errors", "store.errors", "ingest.errors", "qa.errors"]


def error_classes() -> list[type]:
    out = []
    for name in ERROR_MODULES:
        mod = importlib.import_module(name)
        out += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                if issubclass(c, BaseException) and c.__module__ == name]
    return out


def test_every_packages_errors_are_user_errors():
    classes = error_classes()
    assert {c.__module__ for c in classes} == set(ERROR_MODULES)
    assert len(classes) > 20  # the scan found the hierarchies, not only their roots
    bad = [f"{c.__module__}.{c.__name__}" for c in classes if not issubclass(c, UserError)]
    assert not bad, f"not a cli_io.UserError: {bad}"
    from drt_core.errors import DRTError
    from ingest.errors import IngestError
    from qa.errors import QAError
    from store.errors import StoreError

    # the packages' roots are siblings under UserError: a qa error is not an ingest error
    roots = [DRTError, StoreError, IngestError, QAError]
    assert all(r.__bases__ == (UserError,) for r in roots)


def test_only_the_root_marks_errors_for_people():
    # no package marks its errors with an attribute of its own (the duck-typed `user_error = True`
    # of before): being a UserError is what makes an error one for people
    marked = []
    for src in ["drt_core", "kernels", "store", "ingest", "qa", "ui", "bench", "app.py"]:
        p = ROOT / src
        for f in [p] if p.is_file() else sorted(p.rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(getattr(t, "id", getattr(t, "attr", None)) == "user_error" for t in targets):
                        marked.append(str(f.relative_to(ROOT)))
    assert not marked, marked


@pytest.mark.parametrize("cls", error_classes() + [UserError], ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_the_command_line_prints_each_as_one_clean_line(cls, monkeypatch, capsys, tmp_path):
    import app
    import ingest.cli

    def fail(args):
        raise cls("something went wrong\n  with  this\tfile.pdf\n")

    monkeypatch.setattr(ingest.cli, "cmd_list", fail)
    rc = app.main(["--home", str(tmp_path), "list"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err == "drt-reader: error: something went wrong with this file.pdf\n"


def test_any_other_exception_keeps_its_traceback(monkeypatch, tmp_path):
    import app
    import ingest.cli

    def fail(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(ingest.cli, "cmd_list", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        app.main(["--home", str(tmp_path), "list"])


def test_user_errors_are_one_line_wherever_they_are_shown():
    # str() is what the CLI prints and the UI shows: one line, whatever the message held
    from qa.errors import QAError

    assert str(QAError("a\nb\r\n  c")) == "a b c" and str(UserError()) == ""
