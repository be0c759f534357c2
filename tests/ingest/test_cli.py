"""Contract 2 commands through `app.main([...])` (fake engine): exact JSON keys, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ingest.conftest import one_json, snapshot


def _ingest(cli, path, *extra) -> dict:
    rc, out, err = cli("ingest", str(path), "--json", *extra)
    assert rc == 0, err
    return one_json(out)


def test_ingest_list_ask_summarize_trace_rm(cli, assets, drt_home):
    res = _ingest(cli, assets / "emma-pp2-21.pdf")
    assert set(res) == {"doc_id", "title", "pages", "tokens", "chunks", "seconds"}
    assert res["title"] == "Emma" and res["pages"] == 20 and len(res["doc_id"]) == 64
    prefix = res["doc_id"][:8]

    rc, out, _ = cli("list", "--json")
    docs = one_json(out)["documents"]
    assert rc == 0 and [d["doc_id"] for d in docs] == [res["doc_id"]]
    assert {"doc_id", "title", "tokens"} <= set(docs[0]) and docs[0]["prefill"][0]["status"] == "done"

    question = "Who is handsome, clever, and rich?"
    rc, out, err = cli("ask", prefix, question, "--json", "--max-new-tokens", "16")
    assert rc == 0, err
    ans = one_json(out)
    assert set(ans) == {"answer", "evidence", "trace"}
    assert ans["answer"] and ans["evidence"]
    for e in ans["evidence"]:
        assert set(e) == {"chunk", "pages", "weight", "text", "causal_effect", "matter"}
        assert e["matter"] is None  # Emma's pages 2-21: text, no licence, contents or index page
        assert e["pages"] and all(1 <= p <= 20 for p in e["pages"]) and e["text"]
    assert ans["trace"]["chunks"][0]["topk"]

    rc, out, _ = cli("summarize", prefix, "--json")
    summ = one_json(out)
    assert rc == 0 and set(summ) == {"summary", "evidence", "trace"}
    assert summ["summary"].startswith("Extractive summary") and summ["trace"]["mode"] == "extractive"
    chunks = [e["chunk"] for e in summ["evidence"]]
    assert chunks == sorted(chunks)  # document order

    rc, out, _ = cli("summarize", prefix, "--mode", "abstractive", "--json")
    assert rc == 0 and set(one_json(out)) == {"summary", "evidence", "trace"}

    rc, out, _ = cli("trace", prefix, "--json")
    tr = one_json(out)
    assert rc == 0 and tr["doc_id"] == res["doc_id"] and len(tr["chunks"]) == res["chunks"]
    assert set(tr["chunks"][3]) == {"chunk", "retrieved", "weights"}

    rc, out, _ = cli("ask", prefix, "What happened?")  # text mode streams, then lists evidence
    assert rc == 0 and "Evidence" in out

    rc, out, _ = cli("trace", "emma", "--json")  # by title, any case
    assert rc == 0 and one_json(out)["doc_id"] == res["doc_id"]

    before = snapshot(drt_home)
    rc, out, err = cli("rm", "emm", "--json")  # a part of a name never removes a document
    assert rc == 2 and out == "" and "no document 'emm'" in err and snapshot(drt_home) == before

    rc, out, _ = cli("rm", "Emma", "--json")
    assert rc == 0 and one_json(out) == {"doc_id": res["doc_id"], "removed": True}
    assert not (drt_home / "states" / res["doc_id"]).exists()
    rc, out, _ = cli("list", "--json")
    assert one_json(out) == {"documents": []}


def test_same_file_twice_same_id(cli, assets, tmp_path):
    a = _ingest(cli, assets / "stacks-brauer.tex")
    copy = tmp_path / "renamed.md"
    copy.write_bytes((assets / "stacks-brauer.tex").read_bytes())
    b = _ingest(cli, copy)
    assert a["doc_id"] == b["doc_id"] and a["tokens"] == b["tokens"]
    assert b["title"] == "Brauer groups"


def test_encrypted_with_password(cli, assets):
    res = _ingest(cli, assets / "005-libreoffice-writer-password.pdf", "--password", "openpassword")
    assert res["pages"] == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ingest", "005-libreoffice-writer-password.pdf"], "encrypted"),
        (["ingest", "005-libreoffice-writer-password.pdf", "--password", "nope"], "password does not open"),
        (["ingest", "017-unreadable-meta-data__unreadablemetadata.pdf"], "damaged"),
        (["ingest", "random-bytes.pdf"], "neither a PDF"),
        (["ingest", "empty.txt"], "empty"),
        (["ingest", "no-such-file.pdf"], "no such file"),
        (["ask", "ffffffff", "anything?"], "no document"),
        (["ask", "zz", "anything?"], "hexadecimal"),
        (["summarize", "ffff"], "no document"),
        (["trace", "ffff"], "no document"),
        (["rm", "ffff"], "no document"),
    ],
)
def test_bad_input_one_line_error_nonzero_exit_library_unchanged(cli, assets, drt_home, argv, message):
    _ingest(cli, assets / "015-arabic__habibi.pdf")
    before = snapshot(drt_home)
    argv = [str(assets / a) if a.endswith((".pdf", ".txt")) else a for a in argv]
    rc, out, err = cli(*argv, "--json")
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drt-reader: error: ") and message in lines[0]
    assert snapshot(drt_home) == before


def test_ask_before_prefill_is_done(cli, assets, drt_home, fake_engine):
    from store.library import Library

    res = _ingest(cli, assets / "015-arabic__habibi.pdf")
    lib = Library(drt_home)
    try:
        row = lib.prefill_state(res["doc_id"], fake_engine.fingerprint)
        lib.set_prefill_state(
            res["doc_id"], fake_engine.fingerprint, status="partial", n_tokens_done=0, n_chunks_done=0,
            n_tokens_total=row["n_tokens_total"], state_dir=row["state_dir"],
        )  # fmt: skip
    finally:
        lib.close()
    rc, _, err = cli("ask", res["doc_id"][:10], "What?", "--json")
    assert rc == 2 and "not prefilled" in err and len(err.strip().splitlines()) == 1


def test_text_outputs(cli, assets):
    rc, out, _ = cli("list")
    assert rc == 0 and "empty" in out
    path = assets / "026-latex-multicolumn__multicolumn.pdf"
    rc, out, _ = cli("ingest", str(path), "--title", "Two columns")
    assert rc == 0 and "Two columns" in out and "3 pages" in out
    rc, out, _ = cli("list")
    assert "Two columns" in out and "done" in out


def test_abstractive_mode_is_off_until_the_model_passes_its_summary_check(cli, assets, fake_engine, tmp_path):
    """The abstractive mode is offered only when the model's summary check shows it beat the
    extractive summary (qa.summary.abstractive_allowed); otherwise one line says so and the
    extractive summary is shown."""
    res = _ingest(cli, assets / "emma-pp2-21.pdf")
    fake_engine.model_dir = tmp_path
    (tmp_path / "summary_check.json").write_text('{"abstractive_rouge_l": 0.05, "extractive_rouge_l": 0.13}')
    rc, out, _ = cli("summarize", res["doc_id"][:8], "--mode", "abstractive")
    first, rest = out.split("\n", 1)
    assert rc == 0 and first.startswith("abstractive summaries are off") and "0.05" in first
    assert rest.lstrip().startswith("Extractive summary")
    rc, out, _ = cli("summarize", res["doc_id"][:8], "--mode", "abstractive", "--json")
    got = one_json(out)
    assert set(got) == {"summary", "evidence", "trace"} and got["trace"]["mode"] == "extractive"
    assert got["trace"]["notice"].startswith("abstractive summaries are off")


def test_summarize_by_chapter_and_pages_and_outline(cli, assets, tmp_path):
    res = _ingest(cli, assets / "frankenstein_excerpt.txt")
    prefix = res["doc_id"][:8]
    rc, out, _ = cli("summarize", prefix, "--chapter", "2", "--json")
    got = one_json(out)
    assert rc == 0 and {s["part"] for s in got["trace"]["sentences"]} == {2}
    assert got["trace"]["parts"][0]["title"] == "Letter 2"
    rc, out, _ = cli("summarize", prefix, "--pages", "2-3", "--json")
    got = one_json(out)
    assert rc == 0 and all(set(s["pages"]) & {2, 3} for s in got["trace"]["sentences"])
    rc, _, err = cli("summarize", prefix, "--chapter", "40")
    assert rc != 0 and "no chapter 40" in err and len(err.strip().splitlines()) == 1
    rc, _, err = cli("summarize", prefix, "--pages", "9-3")
    assert rc != 0 and "page range" in err
    rc, out, _ = cli("outline", prefix, "--json")
    o = one_json(out)
    assert rc == 0 and [p["title"] for p in o["parts"]][:4] == ["Letter 1", "Letter 2", "Letter 3", "Letter 4"]
    got = {n["name"] for n in o["names"]}
    assert "Margaret" in got and "Chapter" not in got  # a name, not a heading word
    rc, out, _ = cli("outline", prefix)
    assert rc == 0 and "Parts:" in out and "Letter 2" in out
    rc, out, _ = cli("outline", prefix, "--plot", str(tmp_path / "cast.png"))
    assert rc == 0 and (tmp_path / "cast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "cast.png" in out
    rc, out, _ = cli("outline", prefix, "--chunk", "5", "--json")
    assert rc == 0 and one_json(out)["chunk"] == 5
    rc, _, err = cli("outline", prefix, "--chunk", "99999")
    assert rc != 0 and "not in this document" in err


def test_empty_generation_is_said_in_text_mode(cli, assets, fake_engine, tmp_path):
    """Regression (end-to-end run with drt-tiny, which often ends at once with a newline): `ask`
    printed a blank line and `summarize --mode abstractive` an empty summary, which read like a hang.
    Text mode now says so. `ask` answers with a quote from the passage the model retrieved first,
    whether or not it generated text (its quote does not depend on the generation)."""
    from qa.cli import EMPTY_GENERATION

    res = _ingest(cli, assets / "emma-pp2-21.pdf")
    fake_engine.answer = ""
    fake_engine.model_dir = tmp_path  # a model whose abstractive summaries passed the check
    (tmp_path / "summary_check.json").write_text('{"abstractive_rouge_l": 0.2, "extractive_rouge_l": 0.13}')
    rc, out, _ = cli("ask", res["doc_id"][:8], "Who?")
    assert rc == 0 and out.startswith("\u201c") and "chunk" in out.splitlines()[0] and "Evidence" in out
    rc, out, _ = cli("summarize", res["doc_id"][:8], "--mode", "abstractive")
    assert rc == 0 and out.startswith(EMPTY_GENERATION)
    rc, out, _ = cli("ask", res["doc_id"][:8], "Who?", "--json")
    got = one_json(out)
    assert rc == 0 and got["answer"] == got["trace"]["answer"]["quote"]["text"] != ""
    assert got["trace"]["answer"]["generated"] == ""


def test_ask_mask_regenerates_without_the_chunks(cli, assets, drt_home):
    """`ask --mask C[,C...]` regenerates with those chunks barred from retrieval: the new evidence
    lacks them, the unmasked answer rides in trace["answer"]["unmasked"], every evidence row has a
    causal effect beside its weight (text mode prints both); Contract 2's three keys stay."""
    res = _ingest(cli, assets / "emma-pp2-21.pdf")
    prefix, question = res["doc_id"][:8], "Who is handsome, clever, and rich?"
    rc, out, _ = cli("ask", prefix, question, "--json")
    before = one_json(out)
    top = before["evidence"][0]["chunk"]
    assert all(isinstance(e["causal_effect"], float) for e in before["evidence"])
    assert "masked" not in before["trace"]["answer"]
    rc, out, err = cli("ask", prefix, question, "--json", "--mask", f"{top}, {top + 1}")
    assert rc == 0, err
    after = one_json(out)
    assert set(after) == {"answer", "evidence", "trace"}
    assert after["trace"]["answer"]["masked"] == [top, top + 1]
    assert not {top, top + 1} & {e["chunk"] for e in after["evidence"]}
    un = after["trace"]["answer"]["unmasked"]
    assert un["answer"] == before["answer"] and un["evidence"][0]["chunk"] == top
    assert all("causal_effect" in e for e in after["evidence"] + un["evidence"])
    rc, out, _ = cli("ask", prefix, question, "--mask", str(top))
    assert rc == 0 and out.startswith(f"Without chunk {top} (masked):") and "Before masking:" in out
    assert "causal effect +" in out or "causal effect -" in out


