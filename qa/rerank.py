"""The cross-encoder inside the model's selection, and the answer it reads.

`ask` (qa.ask) asks the model first: the landmark that closes the question's prompt scores every
document chunk (Engine.question_scores: the learned scores plus the BM25 term). The pool is that
ranking's best POOL chunks, BM25's best BM25_POOL and, for "Who is X?", the chunks where X is
introduced. The cross-encoder (qa.cross_encoder) reads each pool chunk in its window (the chunk and
up to 150 characters each side, never the text of a masked chunk) and gives P(the answer is here).
`terms` turns that into a question-time term of the model's own selection, as BM25 is one:
weight x P for the pool's chunks, 0 elsewhere. The model then answers with it (generate, causal
effects): the trace, the heatmap, the evidence and the effects are the model's selection.

The answer is read from the windows of the chunks the model retrieved (`shown`): the best by the
cross-encoder first, then the next two; in the best, the cross-encoder's span is the short answer,
its sentence (grown to at most 400 characters, cut at a word) the quote. It abstains when no pool
chunk's P reaches the threshold chosen on validation (`Calibration`), and shows a short answer only
where validation measured it right often enough.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
import numpy as np

from .cross_encoder import PASSAGE_CONTEXT, Read, sigmoid
from .reader import quote_bounds, sentence_spans

POOL = 12  # the model's best chunks for the question
BM25_POOL = 6  # and BM25's
SHOWN = 3  # passages shown with an answer: the best, then the next two
QUOTE_MAX = 400


@dataclass
class Calibration:
    """What the checkpoint's cross_encoder.json says of its use, chosen on validation (docs/qa.md):
    the selection term's weight, the abstention threshold on the pool's best P, and the short
    answer's threshold on the best passage's span score (None: never shown)."""

    weight: float = 20.0
    abstain_below: float | None = None
    short_above: float | None = None
    sentence_weight: float = 0.0  # the cross-encoder's share in picking the quoted sentence (qa.reader.Reader.read)

    @classmethod
    def of(cls, meta: dict) -> "Calibration":
        c = meta.get("calibration") or {}
        return cls(**{k: c[k] for k in ("weight", "abstain_below", "short_above", "sentence_weight") if k in c})


@dataclass
class Window:
    chunk: int
    text: str
    base: int  # document character of text[0]
    read: Read | None = None
    rows: list[dict] = field(default_factory=list)  # the library rows of the chunk and its neighbours

    @property
    def p(self) -> float:
        return sigmoid(self.read.relevance) if self.read is not None else 0.0

    def pages(self, a: int, b: int) -> list[int]:
        """The pages of document characters [a, b) of this window."""
        return sorted({pg for x in self.rows if x["char_end"] > a and x["char_start"] < b
                       for pg in range(x["page_first"], x["page_last"] + 1)})


def pool(scores: np.ndarray | None, bm25: np.ndarray | None, barred: frozenset[int], first: list[int],
         n_chunks: int, k: int = POOL, k_bm25: int = BM25_POOL) -> list[int]:
    """The chunks the cross-encoder reads: `first` (the introducing chunks of "Who is X?"), the
    model's best `k` (POOL) by its question-time scores, BM25's best `k_bm25` (BM25_POOL); none barred."""
    out: list[int] = []

    def add(cs):
        for c in cs:
            c = int(c)
            if 0 <= c < n_chunks and c not in barred and c not in out:
                out.append(c)

    add(first)
    for s, depth in ((scores, k), (bm25, k_bm25)):
        if s is not None and len(s):
            s = np.asarray(s, np.float64)[:n_chunks]
            order = np.lexsort((np.arange(len(s)), -np.nan_to_num(s, nan=-np.inf, neginf=-1e30)))
            add([c for c in order if np.isfinite(s[c])][:depth])
    return out


def windows(library, doc_id: str, chunks: list[int], barred: frozenset[int]) -> dict[int, Window]:
    """Each chunk's window: its text with up to PASSAGE_CONTEXT characters of each neighbour that is
    not barred, cut at whitespace, and the pages it spans."""
    want = sorted({x for c in chunks for x in (c - 1, c, c + 1) if x >= 0 and x not in barred})
    rows = {r["idx"]: r for r in library.chunks(doc_id, want)}
    out = {}
    for c in chunks:
        me = rows.get(c)
        if me is None:
            continue
        before, after = rows.get(c - 1), rows.get(c + 1)
        head = before["text"][-PASSAGE_CONTEXT:] if before is not None else ""
        tail = after["text"][:PASSAGE_CONTEXT] if after is not None else ""
        if head and before["char_end"] == me["char_start"]:
            m = re.search(r"\s", head)
            head = head[m.end():] if m and len(head) == PASSAGE_CONTEXT else head
        else:
            head = ""
        if tail and after["char_start"] == me["char_end"]:
            k = max((m.start() for m in re.finditer(r"\s", tail)), default=None)
            tail = tail[:k] if k is not None and len(tail) == PASSAGE_CONTEXT else tail
        else:
            tail = ""
        base = me["char_start"] - len(head)
        out[c] = Window(c, head + me["text"] + tail, base, rows=[x for x in (before, me, after) if x is not None])
    return out


def read_pool(scorer, question: str, wins: dict[int, Window]) -> None:
    """The cross-encoder's relevance and span for every window, in place."""
    order = list(wins)
    reads = scorer.read(question, [wins[c].text for c in order])
    for c, r in zip(order, reads):
        wins[c].read = r


