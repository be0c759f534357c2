"""qa.outline: statements and what used them, people and places and where they are introduced."""

from __future__ import annotations

from pathlib import Path

from qa.outline import (build, first_mention, page_ranges, relied_on, statements, used_by,
                            who_name)
from ingest.parts import document_text
from tests.ingest.docstore import store_text

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def test_tex_statements_with_label_page_and_users(library):
    src = (ASSETS / "stacks-brauer.tex").read_text()
    doc = store_text(library, src, kind="tex", page_chars=2000, chunk_chars=250, name="brauer.tex")
    chunks = library.chunks(doc)
    text = document_text(library, doc)
    st = statements(text, "tex", chunks)
    kinds = ("definition", "lemma", "proposition", "theorem")
    assert sum(s["kind"] in kinds for s in st) == sum(src.count(f"\\begin{{{k}}}") for k in kinds)
    first = st[0]
    assert first["label"] and text[first["char_start"]:].startswith(f"\\begin{{{first['kind']}}}")
    assert first["page"] == chunks[first["chunks"][0]]["page_first"]
    later = first["chunks"][0] + 20
    dep = [{"chunk": later, "retrieved": [first["chunks"][0], 1], "weights": [0.8, 0.2]},
           {"chunk": first["chunks"][0], "retrieved": [first["chunks"][0]], "weights": [1.0]}]  # itself: no use
    used_by(st, dep)
    assert first["used_by"] == [{"chunk": later, "weight": 0.8}]
    o = build(library, doc, dep)
    assert o["statements"][0]["used_by"] == [{"chunk": later, "weight": 0.8}] and o["names"] == []
    rel = relied_on(o["statements"], dep, later)
    assert rel[0] == {"chunk": first["chunks"][0], "weight": 0.8, "statement": f"{first['kind']} {first['label']}"}


def test_printed_statements_in_pdf_text():
    text = "Intro.\nDefinition 2.3. A thing is a thing.\nSome text.\nSatz 4 (Haupt)\nAll is well.\nLemma 5.1 Easy.\n"
    chunks = [{"idx": 0, "char_start": 0, "char_end": len(text), "page_first": 3, "page_last": 3}]
    st = statements(text, "pdf", chunks)
    assert [(s["kind"], s["number"], s["page"]) for s in st] == [("definition", "2.3", 3), ("theorem", "4", 3),
                                                                  ("lemma", "5.1", 3)]


def test_who_name_and_first_mention():
    assert who_name("Who is Diggory Venn?") == "Diggory Venn"
    assert who_name("Who was Madame Coquenard, the duchess?") == "Madame Coquenard"
    assert who_name("Who is the Oracle?") == "Oracle"
    assert who_name("Who is the man in the red cloak?") is None and who_name("What is a sheaf?") is None
    text = "Contents: Venn. The reddleman Diggory Venn came. Later Venn spoke."
    skip = [(0, 15)]
    assert first_mention(text, "Diggory Venn", skip) == text.index("Diggory")
    assert first_mention(text, "Mr. Venn", skip) == text.index("Venn", 15)  # the title dropped
    assert first_mention(text, "Clym", skip) is None


def test_page_ranges():
    assert page_ranges([3, 4, 5, 9]) == "3-5, 9" and page_ranges([1, 3, 5], limit=2) == "1, 3, ..."


def test_a_chapters_printed_heading_ends_where_the_text_prints_it():
    """A chapter numbered afresh in its part is titled with the part's label ("PART THE SECOND,
    CHAPTER II: ..."), which the page does not print above it: the heading skipped when finding a
    person's introducing mention ends where the printed one does, not the title's length on."""
    from ingest.parts import Part
    from qa.outline import heading_end

    text = "x" * 50 + "CHAPTER II: A MEETING OF THE QUIRE\n\nDick Dewy walked on."
    start = 50
    part = Part(2, "PART THE SECOND, CHAPTER II: A MEETING OF THE QUIRE", start, len(text), 1, 1, "headings")
    end = heading_end(text, part)
    assert text[end:] == "\nDick Dewy walked on."  # the old window (the title's length) ran into "Dick Dewy"
