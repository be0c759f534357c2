""""What does Theorem M use?" shows what it uses, in the chat and the export, as `ask` prints it (walk 12,
Galois cohomology notes: the chat and the export showed only Theorem 2.15's own statement, so the
question read as answered by "What is Theorem 2.15?"; the command line said it uses Definition 2.14)."""

from __future__ import annotations

from qa.export import answer_lines
from qa.statement_qa import uses_sentence
from ui import render

STATEMENT = {"name": "Theorem 2.15", "kind": "theorem", "number": "2.15", "page": 11, "page_label": "11",
             "chunks": [143], "uses": [{"statement": "Definition 2.14", "page": 10, "page_label": "10",
                                        "cited": [], "retrieved": 1.0, "index": 13}]}
BODY = "Theorem 2.15. Let R be a Dedekind domain. Then every nonzero fractional ideal factors uniquely."
QUOTE = {"text": BODY, "sentence": BODY, "short": None, "chunk": 143, "pages": [11], "statement": "Theorem 2.15",
         "retrieved": True, "introduces": None}
USES = {"answer": uses_sentence(STATEMENT), "quote": QUOTE, "statement": STATEMENT, "abstained": False,
        "short_answer": None, "passages": [{"chunk": 143, "text": BODY, "p": None, "pages": [11]},
                                           {"chunk": 159, "text": "For Dedekind domains: Cl = 1.", "p": 0.45,
                                            "pages": [12]}]}
WHAT_IS = dict(USES, answer=BODY, statement=dict(STATEMENT, uses=None))


def test_the_chat_says_what_a_statement_uses_before_quoting_it():
    md = render.answer_md(USES).replace("\\", "")  # Markdown's escapes aside
    assert "retrieved Definition 2.14 (p. 10" in md and BODY in md
    assert md.index("Definition 2.14 (p. 10") < md.index(BODY)
    assert "Definition 2.14" not in render.answer_md(WHAT_IS)  # "What is Theorem 2.15?": the statement alone


def test_the_export_says_it_too():
    text = "\n".join(answer_lines({"answer_id": 1}, USES, {}))
    assert "retrieved Definition 2.14 (p. 10" in text and "Quoted from p. 11, chunk 143" in text
    assert "Definition 2.14 (p. 10" not in "\n".join(answer_lines({"answer_id": 1}, WHAT_IS, {}))
