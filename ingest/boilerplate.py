"""Front and back matter: licence pages, contents lists and indexes, told apart from the text.

`matter_of(text)` names a page's kind ("licence", "contents", "index" or None) from what it says,
not from where it sits: a Project Gutenberg PDF carries the licence on its last pages and its header
on the first, a book's contents list is a run of short numbered lines, an index a run of
"term, 12, 45" lines. `chunk_matter` tags chunks by the pages they lie on, from the stored page
text (so documents stored before the tag existed get it too): every evidence row and quote of `ask`
carries its chunk's tag (`matter`), and the CLI and the UI show it beside the pages;
`python -m ingest.boilerplate PDF... --out passages.npy` writes their 63-token chunks for
training (`train --qa-boilerplate`), where they are written into the windows of reading
questions, so the model learns that they answer nothing. The tag is for the reader; the fix is in
what the model learns.
"""

from __future__ import annotations

import re

LICENCE_MARKERS = ("project gutenberg", "gutenberg literary archive", "gutenberg-tm", "gutenberg™",
                   "electronic works", "this ebook is for the use of anyone", "terms of the project gutenberg",
                   "full project gutenberg license", "donations", "trademark")
_NUMBERED_LINE = re.compile(r"^\s*(chapter|book|part|section|[ivxlc]+\.|\d+\.?)\b.{0,80}$", re.I | re.M)
_INDEX_LINE = re.compile(r"^.{1,60},\s*\d+(\s*[,–-]\s*\d+)*\s*$", re.M)
_LEADER_LINE = re.compile(r"^\s*(?P<head>\S.{0,100}?)(?:\s?\.){4,}\s*[\dxivlc]+\s*$", re.M | re.I)  # "1.2 X . . 3"
# a chapter named by its number ("CHAPTER XII", "Chapter 12"): a contents list names many on one page,
# even when its entries run on as one paragraph (a PDF made from a plain-text edition)
_CHAPTER_NAMED = re.compile(r"\bchapter\s+([ivxlc]{1,7}|\d{1,3})\b", re.I)
CONTENTS_CHAPTERS = 6  # distinct chapters named on one page, at most CONTENTS_CHARS characters apart on average:
CONTENTS_CHARS = 200   # its contents list (prose names one or two; a commentary chapter by chapter, a paragraph each)


def matter_of(text: str) -> str | None:
    """"licence" when the page speaks of the Gutenberg licence (two markers or more), "contents"
    when most of its non-empty lines are short numbered headings or it names CONTENTS_CHAPTERS
    chapters by number or more, close together, "index" when most are
    "term, page" lines; most lines led by dots to a page number ("2.1 Naming . . . 3",
    "asn1_copy_node . . . 11") are "contents" when most are numbered, else "index"; None for
    ordinary text."""
    low = text.lower()
    if sum(m in low for m in LICENCE_MARKERS) >= 2:
        return "licence"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) >= 8:
        if len(_INDEX_LINE.findall(text)) >= 0.6 * len(lines):
            return "index"
        leaders = [m.group("head") for m in _LEADER_LINE.finditer(text)]
        if len(leaders) >= 0.6 * len(lines):  # dot leaders: a contents list, or an index of terms
            numbered = sum(bool(_NUMBERED_LINE.match(h) or re.match(r"[A-Z](\.\d+)+\b", h)) for h in leaders)
            return "contents" if numbered >= 0.5 * len(leaders) else "index"
        if len(_NUMBERED_LINE.findall(text)) >= 0.6 * len(lines):
            return "contents"
    named = _CHAPTER_NAMED.findall(text)  # distinct chapters: prose may name its own chapter often
    if len({n.lower() for n in named}) >= CONTENTS_CHAPTERS and len(text.strip()) <= CONTENTS_CHARS * len(named):
        return "contents"
    return None


MATTER_LABELS = {"licence": "licence page", "contents": "contents page", "index": "index page"}


def matter_label(row: dict) -> str | None:
    """"licence page" (contents page, index page) for an evidence row or quote tagged `matter`, else None."""
    return MATTER_LABELS.get(row.get("matter") or "")


# the line a Project Gutenberg edition ends its text with; the licence follows it, on the same page
_GUTENBERG_END = re.compile(r"\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG EBOOK"
                            r"|End of (?:the )?Project Gutenberg'?s? (?:EBook|E-text|Etext)?", re.I)
_END_PAGES = 12  # the last pages searched for that line
_ENDS: dict[tuple, int | None] = {}  # (home, doc_id, view's chunk limit) -> where the licence starts (RAM)


def licence_start(library, doc_id: str) -> int | None:
    """The character offset of a Project Gutenberg edition's end-of-text line (everything from it on
    is its licence), searched on the document's last pages; None when there is none."""
    if not hasattr(library, "document"):  # a bare page store (tests' stand-ins): no last pages to read
        return None
    key = (str(getattr(library, "home", "")), doc_id, getattr(library, "limit", None))  # (a reader's view: its own)
    if key not in _ENDS:
        n = library.document(doc_id)["n_pages"]
        pages = library.pages(doc_id, with_text=True, numbers=set(range(max(1, n - _END_PAGES + 1), n + 1)))
        hits = [p["char_start"] + m.start() for p in pages for m in [_GUTENBERG_END.search(p["text"])] if m]
        _ENDS[key] = min(hits) if hits else None
    return _ENDS[key]


def chunk_matter(library, doc_id: str, chunks: list[dict]) -> dict[int, str]:
    """{chunk idx: kind} for the chunks (library rows with idx, page_first, page_last) that lie on
    a licence, contents or index page, or after a Gutenberg edition's end-of-text line (its licence
    can start mid-page, under the story's last lines); a chunk over two pages takes the first tagged
    one's kind. Reads only those chunks' pages, and the document's last pages once."""
    numbers = {n for c in chunks for n in range(c["page_first"], c["page_last"] + 1)}
    if not numbers:
        return {}
    kinds = {p["number"]: k for p in library.pages(doc_id, with_text=True, numbers=numbers)
             if (k := matter_of(p["text"]))}
    end = licence_start(library, doc_id)
    out = {}
    for c in chunks:
        k = next((kinds[n] for n in range(c["page_first"], c["page_last"] + 1) if n in kinds), None)
        if k is None and end is not None and c.get("char_start", -1) >= end:
            k = "licence"
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
