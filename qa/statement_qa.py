"""Questions about a paper's numbered statements: "What is Definition 1.4?" (or Claim 5, Invariant 30:
qa.outline.STATEMENT_KINDS) is answered with the statement as the outline finds it, "What does
Theorem 8 use?" with what it relies on (cited in it or its proof, retrieved by the model while
reading it); the evidence stays what the model retrieved."""

from __future__ import annotations

from drt_core.protocol import DocumentEngine
from ingest.boilerplate import chunk_matter
from ingest.parts import page_labels
from ingest.pipeline import ready_state
from store.library import Library

STATEMENT_QUOTE_MAX = 1200  # characters of a statement shown as the answer at most
_STATEMENTS: dict[tuple, tuple[str, list, list]] = {}  # a document's text, statements and chunks (RAM, four kept)


def _outline_of(library: Library, doc_id: str) -> tuple[str, list, list] | None:
    """A PDF or text document's text, statements (as its outline finds them) and chunks, kept in RAM
    (four documents); None for a TeX source (its outline numbers statements in order, not as LaTeX
    prints them)."""
    from .outline import statements

    doc = library.document(doc_id)
    if doc["kind"] == "tex":
        return None
    key = (str(library.home), doc_id, getattr(library, "limit", None))
    if key not in _STATEMENTS:
        while len(_STATEMENTS) >= 4:
            _STATEMENTS.pop(next(iter(_STATEMENTS)))
        from ingest.parts import joined_text

        chunks = library.chunks(doc_id)
        pages = library.pages(doc_id, with_text=True)
        text = joined_text(pages, pages_apart=True)  # a heading atop a page starts its line
        _STATEMENTS[key] = (text, statements(text, doc["kind"], chunks, pages), chunks)
    return _STATEMENTS[key]


def statement_asked(library: Library, doc_id: str, question: str) -> dict | None:
    """For "What is Definition 1.4?" / "What does Theorem 8 use?" (qa.outline.statement_question),
    the statement the outline finds under that kind and number in a PDF or text document: {"index",
    "statement", "stmts", "text", "chunks", "uses"}; None for other questions, a statement the
    outline does not list (`statement_absent` says so), a TeX source or a statement in a masked chunk."""
    from .outline import find_statement, statement_question

    q = statement_question(question)
    found = _outline_of(library, doc_id) if q is not None else None
    if found is None:
        return None
    text, stmts, chunks = found
    i = find_statement(stmts, q["kind"], q["number"])
    if i is None or set(stmts[i]["chunks"]) & set(getattr(library, "_barred", ())):
        return None
    return {"index": i, "statement": stmts[i], "stmts": stmts, "text": text, "chunks": chunks, "uses": q["uses"]}


ABSENT_MIN = 3  # numbered statements a document's outline must list before a number it lacks is called absent


def statement_absent(library: Library, doc_id: str, question: str) -> dict | None:
    """For "What is Definition 2.1?" or "What is Claim 3.9?" of a paper whose outline lists numbered
    statements but none printed so: {"kind", "number", "listed": the numbers of that kind it does
    list}, which `ask` answers with "Not found" and the closest passages (tried as a new user would,
    such a question quoted an unrelated formula from p. 40 as its answer); None otherwise (not a
    statement question, the statement is listed, a TeX source, a document with fewer than ABSENT_MIN
    statements, a book whose "Chapter 2" is no statement, or a claim, problem, question ... (OTHER_KINDS)
    when the outline lists none of that kind: a paper may print "Problem 1:" unlike a heading, and the
    passages answer it)."""
    from .outline import OTHER_KINDS, find_statement, statement_question

    q = statement_question(question)
    found = _outline_of(library, doc_id) if q is not None else None
    if found is None or len(found[1]) < ABSENT_MIN or find_statement(found[1], q["kind"], q["number"]) is not None:
        return None
    kind = q["kind"]  # statement_question's: lower case, a German kind as its English one
    listed = list(dict.fromkeys(s["number"] for s in found[1] if s["kind"] == kind))
    if not listed and kind in OTHER_KINDS:
        return None
    return {"kind": kind, "number": q["number"], "listed": listed}


