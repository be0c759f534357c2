"""Store a synthetic document (text cut into pages and fixed-size chunks) in a test library."""

from __future__ import annotations

import hashlib


def store_text(library, text: str, *, page_chars: int = 400, chunk_chars: int = 60, kind: str = "text",
               outline: list[dict] = (), name: str = "t.txt") -> str:
    """Pages of `page_chars` and chunks of `chunk_chars` characters (pages joined by two characters
    that belong to no page, as ingest.parse joins them); returns the document id."""
    doc_id = hashlib.sha256((text + kind + name).encode()).hexdigest()
    pages, pos, n = [], 0, 0
    while pos < len(text) or not pages:
        body = text[pos:pos + page_chars]
        start = pos + 2 * n
        pages.append({"number": n + 1, "label": str(n + 1), "char_start": start, "char_end": start + len(body),
                      "text": body})
        pos += page_chars
        n += 1
    full_len = pages[-1]["char_end"]
    joined = ""
    for p in pages:
        joined += " " * (p["char_start"] - len(joined)) + p["text"]
    chunks, c = [], 0
    for i, a in enumerate(range(0, full_len, chunk_chars)):
        b = min(a + chunk_chars, full_len)
        pf = max(p["number"] for p in pages if p["char_start"] <= a)
        pl = max(p["number"] for p in pages if p["char_start"] < b)
        chunks.append({"idx": i, "tok_start": 63 * i, "tok_end": 63 * i + 63, "char_start": a, "char_end": b,
                       "page_first": pf, "page_last": pl, "text": joined[a:b]})
        c = i + 1
    doc = {"id": doc_id, "title": "T", "kind": kind, "source_name": name, "n_bytes": len(text), "n_pages": len(pages),
           "n_chars": full_len, "n_tokens": 63 * c, "n_chunks": c, "chunk_tokens": 63, "tokenizer_fp": "t",
           "warnings": []}
    library.add_document(doc, pages, chunks, list(range(63 * c)), outline=list(outline))
    return doc_id
