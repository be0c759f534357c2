"""qa.outline on papers: printed statements, what each cites and retrieved, statement questions, and
long links drawn from the whole document (issue 60, items 5 and 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa.outline import (
    find_statement,
    long_links,
    proof_spans,
    statement_question,
    statement_refs,
    statement_text,
    statement_uses,
    statements,
)

ASSETS = Path(__file__).resolve().parent.parent / "assets"
PAPER = ASSETS / "itcs20-pp30-31.pdf"  # CC BY: Biswas, Rubinfeld, Yodpinyanee, ITCS 2020, pp. 30-31


def _chunks(text: str, size: int = 250, page_chars: int = 3500) -> list[dict]:
    return [{"idx": i, "char_start": a, "char_end": min(a + size, len(text)), "page_first": 1 + a // page_chars,
             "page_last": 1 + min(a + size, len(text)) // page_chars} for i, a in enumerate(range(0, len(text), size))]


PRINTED = """1 Introduction
▶Theorem 1.1. [Main Theorem] Let f be a polynomial. Then f is nice.
Proof. By Lemma 2.2 and Definition 1.2 the claim follows, as [25, Lemma 5.1] shows too. ◀
  ▶Definition 1.2 (Simple Circuit). A circuit is simple if its terms have no common factor.

A paragraph that follows the definition and is no part of it.
Corollary 15 is reminiscent of a result on subwords, and
Lemma 12, last and the rest say nothing new.
▷Proven p.10 Theorem 3. Let L be a bounded language. Then L is good.
Lemma 11 ([18, Theorem 1]). Let u, v be two words.
Remark 4. Chains are not closed under downward closure.
Example 5. Let L be the language of all words.
Lemma 2.2 Let x be a word. Then x is periodic.
▶Lemma 2.2 Let x be a word. Then x is periodic.
Proof (Proof of Theorem 3 as stated on page 8). We apply Lemmas 11 and 2.2. ⊓⊔
Theorem 1.1. [Main Theorem] Let f be a polynomial. Then f is nice.
"""


def test_printed_headings_and_what_is_no_heading():
    st = statements(PRINTED, "pdf", _chunks(PRINTED))
    got = [(s["kind"], s["number"]) for s in st]
    assert got == [("theorem", "1.1"), ("definition", "1.2"), ("theorem", "3"), ("lemma", "11"), ("remark", "4"),
                   ("example", "5"), ("lemma", "2.2"), ("theorem", "1.1")]  # no "Corollary 15 is ...", "Lemma 12, ..."
    assert st[1]["title"] == "Simple Circuit" and st[3]["title"] == "[18, Theorem 1]"
    assert st[-1]["restates"] == 0 and st[0]["restates"] is None  # the restated theorem points to the first
    # a statement's text ends at its proof, or at the sentence that closes its paragraph
    assert statement_text(PRINTED, st[0]) == "Theorem 1.1. [Main Theorem] Let f be a polynomial. Then f is nice."
    assert statement_text(PRINTED, st[1]).endswith("have no common factor.")


def test_what_a_statement_cites_in_its_text_and_its_proofs():
    st = statements(PRINTED, "pdf", _chunks(PRINTED))
    i = find_statement(st, "Theorem", "1.1")
    assert [st[j]["number"] for j in statement_refs(PRINTED, *proof_spans(PRINTED, st, i)[0], st)] == ["2.2", "1.2"]
    t3 = find_statement(st, "theorem", "3")
    assert len(proof_spans(PRINTED, st, t3)) == 1  # "Proof (Proof of Theorem 3 ...)" far from it
    uses = statement_uses(PRINTED, st, _chunks(PRINTED), [], t3)
    assert [(u["statement"], u["cited"]) for u in uses] == [("Lemma 11", ["proof"]), ("Lemma 2.2", ["proof"])]


def test_uses_add_what_the_model_retrieved_while_reading_the_statement():
    chunks = _chunks(PRINTED, size=80)
    st = statements(PRINTED, "pdf", chunks)
    i = find_statement(st, "theorem", "3")
    ex = st[find_statement(st, "example", "5")]
    rem = st[find_statement(st, "remark", "4")]
    dep = [{"chunk": st[i]["chunks"][0], "retrieved": [rem["chunks"][0], st[0]["chunks"][0]], "weights": [0.6, 0.01]},
           {"chunk": ex["chunks"][0], "retrieved": [st[1]["chunks"][0]], "weights": [0.9]}]  # another's reading
    uses = statement_uses(PRINTED, st, chunks, dep, i)
    assert [(u["statement"], u["cited"], u["retrieved"]) for u in uses][-1] == ("Remark 4", [], 0.6)
    assert all(u["statement"] not in ("Theorem 1.1", "Definition 1.2") for u in uses)  # 0.01: no reliance


@pytest.mark.parametrize("q,want", [
    ("What is Definition 1.4?", ("definition", "1.4", False)),
    ("what is definition 2", ("definition", "2", False)),
    ("State Lemma A.3.", ("lemma", "A.3", False)),
    ("Theorem 2.1?", ("theorem", "2.1", False)),
    ("What does Theorem 8 use?", ("theorem", "8", True)),
    ("Which results does Lemma 3 rely on?", ("lemma", "3", True)),
    ("What is used in the proof of Theorem 5?", ("theorem", "5", True)),
    ("What is L in Lemma 3?", None),
    ("What is the difference between Lemma 3 and Lemma 4?", None),
    ("Who is Mr. Darcy?", None),
    ("What is Claim 5?", ("claim", "5", False)),
    ("What is Invariant 30?", ("invariant", "30", False)),
    ("What does Claim 3.2 use?", ("claim", "3.2", True)),
    ("What does Problem 2 ask?", ("problem", "2", False)),
    ("What is the main claim?", None),  # ordinary words, no number: for the reader
    ("What problem does the paper solve?", None),
    ("What is the answer to Question 3?", None),
    ("What fact does the author state first?", None),
])
def test_statement_questions(q, want):
    got = statement_question(q)
    assert (got and (got["kind"], got["number"], got["uses"])) == (want or None)


def test_the_statements_of_a_real_paper_pdf():
    """Two pages of a LIPIcs paper: every numbered statement its TeX prints there (Lemmas 24-27,
    Theorems 28-29, Invariant 30 on the same counter: it was missing, and "What is Invariant 30?" quoted
    Lemma 37), the text layer's stray "▶Lemma 26 S ≤c" once."""
    from ingest.parse import parse_file

    doc = parse_file(PAPER)
    st = statements(doc.text, "pdf", _chunks(doc.text))
    assert [(s["kind"], s["number"]) for s in st] == [("lemma", "24"), ("lemma", "25"), ("lemma", "26"),
                                                      ("lemma", "27"), ("theorem", "28"), ("theorem", "29"),
                                                      ("invariant", "30")]
    inv = st[find_statement(st, "invariant", "30")]
    assert statement_text(doc.text, inv).startswith("Invariant 30. For any interval [xi, xi+1]")
    assert statement_text(doc.text, inv).endswith("constrained to lie above min(yi, yi+1).")
    t29 = find_statement(st, "theorem", "29")
    assert statement_text(doc.text, st[t29]).startswith("Theorem 29. There is an algorithm that provides sample access")
    assert [u["statement"] for u in statement_uses(doc.text, st, _chunks(doc.text), [], t29)] == ["Theorem 28"]
    assert statement_uses(doc.text, st, _chunks(doc.text), [], find_statement(st, "lemma", "25")) == []


