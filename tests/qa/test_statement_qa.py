"""qa.statement_qa: a statement question answered with the statement as the outline finds it."""

from __future__ import annotations

from qa.statement_qa import statement_answer, statement_asked
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
    assert quote.endswith(" ...") and quote[:-4].split()[-1] in "An oracle answers each query with its past random bits".split()
