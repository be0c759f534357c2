"""qa.eval_qa (`drt-reader eval qa`): metrics, the gold passage, run_qa end to end, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa import eval_qa as qa_eval
from qa.eval_qa import (
    TextFinder,
    contains,
    exact_match,
    load_questions,
    normalize_answer,
    overlapping_chunks,
    qa_text,
    run_qa,
    token_f1,
)
from store.library import Library
from tests.ingest.conftest import one_json
from tests.ingest.fake_engine import FakeEngine

DOC = "books/frank.txt"
QUESTIONS = [
    # the stored text says "Thomas’ library" (curly) across a line break: found by folding
    {"id": "q1", "doc": DOC, "type": "factual", "question": "Whose library held the accounts of voyages?",
     "answer": "Uncle Thomas", "answerable": True,
     "gold": "a history of all the voyages made for purposes of discovery composed the whole of our good "
             "Uncle Thomas' library."},
    {"id": "q2", "doc": DOC, "type": "factual", "question": "What attracts the needle?",
     "answer": "the wondrous power", "answerable": True,
     "gold": "I may there discover the wondrous power which attracts the needle"},
    {"id": "q3", "doc": DOC, "type": "unanswerable", "question": "What is the name of Margaret's dog?",
     "answer": "", "gold": "", "answerable": False},
    {"id": "q4", "doc": DOC, "type": "factual", "question": "Where did the spaceship land?",
     "answer": "Mars", "gold": "the spaceship landed on Mars", "answerable": True},
]


@pytest.fixture
def qa_set(tmp_path, assets):
    """docs_root with the first 12,000 characters of the Frankenstein excerpt, and the question file."""
    root = tmp_path / "corpora"
    (root / "books").mkdir(parents=True)
    (root / DOC).write_text((assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")[:12000])
    qf = tmp_path / "questions.jsonl"
    qf.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n\n")
    return qf, root


# -- metrics ---------------------------------------------------------------------------------


def test_squad_normalisation_and_metrics():
    assert normalize_answer("  The  Wondrous, POWER! ") == "wondrous power"
    assert normalize_answer("“Uncle Thomas’s” — a library") == "uncle thomas s library"
    assert exact_match("the Wondrous power.", "wondrous power") == 1.0
    assert exact_match("wondrous", "wondrous power") == 0.0
    assert exact_match("Mars", ["Venus", "mars"]) == 1.0
    assert token_f1("wondrous power", "the wondrous power") == 1.0
    # pred 3 tokens, gold 2, 1 shared: P = 1/3, R = 1/2, F1 = 0.4
    assert token_f1("a great power indeed", "wondrous power") == pytest.approx(0.4)
    assert token_f1("", "") == 1.0 and token_f1("", "x") == 0.0 and token_f1("x", "") == 0.0
    assert contains("It was Uncle Thomas's library.", "uncle thomas") == 1.0
    assert contains("categories", "cat") == 0.0  # word boundaries
    assert contains("anything", "") == 0.0 and contains("", "the") == 0.0


def test_the_gold_passage_maps_to_original_offsets_and_chunks():
    text = "First page.\n\nThe  quick\n brown fox “jumps”\tover."
    f = TextFinder(text)
    a, b = f.find("quick brown fox")
    assert text[a:b] == "quick\n brown fox"
    a, b = f.find('BROWN FOX "jumps"')  # case and quotes folded
    assert text[a:b] == "brown fox “jumps”"
    assert f.find("no such words") is None and f.find("  ") is None
    chunks = [{"idx": 0, "char_start": 0, "char_end": 16}, {"idx": 1, "char_start": 16, "char_end": 30},
              {"idx": 2, "char_start": 30, "char_end": len(text)}]
    assert overlapping_chunks(chunks, f.find("quick brown")) == [1]
    assert overlapping_chunks(chunks, f.find("page. The quick")) == [0, 1]


def test_a_gold_copied_with_ligature_glyphs_is_found_in_the_text_read_since():
    """Sealed set v2's Twenty Years After golds were copied from the PDF's text as stored before
    ingest.glyphs: "le\ue039him" is "left him" now, "reﬁnement" "refinement"."""
    text = "He said: this youth is an orphan, who left him in the house. His early refinement of character grew."
    f = TextFinder(text)
    a, b = f.find("who le\ue039him in the house")
    assert text[a:b] == "who left him in the house"
    a, b = f.find("early reﬁnement of \ue03baracter")
    assert text[a:b] == "early refinement of character"
    assert f.find("who le\ue039her in the house") is None  # the other letters still have to match


def test_bad_question_files(tmp_path):
    with pytest.raises(qa_eval.QAError, match="not found"):
        load_questions(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "doc": "d", "question": "q"}\n{oops\n')
    with pytest.raises(qa_eval.QAError, match=r"bad.jsonl:2: not JSON"):
        load_questions(bad)
    bad.write_text('{"id": "a", "doc": "d"}\n')
    with pytest.raises(qa_eval.QAError, match="missing question"):
        load_questions(bad)
    bad.write_text('{"id": "a", "doc": "d", "question": "q"}\n{"id": "b", "doc": "d", "question": "q"}\n')
    qs = load_questions(bad, limit=1)
    assert len(qs) == 1 and qs[0]["answerable"] is True and qs[0]["type"] == "unknown"


# -- run_qa ----------------------------------------------------------------------------------


def test_run_qa_end_to_end_with_the_fake_engine(qa_set, tmp_path, test_tokenizer):
    qf, root = qa_set
    home = tmp_path / "qa-home"
    engine = FakeEngine(test_tokenizer, answer="Uncle Thomas")
    res = run_qa(qf, home=home, engine_or_models=engine, docs_root=root, baselines=("bm25",))
    rows = {r["id"]: r for r in res["rows"]}
    assert res["systems"] == ["drt", "bm25"] and res["gold_not_found"] == ["q4"]
    # the gold chunks are the library's chunks holding the passage
    with Library(home) as lib:
        doc_id = res["by_doc"][0]["doc_id"]
        chunks = {c["idx"]: c for c in lib.chunks(doc_id)}
        assert res["by_doc"][0]["tokens"] == lib.document(doc_id)["n_tokens"]
    for qid, word in (("q1", "Uncle Thomas"), ("q2", "wondrous power")):
        assert rows[qid]["gold_found"] and rows[qid]["gold_chunks"]
        assert any(word in chunks[c]["text"] for c in rows[qid]["gold_chunks"])
    assert rows["q3"]["gold_chunks"] == [] and rows["q4"]["gold_found"] is False
    # hit@k by hand from the rankings; BM25's rare words ("needle", "library") find the gold chunk
    for r in (rows["q1"], rows["q2"]):
        for s in res["systems"]:
            rank, gold = r[s]["ranking"], set(r["gold_chunks"])
            assert r[s]["hit@1"] == float(rank[0] in gold)
            assert r[s]["hit@4"] == float(bool(gold & set(rank[:4])))
        assert r["bm25"]["hit@1"] == 1.0
    assert "I may there discover the wondrous power" in rows["q2"]["bm25"]["answer"]
    assert rows["q2"]["bm25"]["contains"] == 1.0
    # DRT's answer: the quote ask takes from the chunk it retrieved first, scored like any answer
    for qid in ("q1", "q2"):
        d = rows[qid]["drt"]
        assert d["quote"]["chunk"] == d["ranking"][0] and d["answer"] == d["quote"]["text"] != ""
        assert d["em"] == qa_eval.exact_match(d["answer"], rows[qid]["answer"])
    assert rows["q1"]["drt"]["abstained"] is False
    o = res["overall"]
    assert (o["questions"], o["answerable"], o["unanswerable"], o["gold_located"]) == (4, 3, 1, 2)
    answerable = [r for r in rows.values() if r["answerable"]]
    assert o["metrics"]["drt"]["em"] == pytest.approx(sum(r["drt"]["em"] for r in answerable) / 3)
    assert o["metrics"]["bm25"]["hit@1"] == 1.0
    assert o["metrics"]["drt"]["abstain_unanswerable"] == 0.0
    assert set(res["by_type"]) == {"factual", "unanswerable"}
    # a second run re-uses the ingested document
    again = run_qa(qf, home=home, engine_or_models=engine, docs_root=root, baselines=(), limit=1)
    assert again["by_doc"][0]["doc_id"] == doc_id and len(again["rows"]) == 1 and engine.prefill_calls == 1
    text = qa_text(res)
    assert "## overall" in text and "| 4 | drt | 100.0% |" in text and "q4" in text


def test_run_qa_scores_abstentions_and_scripted_evidence(qa_set, tmp_path, test_tokenizer, monkeypatch):
    """ask() scripted: q1's evidence puts a gold chunk first, q2's third; abstains on q3 and q4."""
    from qa import ask as ask_mod

    qf, root = qa_set

    def fake_ask(library, engine, doc_id, question, **kw):
        chunks = library.chunks(doc_id)
        holding = lambda w: next(c["idx"] for c in chunks if w in c["text"])  # noqa: E731
        ev = {"Whose": [holding("Uncle Thomas"), 0], "What attracts": [0, 1, holding("wondrous power")]}
        ev = next((v for k, v in ev.items() if question.startswith(k)), [0])
        abstained = "dog" in question or "spaceship" in question
        evidence = [{"chunk": c, "pages": [1], "weight": 1.0, "text": ""} for c in ev]
        answer = "I cannot tell" if abstained else "The wondrous power."
        return {"answer": answer, "abstained": abstained, "quote": None, "evidence": evidence}

    monkeypatch.setattr(ask_mod, "ask", fake_ask)
    res = run_qa(qf, home=tmp_path / "h", engine_or_models=FakeEngine(test_tokenizer), docs_root=root,
                 baselines=())
    m = res["overall"]["metrics"]["drt"]
    assert (m["hit@1"], m["hit@4"]) == (0.5, 1.0)
    assert m["abstain_unanswerable"] == 1.0 and m["abstain_answerable"] == pytest.approx(1 / 3)  # q4
    assert m["em"] == pytest.approx(1 / 3) and m["contains"] == pytest.approx(1 / 3)  # q2 only
    rows = {r["id"]: r for r in res["rows"]}
    assert rows["q4"]["drt"]["answer"] == "" and rows["q4"]["drt"]["f1"] == 0.0  # abstained: ""
    assert res["by_type"]["unanswerable"]["metrics"]["drt"]["abstain_unanswerable"] == 1.0


# -- command line ----------------------------------------------------------------------------


def test_cli_eval_qa_json_and_errors(cli, qa_set, tmp_path, drt_home):
    qf, root = qa_set
    rc, out, err = cli("eval", "qa", "--questions", str(qf), "--docs-root", str(root), "--baselines", "bm25",
                       "--limit", "2", "--json")
    assert rc == 0, err
    res = one_json(out)
    assert res["systems"] == ["drt", "bm25"] and len(res["rows"]) == 2
    assert Path(res["home"]) == drt_home / "eval-qa"

    rc, out, err = cli("eval", "qa", "--questions", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "question file not found" in err

    rc, out, err = cli("eval", "qa", "--questions", str(qf), "--docs-root", str(tmp_path / "elsewhere"))
    assert rc == 2 and err.count("\n") == 1 and "document not found" in err and "q1" in err

    rc, out, err = cli("eval", "qa", "--questions", str(qf), "--docs-root", str(root), "--baselines", "tfidf")
    assert rc == 2 and "unknown baseline tfidf" in err


def test_cli_eval_qa_calibrate_without_a_threshold_to_calibrate(cli, qa_set):
    """--calibrate calibrates the thresholds a checkpoint reads (the cross-encoder's, else the
    reader's); with neither it says so. The retrieval_z threshold it used to compute instead, which
    no config read, is gone."""
    qf, root = qa_set
    args = ("eval", "qa", "--questions", str(qf), "--docs-root", str(root), "--baselines", "", "--limit", "2",
            "--calibrate")
    rc, out, err = cli(*args)
    assert rc == 0, err
    assert "nothing calibrated" in out and "retrieval_z" not in out
    rc, out, err = cli(*args, "--json")
    assert rc == 0, err
    assert "calibration" not in one_json(out)


def test_mined_question_file_ends_when_a_type_runs_out(tmp_path):
    """Regression: with n larger than a type's items, the round robin stalled on the empty type
    forever (val has 8 mined character questions). It now takes what is left from the others."""
    import json

    import numpy as np

    from drt_core.tokenizer import encode
    from qa.eval_qa import load_questions, mined_question_file

    docs = tmp_path / "docs"
    (docs / "books").mkdir(parents=True)
    (docs / "books" / "a.txt").write_text("Alice met Bob in Paris. Bob was a baker.", encoding="utf-8")
    ids = encode("Alice met Bob in Paris. Bob was a baker.")
    qa = tmp_path / "qa"
    qa.mkdir()
    np.asarray(ids + [1], dtype=np.uint16).tofile(qa / "val.bin")
    items = [{"doc": "books/a.txt", "doc_start": 0, "passage_tok": [0, len(ids)], "question": f"Who is Bob {i}?",
              "answer": "a baker", "qtype": "character" if i == 0 else "place"} for i in range(5)]
    (qa / "val.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    out = mined_question_file(qa, "val", tmp_path / "q.jsonl", n=4, n_unanswerable=2, docs_root=docs)
    qs = load_questions(out)
    ans = [q for q in qs if q["answerable"]]
    assert len(ans) == 4 and sorted(q["type"] for q in ans) == ["character", "place", "place", "place"]
    assert all("Bob" in q["gold"] for q in ans)
    assert len(qs) == 4  # one document: no other to ask its questions of
