"""Fixtures for ingest tests: the fake engine, a library in the test's DRT_HOME, a CLI runner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.ingest.fake_engine import FakeEngine, load_test_tokenizer


@pytest.fixture(scope="session")
def test_tokenizer():
    return load_test_tokenizer()


@pytest.fixture
def fake_engine(test_tokenizer):
    return FakeEngine(test_tokenizer)


@pytest.fixture
def library(drt_home):
    from store.library import Library

    lib = Library(drt_home)
    yield lib
    lib.close()


@pytest.fixture
def cli(drt_home, fake_engine, monkeypatch, capsys):
    """Run `drt-reader --home DRT_HOME ...` in-process with the fake engine: (rc, stdout, stderr)."""
    import app
    from ingest import pipeline

    monkeypatch.setattr(pipeline, "load_engine", lambda model, device=None: fake_engine)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = app.main(["--home", str(drt_home), *argv])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def snapshot(home: Path) -> dict:
    """Everything a failed command must leave as it was: table contents and the states folder."""
    db = home / "library.db"
    tables: dict = {}
    if db.exists():
        con = sqlite3.connect(db)
        sql = "SELECT name FROM sqlite_master WHERE type='table'"
        for n in sorted(r[0] for r in con.execute(sql)):
            if n != "_migrations":
                tables[n] = con.execute(f"SELECT * FROM [{n}] ORDER BY 1").fetchall()
        con.close()
    states = sorted(str(p.relative_to(home)) for p in (home / "states").rglob("*"))
    return {"tables": tables, "states": states}


def one_json(out: str) -> dict:
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1, out
    return json.loads(lines[0])
