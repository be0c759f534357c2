"""Front and back matter: licence pages, contents lists, indexes and a paper's reference list, told apart
from the text.

`matter_of(text)` (ingest.page_kind) names a page's kind ("licence", "contents", "index" or None) from
what it says, not from where it sits: a Project Gutenberg PDF carries the licence on its last pages and
its header on the first, a book's contents list is a run of short numbered lines, an index a run of
"term, 12, 45" lines. `chunk_matter` tags chunks by the pages they lie on, from the stored page
text (so documents stored before the tag existed get it too), and a paper's bibliography
("references": the part ingest.parts makes of its one "References" line, up to the next part or the
end, `references_spans`) by the characters they hold: every evidence row and quote of `ask`
carries its chunk's tag (`matter`), and the CLI and the UI show it beside the pages ("reference
list"); a reference list's chunks are never quoted as the answer (NOT_QUOTED: an entry such as "In
Proceedings of the 2019 ACM Symposium ..., pages 471-480." answers nothing);
`python -m ingest.boilerplate PDF... --out passages.npy` writes their 63-token chunks for
training (`train --qa-boilerplate`), where they are written into the windows of reading
questions, so the model learns that they answer nothing. The tag is for the reader; the fix is in
what the model learns.
"""

from __future__ import annotations

import re

from .page_kind import GUTENBERG_END, GUTENBERG_START, matter_of
from .parts import document_parts

MATTER_LABELS = {"licence": "licence page", "contents": "contents page", "index": "index page",
                 "references": "reference list"}
NOT_QUOTED = frozenset({"references"})  # matter `ask` never quotes as the answer (the others inform only)


def matter_label(row: dict) -> str | None:
    """"licence page" (contents page, index page, reference list) for an evidence row or quote tagged
    `matter`, else None."""
    return MATTER_LABELS.get(row.get("matter") or "")


def _view_key(library, doc_id: str) -> tuple:
    """The key of a document's cached spans: its library's home, the document, and the view's chunk
    limit (a reader's view, `qa.views.BeforePage`, has its own)."""
    return str(getattr(library, "home", "")), doc_id, getattr(library, "limit", None)


_END_PAGES = 12  # the last pages searched for a Gutenberg edition's end-of-text line (GUTENBERG_END)
_ENDS: dict[tuple, int | None] = {}  # (home, doc_id, view's chunk limit) -> where the licence starts (RAM)


def licence_start(library, doc_id: str) -> int | None:
    """The character offset of a Project Gutenberg edition's end-of-text line (everything from it on
    is its licence), searched on the document's last pages; None when there is none."""
    if not hasattr(library, "document"):  # a bare page store (tests' stand-ins): no last pages to read
        return None
    key = _view_key(library, doc_id)
    if key not in _ENDS:
        n = library.document(doc_id)["n_pages"]
        pages = library.pages(doc_id, with_text=True, numbers=set(range(max(1, n - _END_PAGES + 1), n + 1)))
        hits = [p["char_start"] + m.start() for p in pages for m in [GUTENBERG_END.search(p["text"])] if m]
        _ENDS[key] = min(hits) if hits else None
    return _ENDS[key]


_STARTS: dict[tuple, int | None] = {}  # (home, doc_id, view's chunk limit) -> where the header ends (RAM)
_START_PAGES = 3  # the first pages searched for the header's end line


# the paragraph an edition puts under its header's end line to credit its transcriber ("Produced by ...",
# "Transcribed by David Price, email ... from the 1912 Macmillan and Co. edition.")
_CREDIT = re.compile(r"(?:e-?text\s+|this\s+e-?book\s+(?:was\s+)?)?(?:produced|transcribed|prepared|scanned|"
                     r"proofread|digiti[sz]ed)\b[^\n]{0,60}?\bby\b", re.I)
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n|\Z")
_CREDIT_CHARS = 600  # a credit paragraph is short; a longer one is the book's


def _after_credits(text: str, at: int) -> int:
    """`at`, or the end of the credit paragraphs (at most three) that follow it in `text`."""
    for _ in range(3):
        start = len(text) - len(text[at:].lstrip())
        end = _PARAGRAPH_END.search(text, start).start()
        if not _CREDIT.match(text, start) or end - start > _CREDIT_CHARS:
            break
        at = end
    return at


