"""ingest.parts: a document's chapters from its bookmarks, its headings, or equal page spans."""

from __future__ import annotations

import pytest

from ingest.errors import IngestError
from ingest.parts import document_parts, document_text, headings, select
from tests.ingest.docstore import store_text

BODY = "It was a quiet day in the town and nobody said a word about it. " * 12


def book(n: int = 5, contents: bool = True) -> str:
    head = "A NOVEL\n\n"
    if contents:
        head += "CONTENTS\n\n" + "".join(f"CHAPTER {r}\n" for r in ("I", "II", "III", "IV", "V")[:n]) + "\n"
    return head + "".join(f"\n\nCHAPTER {r}\n\n{BODY}" for r in ("I", "II", "III", "IV", "V")[:n])


def test_headings_skip_the_contents_list_and_keep_the_chapters():
    text = book()
    got = headings(text)
    assert [t for t, _ in got] == ["CHAPTER I", "CHAPTER II", "CHAPTER III", "CHAPTER IV", "CHAPTER V"]
    assert all(text[pos:pos + len(t)] == t for t, pos in got)
    assert got[0][1] > text.index("CHAPTER V\n")  # after the contents list


@pytest.mark.parametrize("line", ["Book {r}", "{n} THE JOURNEY TO {r}", "Lecture {r}. Circumscription of Topic {n}.",
                                  "\\section{{Divided power envelope {n}}}"])
def test_heading_forms(line):
    text = "".join(f"\n\n{line.format(r=r, n=n)}\n\n{BODY}" for r, n in (("V", 12), ("VI", 13), ("VII", 14)))
    assert len(headings(text)) == 3


def test_running_heads_are_no_headings():
    """A PDF's running head ("CHAPTER 1. ANCESTRY 3" atop every page) is no chapter; "Chapter 1" is."""
    pages = "".join(f"\n\nCHAPTER 1. ANCESTRY–BIRTH–BOYHOOD {p}\n\n{BODY}" for p in range(3, 9))
    text = f"\n\nChapter 1\n\n{BODY}{pages}\n\nChapter 2\n\n{BODY * 3}"
    assert [t for t, _ in headings(text)] == ["Chapter 1", "Chapter 2"]


def test_parts_tile_the_document_and_have_pages(library):
    doc = store_text(library, book())
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == ["CHAPTER I", "CHAPTER II", "CHAPTER III", "CHAPTER IV", "CHAPTER V"]
    assert parts[0].char_start == 0 and all(a.char_end == b.char_start for a, b in zip(parts, parts[1:]))
    assert parts[-1].char_end == len(document_text(library, doc))
    assert all(p.source == "headings" and 1 <= p.page_first <= p.page_last for p in parts)


def test_bookmarks_come_first_and_skip_boilerplate(library):
    text = book(contents=False)
    pages_of = lambda s: text.index(s) // 400 + 1  # noqa: E731
    outline = [{"level": 1, "title": "Contents", "page": 1}] + [
        {"level": 2, "title": f"Chapter {r}", "page": pages_of(f"CHAPTER {r}\n")} for r in ("I", "III", "V")]
    doc = store_text(library, text, outline=outline)
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == ["Chapter I", "Chapter III", "Chapter V"] and parts[0].source == "outline"
    full = document_text(library, doc)
    assert full[parts[1].char_start:].startswith("CHAPTER III")  # where the title is printed on its page


def test_equal_page_spans_without_headings(library):
    doc = store_text(library, BODY * 20)
    parts = document_parts(library, doc)
    assert len(parts) >= 2 and all(p.source == "pages" for p in parts) and parts[0].title.startswith("pp. 1-")


def test_select_by_chapter_and_pages(library):
    doc = store_text(library, book())
    parts = document_parts(library, doc)
    assert [p.number for p in select(parts, chapter=2)] == [2]
    with pytest.raises(IngestError, match="no chapter 9"):
        select(parts, chapter=9)
    assert {p.number for p in select(parts, pages=(1, 1))} == {p.number for p in parts if p.page_first == 1}
