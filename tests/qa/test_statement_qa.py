"""qa.statement_qa: a statement question answered with the statement as the outline finds it."""

from __future__ import annotations

from qa.statement_qa import statement_absent, statement_answer, statement_asked, uses_sentence
from tests.ingest.docstore import store_text


def test_a_statement_cut_by_the_outline_is_quoted_with_an_ellipsis(library):
    """A definition longer than the outline's span (itcs20's Definition 9) ended its quote inside a word
    with nothing to say it went on ("... its past random bit"); it now ends at a word, then " ..."."""
    text = "Intro.\n\n▶Definition 9. " + "An oracle answers each query with its past random bits " * 30
    doc = store_text(library, text, page_chars=4000, chunk_chars=300, kind="pdf")
    asked = statement_asked(library, doc, "What is Definition 9?")
    assert asked is not None and asked["statement"]["cut"]
    got = statement_answer(library, None, doc, asked, {"evidence": [], "made": {"passages": None}})
    quote = got["made"]["quote"]["text"]
    assert got["answer"] == quote and quote.startswith("Definition 9. An oracle")
    words = "An oracle answers each query with its past random bits".split()
    assert quote.endswith(" ...") and quote[:-4].split()[-1] in words


def _paper(library):
    text = ("Intro.\n\n▶Definition 1. A sampler is local when it answers each query alone.\n\n"
            "▶Lemma 2. Every local sampler is consistent.\n\n▶Theorem 3. There is a local sampler for graphs.\n\n"
            "▶Definition 4. A graph is huge when it has too many vertices to be written down.\n\n")
    return store_text(library, text * 2, page_chars=4000, chunk_chars=300, kind="pdf")


def test_a_statement_the_paper_lacks_is_not_found_with_the_numbers_it_has(library):
    """Tried as a new user would, "What is Definition 2.1?" of a paper with no such definition quoted an
    unrelated formula as its answer: it is now "Not found", saying which definitions the outline lists."""
    from qa.ask import NOT_FOUND, abstain_reason, absent_answer

    doc = _paper(library)
    absent = statement_absent(library, doc, "What is Definition 2.1?")
    assert absent == {"kind": "definition", "number": "2.1", "listed": ["1", "4"]}
    assert statement_absent(library, doc, "What is Lemma 2?") is None  # listed: answered with the statement
    assert statement_absent(library, doc, "Who is Alice?") is None
    out = {"answer": "a quote", "evidence": [], "made": {"quote": {"text": "a quote"}, "short_answer": "x",
                                                          "abstained": False, "passages": [{"chunk": 0}]}}
    got = absent_answer(out, absent)
    assert got["answer"] == NOT_FOUND and got["made"]["quote"] is None and got["made"]["abstained"]
    assert got["made"]["passages"] == [{"chunk": 0}]  # still shown, as the closest
    assert abstain_reason(got["made"]) == ("The outline of this document finds no Definition 2.1: "
                                           "the definitions it lists are numbered 1, 4.")


def test_a_book_without_numbered_statements_never_calls_one_absent(library):
    doc = store_text(library, "Chapter 2. The storm came at night and the ship was lost. " * 40,
                     page_chars=4000, chunk_chars=300, kind="pdf")
    assert statement_absent(library, doc, "What is Definition 2?") is None