OTHER_KINDS = """▶Claim 12. The sampler never fails.
Proof. By Observation 3 and Fact 2.1 the claim follows. ◀
Claim 3.2. Every run ends after n steps.
  Observation 3 (Monotone). Heights only grow.
Fact 2.1 Let x be a height. Then x is even.

Conjecture 28. Given a morphic sequence, one can decide whether it is recurrent.
The main claim of this paper is that sampling is local, and the
Problem 1 is open, as is the
Question 2, raised by Knuth, and
Claim 5 holds for every graph.
Fact 4 of [7] and our problem 3 are related.
"""


def test_claims_invariants_and_other_kinds_papers_number():
    """Papers number claims, invariants, observations, facts, conjectures ... as they number lemmas (ccc16's
    21 claims share the theorem counter): each heading is a statement; the same words in prose are none
    ("Problem 1 is open", "Question 2, raised", "Claim 5 holds"), as for the other kinds."""
    st = statements(OTHER_KINDS, "pdf", _chunks(OTHER_KINDS, size=60))
    assert [(s["kind"], s["number"]) for s in st] == [("claim", "12"), ("claim", "3.2"), ("observation", "3"),
                                                      ("fact", "2.1"), ("conjecture", "28")]
    assert st[2]["title"] == "Monotone"
    assert statement_text(OTHER_KINDS, st[0]) == "Claim 12. The sampler never fails."
    uses = statement_uses(OTHER_KINDS, st, _chunks(OTHER_KINDS, size=60), [], 0)
    assert [(u["statement"], u["cited"]) for u in uses] == [("Observation 3", ["proof"]), ("Fact 2.1", ["proof"])]


