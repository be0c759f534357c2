"""`drt-reader export` and qa.export (fake engine): the conversation and the summary as Markdown,
document text escaped, files written atomically, one-line errors."""

from __future__ import annotations

import re

import pytest

from qa.evidence import snippet
from qa.export import export_file, export_markdown, md_escape, safe_name
from tests.ingest.conftest import one_json

HOSTILE = "# Evil *bold* _it_ [x](y) <script>alert(1)</script> `code` | a | ~~s~~ $x$ & \\"


def _ingest(cli, path, *extra) -> str:
    rc, out, err = cli("ingest", str(path), "--json", *extra)
    assert rc == 0, err
    return one_json(out)["doc_id"]


def _ask(cli, doc: str, question: str) -> dict:
    rc, out, err = cli("ask", doc[:12], question, "--json", "--max-new-tokens", "8")
    assert rc == 0, err
    return one_json(out)


def _html(md: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark").render(md)


def test_export_conversation_and_summary(cli, assets, library):
    doc = _ingest(cli, assets / "emma-pp2-21.pdf")
    questions = ["Who is handsome, clever, and rich?", "What did Miss Taylor marry?"]
    answers = [_ask(cli, doc, q) for q in questions]
    rc, out, _ = cli("summarize", doc[:12], "--json")
    assert rc == 0
    summary = one_json(out)

    md = export_markdown(library, doc)
    assert md.startswith("# Emma (emma-pp2-21.pdf)\n\nDocument ")
    assert md.index("## Questions") < md.index("## Summary") and md.endswith("\n")
    labels = {p["number"]: p["label"] for p in library.pages(doc)}
    for q, a in zip(questions, answers):
        assert f"### {questions.index(q) + 1}. {md_escape(q)}" in md
        made = a["trace"]["answer"]
        if made["abstained"]:
            assert "Not found in this document" in md
        else:
            quote = made["quote"]
            plain = md.replace("**", "")  # the short answer is in bold inside the quote
            assert f"> {md_escape(quote['text'])}" in plain
            pages = quote["pages"]
            first, last = labels[pages[0]], labels[pages[-1]]
            where = f"p. {first}" if first == last else f"pp. {first}-{last}"
            assert f"Quoted from {where}" in md and f"chunk {quote['chunk']}." in md
            if made["short_answer"]:
                assert f"**{md_escape(made['short_answer'])}**" in md
        for e in a["evidence"]:
            assert re.search(rf"^- chunk {e['chunk']}, pp?\. .*weight {e['weight']:.3f}", md, re.M)
    sentences = summary["trace"]["sentences"]
    assert sentences
    body = md[md.index("## Summary"):]
    for s in sentences:
        assert md_escape(s["text"]) in body
        assert f"### {md_escape(s['part_title'])}" in body
    assert "No summary yet." not in md and "No questions yet." not in md

    assert export_markdown(library, doc) == md  # deterministic
    assert export_markdown(library, doc, model_fp="no-such-model").endswith("## Summary\n\nNo summary yet.\n")

    html = _html(md)
    assert html.count("<h3>") == len(questions) + len({s["part"] for s in sentences})
    assert html.count("<blockquote>") == sum(not a["trace"]["answer"]["abstained"] for a in answers)


def test_short_answer_abstention_and_page_labels(cli, assets, library):
    """What the fake engine never makes: a reader's short answer, an abstention, a masked answer,
    printed page labels that are not the page numbers."""
    doc = _ingest(cli, assets / "emma-pp2-21.pdf")
    with library.write() as db:
        db.execute("UPDATE pages SET label = 'ix' WHERE doc_id = ? AND number = 1", [doc])
        db.execute("UPDATE pages SET label = 'x' WHERE doc_id = ? AND number = 2", [doc])
    text = "Emma Woodhouse, handsome, clever, and rich, with a comfortable home."
    quote = {"text": text, "short": "handsome, clever, and rich", "chunk": 0, "pages": [1, 2], "matter": None,
             "retrieved": True, "rank": 1}
    ev = [{"chunk": 0, "pages": [1], "weight": 0.5, "text": "EMMA " + text, "matter": None,
           "causal_effect": 1.25}]
    library.record_answer(doc, "Who is rich?", "fp", text, ev, {"answer": {
        "quote": quote, "abstained": False, "short_answer": quote["short"], "masked": [3, 17]}})
    library.record_answer(doc, "Who is Zorglub?", "fp", "Not found in this document.", [], {"answer": {
        "quote": None, "abstained": True, "short_answer": None, "missing_words": ["zorglub"]}})
    library.record_answer(doc, "Old answer?", "fp", "an answer stored without a trace", [], {})

    md = export_markdown(library, doc)
    assert "> Emma Woodhouse, **handsome, clever, and rich**, with a comfortable home." in md
    assert "Quoted from pp. ix-x, chunk 0." in md and "chunks 3, 17 barred from retrieval" in md
    assert "- chunk 0, p. ix, weight 0.500, causal effect +1.250: EMMA Emma Woodhouse" in md
    assert "**Not found in this document.** The document never mentions \u201czorglub\u201d." in md
    assert "> an answer stored without a trace" in md and md.count("- none") == 2
    html = _html(md)
    assert "<strong>handsome, clever, and rich</strong>" in html and html.count("<blockquote>") == 2

    library.add_trace(doc, "fp", "summary", {"summary": "A *generated* summary.", "evidence": ev,
                                            "trace": {"mode": "abstractive", "notice": ""}})
    body = export_markdown(library, doc).split("## Summary\n\n", 1)[1]
    assert body.startswith("A \\*generated\\* summary.\n\nEvidence") and "- chunk 0, p. ix" in body


def test_snippet_never_cuts_a_word():
    text = "Alpha beta gamma delta epsilon " * 20
    for limit in (7, 20, 33, 160):
        s = snippet(text, limit)
        assert s.endswith("…") and len(s) <= limit + 1
        words = s[:-1].split()
        assert words and all(w in {"Alpha", "beta", "gamma", "delta", "epsilon"} for w in words)
    assert snippet("Short text", 160, head=False, tail=False) == "Short text"
    assert snippet("Supercalifragilistic word", 5) == "Supercalifragilistic…"
    # without the neighbours' word: a guess (a lower-case start, a letter at the end)
    assert snippet("ing the house was disapp") == "…the house was…" and snippet("The end.") == "The end."
    cut = snippet("ing the end of a chunk that stops mid wo", 160, head=True, tail=True)
    assert cut == "…the end of a chunk that stops mid…"


def test_hostile_title_and_text_are_escaped(cli, library, tmp_path):
    path = tmp_path / "hostile.txt"
    sentence = ("The sign read *stars* and _lines_ with [a link](http://evil.example) and "
                "<script>alert(1)</script> beside `ticks` and a | pipe.")
    path.write_text("\n\n".join([sentence] * 40) + "\n")
    doc = _ingest(cli, path, "--title", HOSTILE)
    _ask(cli, doc, "What did the sign read <b>now</b> [x](y)?")
    rc, _, err = cli("summarize", doc[:12], "--json")
    assert rc == 0, err

    md = export_markdown(library, doc)
    assert f"- {md_escape(sentence)} (p. 1" in md[md.index("## Summary"):]  # a summary sentence, escaped
    first = md.splitlines()[0]
    assert first.startswith("# \\# Evil \\*bold\\* \\_it\\_ \\[x\\](y) \\<script\\>")
    html = re.sub(r"<p><em>Asked [^<]*</em></p>", "", _html(md))  # the export's own italics
    for bad in ("<script", "<a ", "<em>", "<b>", "<code>", "<del>", "<table", "<ul>\n<li>\n<h"):
        assert bad not in html, bad
    assert html.count("<h1>") == 1 and "&lt;script&gt;" in html and "[x](y)" in html
    assert html.count("<h2>") == 2  # Questions, Summary: nothing in the text opened a section
    assert "*stars*" in html and "[a link](http://evil.example)" in html  # shown as written


LINE_STARTS = ["- item", "+ item", "1. first", "12) twelfth", "=== under", "> quoted", "#tag"]


@pytest.mark.parametrize("text", LINE_STARTS)
def test_line_start_markup_is_escaped(text):
    html = _html(f"Para\n\n{md_escape(text)}\n")
    assert html.count("<p>") == 2 and "<li>" not in html and "<blockquote>" not in html and "<h" not in html


def test_empty_conversation_and_unknown_document(cli, assets, library):
    doc = _ingest(cli, assets / "emma-pp2-21.pdf")
    md = export_markdown(library, doc)
    assert "## Questions\n\nNo questions yet.\n" in md and md.endswith("## Summary\n\nNo summary yet.\n")

    rc, out, err = cli("export", doc[:12])
    assert rc == 0 and out == md and err == ""

    rc, out, err = cli("export", "nosuchdocument", "--json")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "no document" in err


def test_cli_out_writes_the_file(cli, assets, library, tmp_path):
    doc = _ingest(cli, assets / "emma-pp2-21.pdf")
    _ask(cli, doc, "Who is handsome, clever, and rich?")
    target = tmp_path / "out" / "emma.md"
    target.parent.mkdir()

    rc, out, err = cli("export", "emma", "--out", str(target))
    assert rc == 0 and out.strip() == str(target) and err == ""
    assert target.read_text(encoding="utf-8") == export_markdown(library, doc)
    assert [p.name for p in target.parent.iterdir()] == ["emma.md"]  # no temporary file left

    rc, out, _ = cli("export", "emma", "--out", str(target), "--json")
    obj = one_json(out)
    assert rc == 0 and obj == {"doc_id": doc, "out": str(target), "questions": 1, "markdown": None}

    rc, out, _ = cli("export", "emma", "--json")
    obj = one_json(out)
    assert rc == 0 and obj["out"] is None and obj["questions"] == 1
    assert obj["markdown"] == export_markdown(library, doc)

    rc, out, err = cli("export", "emma", "--out", str(tmp_path / "missing" / "x.md"))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "cannot write" in err
    rc, out, err = cli("export", "emma", "--out", str(target.parent))
    assert rc == 2 and "folder" in err


def test_one_conversation_exported_apart_from_the_others(cli, assets, library, tmp_path):
    """The UI's "Export this conversation" (walk 11, item 11: the export gave every question ever asked
    of the document, from two browser sessions): `questions` keeps one conversation's, in order, says
    how many of all they are, and is written beside the whole export; without it, every question, as
    `drt-reader export` prints them."""
    doc = _ingest(cli, assets / "emma-pp2-21.pdf")
    ids = [library.record_answer(doc, q, "fp", f"answer {n}", [], {})["question_id"]
           for n, q in enumerate(["First?", "Second?", "Third?"])]
    md = export_markdown(library, doc, questions=[ids[2], ids[0]])
    assert "pages, exported by drt-reader.\n\nOne conversation: 2 of the 3 questions asked about this document." in md
    assert "### 1. First?" in md and "### 2. Third?" in md and "Second?" not in md
    whole = export_markdown(library, doc)
    assert "One conversation" not in whole and "### 2. Second?" in whole and "### 3. Third?" in whole
    rc, out, _ = cli("export", doc[:12])
    assert rc == 0 and out == whole
    one = export_file(library, doc, tmp_path, questions=[ids[1]])
    assert one.name.endswith(f"-{doc[:8]}-conversation.md") and one != export_file(library, doc, tmp_path)
    assert "### 1. Second?" in one.read_text(encoding="utf-8")


def test_export_file_for_the_ui(cli, assets, library, tmp_path):
    doc = _ingest(cli, assets / "emma-pp2-21.pdf", "--title", "Émma: a <novel>/2")
    path = export_file(library, doc, tmp_path / "downloads")
    assert path == tmp_path / "downloads" / f"Emma-a-novel-2-{doc[:8]}.md"
    assert path.read_text(encoding="utf-8") == export_markdown(library, doc)
    assert safe_name("../../etc/passwd") == "etc-passwd" and safe_name("<>") == "document"


def test_a_top_k_chunk_the_fusion_gave_almost_nothing_reads_under_0001_in_the_cli_too():
    """Walk 12 mended the UI's "weight 0.000" for a chunk of the model's top-k; `ask`'s evidence and the
    export still printed it (The Odyssey, chunk 534, "weight 0.000, causal effect +0.000"). One
    function prints a fusion weight everywhere (qa.evidence.weight_text)."""
    from qa.cli import _evidence_text

    row = {"chunk": 534, "pages": [30], "weight": 0.00002, "text": "Thus did he speak, and the others applauded."}
    out = _evidence_text([row, dict(row, chunk=535, weight=0.412)])
    assert "weight under 0.001" in out and "weight 0.412" in out and "0.000" not in out