def header_end(library, doc_id: str) -> int | None:
    """The character offset where a Project Gutenberg edition's header ends (the end of its "*** START
    OF THIS PROJECT GUTENBERG EBOOK ... ***" line, or of the transcriber's credit under it: everything
    before it is licence), searched on the document's first pages; None when there is none. The book's
    text often opens on the same page, which is then no licence page (ingest.page_kind)."""
    if not hasattr(library, "document"):
        return None
    key = _view_key(library, doc_id)
    if key not in _STARTS:
        pages = library.pages(doc_id, with_text=True, numbers=set(range(1, _START_PAGES + 1)))
        hits = [p["char_start"] + _after_credits(p["text"], m.end())
                for p in pages for m in [GUTENBERG_START.search(p["text"])] if m]
        _STARTS[key] = min(hits) if hits else None
    return _STARTS[key]


_BACK: dict[tuple, list[tuple[int, int]]] = {}  # (home, doc_id, view's chunk limit) -> reference list spans (RAM)


def references_spans(library, doc_id: str) -> list[tuple[int, int]]:
    """The character spans of a paper's reference list: the parts ingest.parts makes "back matter"
    (its one "References" / "Bibliography" line, to where the next part begins, the appendices, or to
    the end; a book has none: a "References" line after each chapter is no such one line); [] for a
    bare page store (tests' stand-ins). Worked out once per document (and view)."""
    if not hasattr(library, "document") or not hasattr(library, "outline"):
        return []
    key = _view_key(library, doc_id)
    if key not in _BACK:
        _BACK[key] = [(p.char_start, p.char_end) for p in document_parts(library, doc_id)
                      if p.source == "back matter"]
    return _BACK[key]


def chunk_matter(library, doc_id: str, chunks: list[dict]) -> dict[int, str]:
    """{chunk idx: kind} for the chunks (library rows with idx, page_first, page_last, char_start,
    char_end) that lie on a licence, contents or index page, or after a Gutenberg edition's
    end-of-text line (its licence can start mid-page, under the story's last lines) or wholly before
    its header's end line (`header_end`: the story can start mid-page, under the header), or ("references")
    with half their characters or more in a paper's reference list (`references_spans`: it starts
    and may end mid-page); a chunk over two pages takes the first tagged one's kind. Reads only those
    chunks' pages, the document's last pages once, and its parts once."""
    numbers = {n for c in chunks for n in range(c["page_first"], c["page_last"] + 1)}
    if not numbers:
        return {}
    kinds = {p["number"]: k for p in library.pages(doc_id, with_text=True, numbers=numbers)
             if (k := matter_of(p["text"]))}
    end = licence_start(library, doc_id)
    head = header_end(library, doc_id)
    refs = references_spans(library, doc_id)
    out = {}
    for c in chunks:
        k = next((kinds[n] for n in range(c["page_first"], c["page_last"] + 1) if n in kinds), None)
        if k is None and end is not None and c.get("char_start", -1) >= end:
            k = "licence"
        if k is None and head is not None and "char_end" in c and c["char_end"] <= head:
            k = "licence"
        if k is None and refs and "char_start" in c:
            a, b = c["char_start"], c["char_end"]
            if 2 * sum(max(0, min(b, y) - max(a, x)) for x, y in refs) >= max(1, b - a):
                k = "references"
        if k is not None:
            out[c["idx"]] = k
    return out


def boilerplate_passages(paths, chunk_tokens: int = 63):
    """The 63-token chunks of every licence / contents / index page of the files at `paths`
    (parsed with ingest.parse, tokenized with the shipped tokenizer): np.ndarray [P, 63] int64."""
    import numpy as np

    from drt_core.tokenizer import encode

    from .parse import parse_file

    rows = []
    for p in paths:
        doc = parse_file(p)
        for page in doc.pages:
            if matter_of(page.text):
                ids = encode(page.text)
                rows += [ids[a:a + chunk_tokens] for a in range(0, len(ids) - chunk_tokens + 1, chunk_tokens)]
    return np.asarray(rows, dtype=np.int64).reshape(-1, chunk_tokens)


def main(argv=None) -> int:
    import argparse

    import numpy as np

    ap = argparse.ArgumentParser(prog="python -m ingest.boilerplate", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="documents (PDFs of the TRAINING split only)")
    ap.add_argument("--out", required=True, help="where to write the passages (.npy)")
    a = ap.parse_args(argv)
    rows = boilerplate_passages(a.files)
    np.save(a.out, rows)
    print(f"{len(rows)} boilerplate chunks from {len(a.files)} files -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