def statement_answer(library: Library, engine: DocumentEngine, doc_id: str, asked: dict, out: dict) -> dict:
    """The answer to a statement question (`statement_asked`) made from `out` (`_make_answer`'s): the
    quote is the statement as the outline finds it (its text and page, the evidence-first passage),
    and for "What does Theorem 8 use?" the answer names what it relies on (qa.outline.statement_uses:
    the statements its text and proof cite, and those the model retrieved while reading them). The
    evidence stays what the model retrieved for the question."""
    from .outline import statement_text, statement_uses

    s, text, chunks = asked["statement"], asked["text"], asked["chunks"]
    name = f"{s['kind'].capitalize()} {s['number']}"
    body = statement_text(text, s)
    if len(body) > STATEMENT_QUOTE_MAX:
        body = body[:STATEMENT_QUOTE_MAX].rsplit(" ", 1)[0] + " ..."
    elif s.get("cut"):  # the outline's span stopped at a word before the statement's end
        body += " ..."
    weights = {int(e["chunk"]): float(e["weight"]) for e in out["evidence"]}
    hit = [c for c in s["chunks"] if c in weights]
    retrieved = [int(e["chunk"]) for e in out["evidence"]]
    labels = page_labels(library, doc_id)
    pages = sorted({p for c in s["chunks"] if c < len(chunks)
                    for p in range(chunks[c]["page_first"], chunks[c]["page_last"] + 1)})
    quote = {"text": body, "sentence": body, "short": None, "chunk": s["chunks"][0], "pages": pages,
             "char_start": s["char_start"], "char_end": s["char_end"], "statement": name,
             "weight": round(max((weights[c] for c in hit), default=0.0), 6), "matter": None,
             "retrieved": bool(hit), "rank": (retrieved.index(hit[0]) + 1) if hit else None, "introduces": None}
    info = {"name": name, "kind": s["kind"], "number": s["number"], "page": s["page"],
            "page_label": labels.get(s["page"], str(s["page"])), "chunks": s["chunks"], "uses": None}
    answer = body
    if asked["uses"]:
        limit = getattr(library, "limit", None)
        stored = library.latest_trace(doc_id, str(engine.fingerprint), "dependency_map")  # as qa.summary keeps it
        rows = stored["data"] if stored is not None else ready_state(library, engine, doc_id).dependency_map()
        dep = [r for r in rows if limit is None or int(r["chunk"]) < limit]
        boiler = set(chunk_matter(library, doc_id, chunks))
        uses = statement_uses(text, asked["stmts"], chunks, dep, asked["index"], boiler)
        for u in uses:
            u["page_label"] = labels.get(u["page"], str(u["page"]))
        info["uses"] = uses
        answer = uses_sentence(info)
    made = dict(out["made"], quote=quote, abstained=False, short_answer=None, statement=info)
    passages = [p for p in made.get("passages") or [] if p["chunk"] not in s["chunks"]]
    if made.get("passages") is not None:
        made["passages"] = [{"chunk": quote["chunk"], "text": body, "p": None, "char_start": s["char_start"],
                             "char_end": s["char_end"], "pages": pages, "retrieved": bool(hit)}] + passages[:2]
    return dict(out, answer=answer, made=made)


def uses_sentence(info: dict) -> str:
    """"Theorem 8 (p. 9) uses Lemma 13 (p. 10; cited in its proof) and ...": a statement's `uses` in words."""
    head = f"{info['name']} (p. {info['page_label']})"
    cited = [u for u in info["uses"] if u["cited"]]
    seen = [u for u in info["uses"] if not u["cited"]]

    def where(u: dict) -> str:
        parts = [{"statement": "cited in its statement", "proof": "cited in its proof"}[c] for c in u["cited"]]
        if u["retrieved"] is not None:
            parts.append(f"retrieved by the model, weight {u['retrieved']:.2f}")
        return f"{u['statement']} (p. {u['page_label']}; {', '.join(parts)})"

    out = f"{head} uses {', '.join(map(where, cited))}." if cited else \
        f"{head} cites no numbered statement of this document in its text or its proof."
    if seen:  # "also" beside what it cites only (walk 12: "cites no numbered statement ... also retrieved")
        out += f" While reading it, the model {'also ' if cited else ''}retrieved {', '.join(map(where, seen[:6]))}."
    return out