def terms(wins: dict[int, Window], n_chunks: int, weight: float) -> np.ndarray:
    """The selection term: weight x P(the answer is here) for each read chunk, 0 elsewhere."""
    t = np.zeros(n_chunks, np.float64)
    for c, w in wins.items():
        if w.read is not None and c < n_chunks:
            t[c] = weight * w.p
    return t


def shown(wins: dict[int, Window], retrieved: list[int], k: int = SHOWN) -> list[Window]:
    """The passages shown: the model's retrieved chunks that the cross-encoder read, best P first;
    the pool's best unretrieved ones only where fewer than k were retrieved."""
    got = [wins[c] for c in retrieved if c in wins and wins[c].read is not None]
    got.sort(key=lambda w: -w.p)
    if len(got) < k:
        rest = sorted((w for c, w in wins.items() if c not in retrieved and w.read is not None), key=lambda w: -w.p)
        got += rest[: k - len(got)]
    return got[:k]


def cut_at_word(text: str, a: int, b: int) -> int:
    """b moved back to the end of the last whole word of text[a:b] (b unchanged at a word's end)."""
    if b >= len(text) or not (text[b - 1].isalnum() and text[b].isalnum()):
        return b
    k = max((m.start() for m in re.finditer(r"\s", text[a:b])), default=None)
    return a + k if k is not None and k > 0 else b


def whole_text(win: Window) -> tuple[str, int]:
    """The window's chunk with the whole of each neighbour it may read (adjacent and not barred:
    `windows` fetched only those), and the document character of its first: a quote can then start
    at its sentence's start and end at its end, across the chunk's edges, and never show a masked chunk."""
    me = next((x for x in win.rows if x.get("idx") == win.chunk and "text" in x), None)
    if me is None:  # rows without their text: the window alone
        return win.text, win.base
    before = next((x for x in win.rows if x.get("idx") == win.chunk - 1 and x["char_end"] == me["char_start"]), None)
    after = next((x for x in win.rows if x.get("idx") == win.chunk + 1 and x["char_start"] == me["char_end"]), None)
    parts = [x for x in (before, me, after) if x is not None]
    return "".join(x["text"] for x in parts), parts[0]["char_start"]


def quote_of(win: Window) -> dict | None:
    """The quote in a window: the whole sentence holding the cross-encoder's span (or, without one,
    the window's first whole sentence), grown to at most QUOTE_MAX characters, never cut inside a
    word; the span as `span_text` (None when outside the quote). The sentence may begin or end in
    a neighbour the window read from (`whole_text`): the window's edge is no sentence's.
    `short`, the short answer shown, is the caller's: short_shown decides it."""
    r = win.read
    if r is None:
        return None
    text, base = whole_text(win)
    off = win.base - base  # the window's text starts at text[off]
    spans = sentence_spans(text)
    at = off + (r.span[0] if r.span is not None else 0)
    i = next((j for j, (x, y) in enumerate(spans) if x <= at < y), None)
    if i is None:  # between two sentences: the next one
        i = next((j for j, (x, _) in enumerate(spans) if x >= at), len(spans) - 1)
    a, b = spans[i] if spans else (0, len(text))
    sa, sb = a, b
    a, b = quote_bounds(text, a, b, limit=QUOTE_MAX)
    b = cut_at_word(text, a, b)
    span_text, span = None, None
    if r.span is not None:
        span = [win.base + r.span[0], win.base + r.span[1]]
        if base + a <= span[0] and span[1] <= base + b:
            span_text = " ".join(win.text[r.span[0]:r.span[1]].split()) or None
    return {"text": " ".join(text[a:b].split()), "sentence": " ".join(text[sa:sb].split()),
            "short": None, "span_text": span_text, "chunk": win.chunk,
            "char_start": base + a, "char_end": base + b,
            "sentence_start": base + sa, "sentence_end": base + sb, "span": span,
            "pages": win.pages(base + a, base + b),
            "cross_encoder": {"p": round(win.p, 4), "relevance": round(r.relevance, 4),
                              "span_score": None if r.span is None else round(r.span_score, 4)}}


def passage_row(win: Window) -> dict:
    """A shown passage: its chunk, its text (the window), its cross-encoder P and span."""
    return {"chunk": win.chunk, "text": " ".join(win.text.split()), "p": round(win.p, 4),
            "char_start": win.base, "char_end": win.base + len(win.text),
            "pages": win.pages(win.base, win.base + len(win.text))}


def decide(wins: dict[int, Window], cal: Calibration) -> tuple[bool, float]:
    """(abstain, the pool's best P): abstain when the best P is below the calibrated threshold."""
    best = max((w.p for w in wins.values() if w.read is not None), default=0.0)
    return (cal.abstain_below is not None and best < cal.abstain_below), best


def short_shown(quote: dict | None, cal: Calibration) -> str | None:
    """The short answer, where validation measured it right often enough at this span score."""
    if quote is None or not quote.get("span_text") or cal.short_above is None:
        return None
    s = (quote.get("cross_encoder") or {}).get("span_score")
    return quote["span_text"] if s is not None and s >= cal.short_above else None

