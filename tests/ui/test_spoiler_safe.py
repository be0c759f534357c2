"""A spoiler-safe answer (`before_page`) says so: it reads only the pages before p. N (walk 11, The Time
Machine: "Who are the Morlocks?" before p. 40 answered "The document never mentions “morlocks”", a book
that names them on 23 pages; the export said the same, and nothing told the reader the answer was cut)."""

from __future__ import annotations

import pytest

from qa.errors import QAError
from qa.export import answer_lines
from qa.views import BeforePage
from ui import render
from ui.tabs import ask as ask_tab

ABSENT = {"answer": "Not found in this document.", "abstained": True, "missing_words": ["morlocks"],
          "passages": [], "evidence": [], "before_page": 40}
UNSURE = {"answer": "Not found in this document.", "abstained": True, "missing_words": [], "passages": [],
          "confidence": {"abstain": True, "by": "cross-encoder", "p": 0.02, "threshold": 0.24}, "before_page": 40}
QUOTE = {"answer": "her name was Weena", "quote": {"text": "I found that her name was Weena.", "chunk": 366,
                                                   "pages": [38, 39]}, "before_page": 50}


def test_an_abstention_before_page_n_says_the_pages_before_it_not_the_document():
    md = render.answer_md(ABSENT)
    assert "Not found before p. 40." in md and "The pages before p. 40 never mention “morlocks”." in md
    assert "document never mentions" not in md and "Not found in this document" not in md
    md = render.answer_md(UNSURE)
    assert "Its words are in the pages before p. 40, but no passage answers it" in md
    whole = render.answer_md(dict(ABSENT, before_page=None))
    assert "Not found in this document." in whole and "The document never mentions “morlocks”." in whole


def test_a_quoted_answer_before_page_n_says_what_it_read():
    assert "Read only the pages before p. 50 (spoiler-safe)." in render.answer_md(QUOTE)
    assert "spoiler-safe" not in render.answer_md(dict(QUOTE, before_page=None))


def test_the_answer_picker_names_the_page():
    got = ask_tab._answer_choices([{"question": "Who are the Morlocks?", "before_page": 40},
                                   {"question": "Who are the Morlocks?"}])
    assert [label for label, _ in got] == ["#1: Who are the Morlocks? (before p. 40)", "#2: Who are the Morlocks?"]


def test_the_export_says_so_too():
    text = "\n".join(answer_lines({"answer_id": 1}, ABSENT, {}))
    assert "Answered from the pages before p. 40 only (spoiler-safe)." in text
    assert "The pages before p. 40 never mention" in text and "document never mentions" not in text
    text = "\n".join(answer_lines({"answer_id": 1}, QUOTE, {}))
    assert "Answered from the pages before p. 50 only (spoiler-safe)." in text


class _Lib:
    def document(self, doc_id):
        return {"n_pages": 91}


def test_a_page_out_of_range_is_said_without_the_command_lines_flag():
    """The Summary tab's "Story so far" field showed "--before-page must be between 2 and 91"."""
    with pytest.raises(QAError, match="between 2 and 91") as e:
        BeforePage(_Lib(), "d", 200)
    assert "--before-page" not in str(e.value) and "before page 200" in str(e.value)


@pytest.fixture(scope="module")
def geotopo(tiny_model, tmp_path_factory):
    from pathlib import Path

    from tests.ui.conftest import fake_upload
    from ui import context
    from ui.tabs import library as library_tab

    base = tmp_path_factory.mktemp("spoiler-safe")
    ctx = context.UIContext(base / "home", tiny_model, upload_root=base / "uploads")
    src = Path(__file__).resolve().parents[1] / "assets" / "geotopo-pp1-10.pdf"
    done = list(library_tab.ingest_upload(ctx, fake_upload(ctx, src), title="GeoTopo", session="t"))
    yield ctx, done[-1].doc_id
    ctx.close()


def test_a_chapter_that_begins_after_the_story_so_far_is_said_so(geotopo):
    """The Summary tab kept the chapter picked before (VI, p. 46) when the reader typed "before page 30"
    for the story so far: "✗ no chapter 5: this document has parts 0-3 (drt-reader outline DOC lists
    them)", a command line's hint and a numbering the tab never showed."""
    from ingest.parts import document_parts
    from ui import context
    from ui.tabs import summary as summary_tab

    ctx, doc_id = geotopo
    late = [p for p in document_parts(ctx.library, doc_id) if p.page_first > 2][-1]
    with pytest.raises(context.UIError) as e:
        summary_tab.summarize_doc(ctx, doc_id, chapter=late.number, before_page=late.page_first)
    msg = str(e.value)
    assert f"begins on p. {late.page_first}" in msg and "Whole document" in msg and "drt-reader" not in msg
    first = summary_tab.summarize_doc(ctx, doc_id, chapter=late.number, before_page=late.page_first + 1)
    assert first["trace"]["sentences"] is not None  # a chapter begun before the page: its start, as before


def test_the_command_line_says_the_same_of_an_abstention_before_page_n():
    """`drt-reader ask --before-page 40` still said "The document never mentions" (walk 11's leftover)."""
    from qa.cli import answer_text

    text = answer_text(ABSENT)
    assert text.startswith("Not found before p. 40. The pages before p. 40 never mention “morlocks”.")
    assert answer_text(dict(ABSENT, before_page=None)).startswith(
        "Not found in this document. The document never mentions “morlocks”.")