def test_lecture_notes_print_a_heading_alone_on_its_line():
    """German lecture notes: "Definition 8" alone on its line after a blank one, its text below (the
    text layer may put a formula's piece first); a stray "Beispiel 6" inside a formula is no heading."""
    from ingest.parse import parse_file

    doc = parse_file(ASSETS / "geotopo-pp1-10.pdf")
    st = statements(doc.text, "pdf", _chunks(doc.text))
    assert [s["number"] for s in st if s["kind"] == "definition"] == [str(n) for n in range(1, 10)]
    assert ("example", "1") in {(s["kind"], s["number"]) for s in st}  # "Beispiel 1 (Topologien)"
    assert st[[s["kind"] for s in st].index("example")]["title"] == "Topologien"


def test_ask_answers_a_statement_question_from_the_outline(cli):
    rc, out, err = cli("ingest", str(PAPER), "--json")
    assert rc == 0, err
    doc = json.loads(out)["doc_id"][:12]
    rc, out, err = cli("ask", doc, "What is Lemma 27?", "--json", "--max-new-tokens", "4")
    assert rc == 0, err
    res = json.loads(out)
    made = res["trace"]["answer"]
    assert res["answer"].startswith("Lemma 27. When kk′ ≤2U + 1") and not made["abstained"]
    assert made["quote"]["statement"] == "Lemma 27" and made["quote"]["pages"] == [1]
    assert made["statement"]["name"] == "Lemma 27" and made["statement"]["uses"] is None
    assert res["evidence"]  # what the model retrieved for the question, as for any answer
    rc, out, err = cli("ask", doc, "What is Invariant 30?", "--json", "--max-new-tokens", "4")
    assert rc == 0, err
    assert json.loads(out)["answer"].startswith("Invariant 30. For any interval")  # it quoted Lemma 37
    rc, out, err = cli("ask", doc, "What does Theorem 29 use?", "--max-new-tokens", "4")
    assert rc == 0, err
    assert out.startswith("Theorem 29 (p. 2) uses Theorem 28 (p. 1; cited in its proof")
    assert "“Theorem 29. There is an algorithm" in out and "Evidence (what the model retrieved" in out