def test_a_claim_is_answered_with_its_statement_and_the_main_claim_is_no_statement_question(library):
    """ccc16's 21 claims were no statements: "What is Claim N?" got an unrelated passage. A claim is now
    quoted as a lemma is; a claim number the outline lacks is "Not found" with the claims it lists, and
    "What is the main claim?" is left to the reader."""
    text = ("Intro.\n\n▶Lemma 1. Every local sampler is consistent.\n\n▶Claim 2. Each query is answered "
            "in constant time.\n\nProof. By Lemma 1. ◀\n\n▶Theorem 3. There is a local sampler for graphs.\n\n")
    doc = store_text(library, text * 2, page_chars=4000, chunk_chars=300, kind="pdf")
    asked = statement_asked(library, doc, "What is Claim 2?")
    assert asked is not None and asked["statement"]["kind"] == "claim"
    got = statement_answer(library, None, doc, asked, {"evidence": [], "made": {"passages": None}})
    assert got["answer"] == "Claim 2. Each query is answered in constant time."
    assert got["made"]["quote"]["statement"] == "Claim 2"
    assert statement_asked(library, doc, "What does Claim 2 use?")["uses"]
    assert statement_absent(library, doc, "What is Claim 7?") == {"kind": "claim", "number": "7", "listed": ["2"]}
    for q in ("What is the main claim?", "What is the main claim of this paper?"):
        assert statement_asked(library, doc, q) is None and statement_absent(library, doc, q) is None
    assert statement_absent(library, _paper(library), "What is Claim 7?") is None  # no claims: the passages answer
    assert statement_absent(library, _paper(library), "What is Theorem 7?")["listed"] == ["3"]


def test_hypotheses_are_statements_and_not_found_reads_in_the_plural(library):
    """Hypotheses were no statements, and "Not found" made every plural with "s": it would have printed
    "the hypothesiss it lists" (and "the corollarys"). A hypothesis heading is a statement, a proof that
    cites "Hypotheses 1 and 2" uses both, and the sentence names the kind's plural as written."""
    from qa.ask import abstain_reason
    from qa.outline import kind_plural, statement_question

    text = ("Intro.\n\n▶Hypothesis 1. Every sampler is fast.\n\n▶Hypothesis 2. Every sampler is local.\n\n"
            "▶Corollary 3. Every sampler is fine.\nProof. By Hypotheses 1 and 2. ◀\n\n"
            "▶Notation 4. We write n for the size.\n\n▶Assumption 5. The input is a graph.\n\n")
    doc = store_text(library, text, page_chars=4000, chunk_chars=300, kind="pdf")
    asked = statement_asked(library, doc, "What is Hypothesis 2?")
    assert asked is not None and asked["statement"]["kind"] == "hypothesis"
    assert statement_question("What does Corollary 3 use?")["kind"] == "corollary"
    from qa.outline import statement_uses

    uses = statement_uses(asked["text"], asked["stmts"], asked["chunks"], [], 2)
    assert [u["statement"] for u in uses] == ["Hypothesis 1", "Hypothesis 2"]
    absent = statement_absent(library, doc, "What is Hypothesis 7?")
    assert absent == {"kind": "hypothesis", "number": "7", "listed": ["1", "2"]}
    said = abstain_reason({"statement_absent": absent})
    assert "the hypotheses it lists are numbered 1, 2" in said and "hypothesiss" not in said
    assert [kind_plural(k) for k in ("hypothesis", "corollary", "notation", "assumption", "lemma", "claim")] == [
        "hypotheses", "corollaries", "notations", "assumptions", "lemmas", "claims"]
    for kind in ("corollary", "notation", "assumption"):
        absent = statement_absent(library, doc, f"What is {kind.capitalize()} 9?")
        assert f"the {kind_plural(kind)} it lists are numbered" in abstain_reason({"statement_absent": absent})


def test_what_the_model_retrieved_is_also_retrieved_only_beside_what_is_cited():
    """Walk 12 (Galois cohomology notes): "Theorem 2.15 (p. 11) cites no numbered statement of this document
    ... While reading it, the model also retrieved Theorem 2.13": "also" where nothing was cited."""
    seen = {"statement": "Theorem 2.13", "page_label": "10", "cited": [], "retrieved": 0.5}
    cited = {"statement": "Definition 2.14", "page_label": "10", "cited": ["proof"], "retrieved": None}
    alone = uses_sentence({"name": "Theorem 2.15", "page_label": "11", "uses": [seen]})
    assert "cites no numbered statement" in alone and "the model retrieved Theorem 2.13 (p. 10;" in alone
    both = uses_sentence({"name": "Theorem 2.15", "page_label": "11", "uses": [cited, seen]})
    assert both.startswith("Theorem 2.15 (p. 11) uses Definition 2.14 (p. 10; cited in its proof).")
    assert "the model also retrieved Theorem 2.13" in both