@pytest.mark.parametrize("mask,message", [("x", "'x' is not a chunk number"), ("1,,2", "'' is not a chunk number"),
                                          ("-3", "'-3' is not a chunk number"), ("", "give chunk numbers"),
                                          ("99999", "chunk 99999 is not in this document")])
def test_ask_mask_errors_are_one_line(cli, assets, drt_home, mask, message):
    res = _ingest(cli, assets / "015-arabic__habibi.pdf")
    before = snapshot(drt_home)
    rc, out, err = cli("ask", res["doc_id"][:8], "What?", "--json", "--mask", mask)
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("drt-reader: error: ")
    assert message in lines[0]
    assert snapshot(drt_home) == before


def test_parse_mask():
    from qa.ask import parse_mask

    assert parse_mask(None) == [] and parse_mask("3") == [3] and parse_mask(" 3 ,17") == [3, 17]


LICENCE = ("THE FULL PROJECT GUTENBERG LICENSE. To protect the Project Gutenberg mission of promoting the free "
           "distribution of electronic works, by using or distributing this work you agree to comply with all "
           "the terms of the Full Project Gutenberg License available with this file. Donations to the Project "
           "Gutenberg Literary Archive Foundation are gratefully accepted. ")


def test_evidence_and_quote_on_a_licence_page_are_tagged(cli, tmp_path):
    """Issue 29 item 4: a passage from a licence page says so, in the JSON rows and in the text."""
    from ingest.parse import TEXT_PAGE_CHARS

    story = ("Mr. Bingley had a pleasant countenance and easy manners. His sisters were fine women. " * 40)
    licence = (LICENCE * 12)[: TEXT_PAGE_CHARS - 10]
    path = tmp_path / "book.txt"
    path.write_text(story[: TEXT_PAGE_CHARS - 10] + "\n\n" + licence + "\n", encoding="utf-8")
    doc = _ingest(cli, path)
    rc, out, err = cli("ask", doc["doc_id"][:8], "What does the Project Gutenberg License say of donations?",
                       "--json", "--max-new-tokens", "4")
    assert rc == 0, err
    rows = one_json(out)["evidence"]
    tags = {e["chunk"]: e["matter"] for e in rows}
    assert "licence" in tags.values(), tags
    for e in rows:  # page 1 is the story, page 2 the licence: a chunk is tagged when it touches page 2
        assert e["matter"] == ("licence" if 2 in e["pages"] else None), e
    rc, out, err = cli("ask", doc["doc_id"][:8], "What does the Project Gutenberg License say of donations?",
                       "--max-new-tokens", "4")
    assert rc == 0, err
    assert "licence page" in out