def test_long_links_are_drawn_from_the_whole_document():
    """The strongest links sat together at the start (an early chunk has few candidates, so its
    fusion weights are large); the links shown come from every stretch of the document."""
    dep = [{"chunk": c, "retrieved": [c - 10], "weights": [0.99 - c / 1000]} for c in range(10, 40)]  # strong, early
    dep += [{"chunk": c, "retrieved": [c - 50, c - 1], "weights": [0.3 + (c % 7) / 100, 0.9]} for c in range(60, 1200)]
    got = long_links(dep, skip=set(), n=12)
    assert len(got) == 12 and got[0]["source"] == 10  # the strongest of all is still first
    stretches = {ln["source"] * 12 // 1200 for ln in got}
    assert len(stretches) == 12  # one from each twelfth of the document
    assert all(ln["source"] - ln["target"] > 8 for ln in got)  # c - 1: the text's own continuity, never shown
    assert [ln["weight"] for ln in got] == sorted((ln["weight"] for ln in got), reverse=True)
    assert long_links(dep[:30], skip=set(range(25)), n=12) == long_links(dep[15:30], skip=set(range(25)), n=12)
    assert long_links([], set()) == []
    # every chunk reaches back to the opening as strongly as to its own neighbourhood: the links shown
    # reach into different stretches, not all to the opening
    hub = [{"chunk": c, "retrieved": [c % 50, c - 40], "weights": [1.0, 1.0]} for c in range(100, 1200)]
    got = long_links(hub, skip=set(), n=12)
    assert len({ln["target"] * 12 // 1200 for ln in got}) >= 10


def test_a_heading_atop_a_page_starts_its_line():
    """With the running heads out of the text (ingest.pdf_structure), "Corollary 6." opens a page: the
    statements read the pages apart, so it still starts a line (the wqo paper lost its Corollary 6)."""
    from ingest.parts import document_text
    from qa.outline import document_statements

    pages = ["We end the section here.", "Corollary 6. Let L be a language. Then L is good."]
    rows, at = [], 0
    for i, t in enumerate(pages):
        rows.append({"number": i + 1, "text": t, "char_start": at, "char_end": at + len(t)})
        at += len(t) + 2

    class Library:
        def pages(self, doc_id, with_text=False):
            return rows

        def document(self, doc_id):
            return {"kind": "pdf"}

        def chunks(self, doc_id):
            return _chunks(document_text(self, doc_id))

    assert "here.  Corollary" in document_text(Library(), "d")  # a sentence runs on over the break
    assert [(s["kind"], s["number"]) for s in document_statements(Library(), "d")] == [("corollary", "6")]


def test_a_statement_is_on_the_page_of_its_heading_and_a_long_one_ends_at_a_word(library):
    """A chunk over a page break holds the heading at the next page's top: the statement is on that page
    (itcs20's Definition 9 was listed on p. 5, the page before its own). A statement with no end within
    STATEMENT_MAX stops at a space ("its past random bit" was a word cut), marked `cut`."""
    from ingest.parts import document_text
    from qa.outline import STATEMENT_MAX, document_statements
    from tests.ingest.docstore import store_text

    page1 = "Some prose about graphs that runs on. " * 20
    long = "▶Definition 9. " + "A long definition goes on and on about oracles " * 40
    text = page1[:398] + "\n\n" + long
    doc = store_text(library, text, page_chars=400, chunk_chars=500, kind="pdf")
    st = document_statements(library, doc)
    assert [(s["kind"], s["number"], s["page"]) for s in st] == [("definition", "9", 2)]
    assert library.chunks(doc)[st[0]["chunks"][0]]["page_first"] == 1
    assert st[0]["cut"] and st[0]["char_end"] - st[0]["char_start"] <= STATEMENT_MAX
    joined = document_text(library, doc, pages_apart=True)
    assert joined[st[0]["char_end"]].isspace() and statement_text(joined, st[0]).endswith(" oracles A long")
    assert not statements(PRINTED, "pdf", _chunks(PRINTED))[0]["cut"]


def test_outline_text_marks_restated_statements_and_prints_part_labels():
    from qa.outline import outline_text

    st = [{"kind": "theorem", "label": "", "number": "1", "page_label": "3", "chunks": [4], "used_by": [],
           "restates": None},
          {"kind": "theorem", "label": "", "number": "1", "page_label": "18", "chunks": [40], "used_by": [],
           "restates": 0}]
    o = {"doc_id": "d" * 12, "parts": [{"number": 1, "title": "Related Work", "page_first": 9, "page_label": "5"}],
         "statements": st, "names": [], "links": []}
    lines = outline_text(o).splitlines()
    assert lines[0] == "dddddddddddd: 1 parts, 2 statements (1 restated), 0 names"
    assert "Related Work  (p. 5)" in lines[3]  # the printed page, as the statements' own
    assert [ln.split()[:3] for ln in lines if ln.startswith("  theorem")] == [["theorem", "1", "p."],
                                                                            ["theorem", "1", "(restated)"]]


def test_the_same_number_over_other_words_is_another_statement():
    """ccc16's appendix numbers from 1.1 again: its "Theorem 1.1 (Brill's Equation)" was taken for the
    introduction's Theorem 1.1 restated (listed "(restated)", its uses dropped); a restatement keeps its words."""
    prose = "Some prose between the statements, long enough to keep them apart. " * 10 + "\n"
    text = ("▶Theorem 1.1 (Reconstruction). Let f be a circuit. Then f is found.\n\n" + prose +
            "▶Theorem 1.1 (Brill's Equation). A form f(x) is a product of linear forms.\n\n" + prose +
            "▶Theorem 1.1 (Reconstruction). Let f be a circuit. Then f is found.\n")
    st = statements(text, "pdf", _chunks(text, page_chars=10**6))
    assert [(s["number"], s["restates"]) for s in st] == [("1.1", None), ("1.1", None), ("1.1", 0)]


COLON_HEADINGS = """Intro text here.
Claim 1: Every run ends after n steps.
Proof. Clear. ◀
Lemma 3: Let x be a height. Then x is even.
Theorem 2 (Brill's Equation): A polynomial is a product of linear forms iff it satisfies them.
▶Claim 4:
The sampler never fails.

Prose follows, by Lemma 3: we have the bound, and
Claim 5 holds for every graph, and
Lemma 3: we conclude as before.
"""


def test_a_heading_printed_with_a_colon_is_a_statement():
    """"Claim 1:" / "Lemma 3:" / "Theorem 2 (Name):" printed as headings were not read (only the period
    forms were); a colon in prose ("by Lemma 3: we have", a line opening "Lemma 3: we conclude") is none."""
    st = statements(COLON_HEADINGS, "pdf", _chunks(COLON_HEADINGS, size=60))
    assert [(s["kind"], s["number"]) for s in st] == [("claim", "1"), ("lemma", "3"), ("theorem", "2"), ("claim", "4")]
    assert st[2]["title"] == "Brill's Equation"
    assert statement_text(COLON_HEADINGS, st[0]) == "Claim 1: Every run ends after n steps."
    assert statement_text(COLON_HEADINGS, st[3]) == "Claim 4: The sampler never fails."
