"""docs/eval/qa_handwritten.jsonl: the validator's schema checks on the committed file, the gold
passages against the corpora when ../shared/corpora (or $DRT_EVAL_CORPORA) exists, and the
validator itself on a few broken rows."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT / "docs" / "eval" / "check_eval_set.py"
QA_FILE = ROOT / "docs" / "eval" / "qa_handwritten.jsonl"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_eval_set", CHECKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check = _load_checker()


def _corpora_dir() -> Path:
    env = os.environ.get("DRT_EVAL_CORPORA")
    return Path(env) if env else ROOT.parent / "shared" / "corpora"


def test_committed_file_passes_the_schema_checks():
    rows, errors = check.load(QA_FILE)
    assert errors == []
    errors, _ = check.check_schema(rows)
    assert errors == []
    ans = [r for r in rows if r["answerable"]]
    assert len(ans) >= 64 and len(rows) - len(ans) >= 10
    assert len({r["doc"] for r in ans if r["doc"].startswith("books/")}) >= 2
    assert len({r["doc"] for r in ans if r["doc"].startswith("stacks/")}) >= 2


def test_gold_passages_are_exact_substrings_of_the_documents():
    corpora = _corpora_dir()
    if not corpora.is_dir():
        pytest.skip(f"no corpora directory at {corpora}")
    rows, _ = check.load(QA_FILE)
    errors, _, report = check.check_corpora(rows, corpora)
    assert errors == []
    assert len(report) == sum(1 for r in rows if r["answerable"])
    assert all(r["count"] >= 1 for r in report)


def _row(**kw):
    base = {"id": "x-01", "doc": "books/a.txt", "type": "fact", "question": "Who?",
            "answer": "the answer", "answerable": True,
            "gold": "a gold passage of sixty characters or more containing the answer."}
    return base | kw


def test_the_validator_reports_broken_rows(tmp_path):
    rows = [
        _row(),
        _row(),  # duplicate id
        _row(id="x-02", type="factual"),  # bad type
        _row(id="x-03", answer="not in there"),  # answer not in gold
        _row(id="x-04", answerable=False),  # unanswerable with answer/gold
        _row(id="x-05", gold="too short"),
        {"id": "x-06", "doc": "books/a.txt", "question": "?"},  # missing fields
    ]
    errors, _ = check.check_schema(rows, min_answerable=1, min_unanswerable=1)
    text = "\n".join(errors)
    for needle in ("occurs 2 times", "type 'factual'", "not a substring", "unanswerable but",
                   "gold has 9 characters", "missing field 'type'", "Stacks documents"):
        assert needle in text, needle

    (tmp_path / "books").mkdir()
    gold = _row()["gold"]
    (tmp_path / "books" / "a.txt").write_text(f"x {gold} y {gold}", encoding="utf-8")
    errs, warns, report = check.check_corpora([_row(), _row(id="x-07", gold=_row()["gold"] + "!")], tmp_path)
    assert len(errs) == 1 and "not an exact substring" in errs[0]
    assert any("occurs 2 times" in w for w in warns)
    assert report[0]["count"] == 2 and 0 < report[0]["position"] < 0.5

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_row()) + "\nnot json\n", encoding="utf-8")
    assert check.main([str(bad)]) == 1