def test_a_quote_that_opens_with_dialogue_gets_no_second_mark():
    """Regression: `ask` printed ““Who is Planchet?” said ...” for a passage that opens with a
    quotation mark."""
    from qa.cli import answer_text, quoted

    assert quoted("Planchet was his lackey.") == "\u201cPlanchet was his lackey.\u201d"
    assert quoted("\u201cWho is Planchet?\u201d said he.") == "\u201cWho is Planchet?\u201d said he."
    assert quoted('"Who?" said he.') == '"Who?" said he.'
    out = {"quote": {"text": "\u201cWho is Planchet?\u201d said he.", "pages": [3], "chunk": 7}}
    assert answer_text(out).startswith("\u201cWho is Planchet?\u201d said he. (")


def test_ask_prints_the_printed_page_labels_as_outline_does():
    """Tried as a new user would on a paper: `ask` printed physical pages ("pp. 30-31") where the outline,
    export and the "uses" sentence print the labels ("p. 27"); it now prints the labels."""
    from qa.cli import answer_text

    out = {"quote": {"text": "A sampler is local.", "pages": [31], "chunk": 7},
           "passages": [{"chunk": 7, "pages": [31], "p": 0.9, "text": "A sampler is local."},
                        {"chunk": 9, "pages": [33, 34], "p": 0.5, "text": "Another passage."}]}
    text = answer_text(out, {31: "27", 33: "29", 34: "30"})
    assert "(p. 27, chunk 7" in text and "[pp. 29-30, chunk 9, 50%]" in text
    assert "(p. 31, chunk 7" in answer_text(out)  # no labels: the page numbers


def test_a_closed_pipe_is_no_traceback(tmp_path):
    """`drt-reader ... | head`: the reader closing the pipe ends the command quietly (exit 141, as
    a shell reports SIGPIPE), never with a BrokenPipeError traceback."""
    import subprocess
    import sys

    script = ("import sys, app\n"
              "class Closed:\n"
              "    def write(self, s): raise BrokenPipeError(32, 'Broken pipe')\n"
              "    def flush(self): pass\n"
              "    def fileno(self): return sys.__stdout__.fileno()\n"
              "sys.stdout = Closed()\n"
              f"sys.exit(app.main(['--home', {str(tmp_path)!r}, 'list']))\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=str(Path(__file__).resolve().parents[2]))
    assert p.returncode == 141 and "Traceback" not in p.stderr
