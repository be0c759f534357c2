"""What an answer shows of the document: evidence rows (chunk, pages, weight, text) and passage
text cut at whole words, for the CLI, the UI and export alike."""

from __future__ import annotations

import re
from typing import Any

from ingest.boilerplate import chunk_matter
from store.library import Library

MAX_EVIDENCE = 8
_LINE_END_HYPHEN = re.compile(r"(?<=[^\W\d_]-)[ \t]*\n\s*(?=[^\W\d_])")


def weight_text(w: float) -> str:
    """A fusion weight as the CLI, the UI and export print it: "0.412", or "under 0.001" for a chunk of the
    model's top-k that the softmax over the picked chunks' scores gave almost nothing. Walk 12: an outlined
    cell read "retrieved (top-k), weight 0.000" (chunk 742 at relevance 27.680), which looked like a
    contradiction; `ask` and `export` printed the same."""
    return "under 0.001" if 0 < w < 0.0005 else f"{w:.3f}"


def flat(text: str) -> str:
    """`text` on one line as a reader sees it: whitespace collapsed, and a word broken at a line-end
    hyphen joined with its hyphen ("well-" / "known" is "well-known", not "well- known": walk 11)."""
    return " ".join(_LINE_END_HYPHEN.sub("", str(text or "")).split())


ELIDED = "[…]"
_MIN_LEFT = 40  # characters of a passage, the quote taken out, worth showing


def also_relevant(passages: list[dict], quote: dict) -> list[dict]:
    """The passages shown after a quote ("Also relevant"), the CLI, the UI and export alike: not the
    quote's chunk, and with the quoted text taken out where a passage repeats it ("[…]" marks where): a
    neighbouring chunk's window holds the quoted sentence again (walk 14: "Fresleven--that was the
    fellow's name" printed twice). A passage with little else left is not shown."""
    said = [t for t in (flat(quote.get("text")), flat(quote.get("sentence"))) if len(t) >= _MIN_LEFT]
    out = []
    for p in passages:
        if p["chunk"] == quote.get("chunk"):
            continue
        text = flat(p.get("text"))
        t = next((t for t in said if t in text), None)
        if t is None:  # it does not repeat the quote: shown as it is
            out.append(p)
            continue
        text = " ".join(text.replace(t, f" {ELIDED} ").split())
        if len(text.replace(ELIDED, "").strip()) >= _MIN_LEFT:
            out.append({**p, "text": text})
    return out


def snippet(text: str, limit: int | None = None, head: bool | None = None, tail: bool | None = None) -> str:
    """A chunk's text for display: whitespace collapsed, at most `limit` characters cut after a
    whole word with "…" (a first word longer than `limit` is kept whole): never in the middle of a
    word. `head` / `tail`: the text starts / ends inside a word (a chunk cut by its neighbour; see
    `cut_words`), which is dropped, "…" marking it; None guesses it (a lower-case start, a letter
    or digit at the end)."""
    s = flat(text)
    if head is None:
        head = s[:1].islower()
    if tail is None:
        tail = s[-1:].isalnum()
    pre = ""
    if head and " " in s:
        s, pre = s.split(" ", 1)[1], "…"
    if limit is None or len(s) <= limit:
        if tail and " " in s:
            return pre + s.rsplit(" ", 1)[0] + "…"
        return pre + s
    cut = s.rfind(" ", 0, limit + 1)
    if cut <= 0:
        cut = s.find(" ")
        return pre + (s if cut < 0 else s[:cut] + "…")
    return pre + s[:cut].rstrip() + "…"


def cut_words(library: Library, doc_id: str, rows: list[dict]) -> dict[int, tuple[bool, bool]]:
    """Per evidence chunk: (starts inside a word, ends inside a word). Chunks are contiguous slices
    of the text, so a word runs on when this chunk and its neighbour meet on two letters or digits."""
    want = sorted({c + d for r in rows for c in [int(r["chunk"])] for d in (-1, 1) if c + d >= 0})
    texts = {r["idx"]: r["text"] for r in library.chunks(doc_id, want)} if want else {}
    out = {}
    for r in rows:
        c, t = int(r["chunk"]), str(r.get("text") or "")
        before, after = texts.get(c - 1, ""), texts.get(c + 1, "")
        out[c] = (t[:1].isalnum() and before[-1:].isalnum(), t[-1:].isalnum() and after[:1].isalnum())
    return out


def trace_json(trace: Any) -> dict:
    """A RetrievalTrace as JSON ({"chunks": [{"gen_chunk", "topk", "weights", "scores"}, ...]})."""
    if trace is None:
        return {"chunks": []}
    if hasattr(trace, "to_json"):
        return trace.to_json()
    return dict(trace)


def evidence_rows(library: Library, doc_id: str, evidence: Any, limit: int = MAX_EVIDENCE) -> list[dict]:
    """[(chunk_id, weight), ...] -> [{"chunk", "pages", "weight", "text", "matter"}], heaviest first.

    `matter` is "licence", "contents" or "index" for a chunk on such a page (ingest.boilerplate),
    else None. Chunk ids past the document (the question's own chunks) are dropped.
    """
    pairs = [(int(c), float(w)) for c, w in evidence]
    pairs.sort(key=lambda cw: (-cw[1], cw[0]))
    rows = {r["idx"]: r for r in library.chunks(doc_id, [c for c, _ in pairs])}
    kept = [(c, w) for c, w in pairs if c in rows][:limit]
    matter = chunk_matter(library, doc_id, [rows[c] for c, _ in kept])
    return [{"chunk": c, "pages": list(range(rows[c]["page_first"], rows[c]["page_last"] + 1)),
             "weight": round(w, 6), "text": rows[c]["text"], "matter": matter.get(c)} for c, w in kept]
