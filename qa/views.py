"""The library as a reader sees it in two cases: one who stopped before page N (`BeforePage`, with
`prefix_state`, the model's state after those pages), and a masked answer (`Redacted`: the barred
chunks' text blank). `ask`, `summarize` and the UI read through them, so nothing past the page or
inside a masked chunk can show."""

from __future__ import annotations

from typing import Any

from drt_core.protocol import DocumentEngine
from store.library import Library

from .errors import QAError

class BeforePage:
    """The library as a reader who has read only up to page N sees it (spoiler-safe reading): the
    document's chunks that end before page N (`limit` of them), their pages; everything else
    passes through to the library. `ask(before_page=N)` answers from this view and from the model's
    state after those chunks, so the answer is the one the document truncated there would get."""

    def __init__(self, library: Library, doc_id: str, page: int):
        self._lib, self.doc_id = library, doc_id
        doc = library.document(doc_id)
        if not 2 <= int(page) <= doc["n_pages"]:
            raise QAError(f"before page {page}: this document has pages 1-{doc['n_pages']}, so the page must be "
                          f"between 2 and {doc['n_pages']}")
        rows = library.chunks(doc_id)
        self.limit = next((r["idx"] for r in rows if r["page_last"] >= int(page)), len(rows))
        if self.limit < 2:
            raise QAError(f"nothing ends before page {page}: ask about a later page")
        self.page = int(page)
        self.n_tokens = rows[self.limit - 1]["tok_end"]
        self.last_page = rows[self.limit - 1]["page_last"]
        self.n_chars = rows[self.limit - 1]["char_end"]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def chunks(self, doc_id: str, indices=None) -> list[dict]:
        if indices is not None:
            indices = [i for i in indices if int(i) < self.limit]
            if not indices:
                return []
        return [r for r in self._lib.chunks(doc_id, indices) if r["idx"] < self.limit]

    def document(self, doc_id: str) -> dict:
        return dict(self._lib.document(doc_id), n_chunks=self.limit)

    def pages(self, doc_id: str, with_text: bool = False, numbers=None) -> list[dict]:
        """The pages the read chunks lie on, the last one cut where they end: the pages of the
        document truncated there."""
        out = []
        for p in self._lib.pages(doc_id, with_text=with_text, numbers=numbers):
            if p["number"] > self.last_page or p["char_start"] >= self.n_chars:
                continue
            if p["char_end"] > self.n_chars:
                p = dict(p, char_end=self.n_chars)
                if with_text:
                    p["text"] = p["text"][: self.n_chars - p["char_start"]]
            out.append(p)
        return out


def read_before(out: dict) -> int | None:
    """The page an answer was read before (`ask(before_page=N)` records it in how the answer was
    made), or None for an answer from the whole document."""
    page = out.get("before_page")
    return int(page) if page else None


def spoiler_note(out: dict) -> str:
    """One sentence saying that the answer read only the pages before p. N; "" for the whole document."""
    page = read_before(out)
    return f"Read only the pages before p. {page} (spoiler-safe)." if page else ""


_PREFIXES: dict[tuple, Any] = {}  # (home, doc, model, tokens) -> the state after a prefix (RAM, two kept)


class Redacted:
    """The library as a masked answer reads it: the text of the barred chunks is blank (a blank line,
    then spaces: indices, character offsets and pages unchanged), so no quote, passage or evidence
    row made from it can show a masked chunk's text (a sentence crossing into one ends there)."""

    def __init__(self, library: Library, doc_id: str, barred: frozenset[int]):
        self._lib, self._doc, self._barred = library, doc_id, barred

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def chunks(self, doc_id: str, indices=None) -> list[dict]:
        rows = self._lib.chunks(doc_id, indices)
        if doc_id != self._doc:
            return rows
        return [dict(r, text=blank(r["text"])) if r["idx"] in self._barred else r for r in rows]


def blank(text: str) -> str:
    """`text` blanked, its length kept: a blank line (a sentence ends there), then spaces."""
    return ("\n\n" + " " * (len(text) - 2)) if len(text) >= 2 else " " * len(text)


def prefix_state(library: Library, engine: DocumentEngine, doc_id: str, n_tokens: int, full: Any = None) -> Any:
    """The model's state after the document's first `n_tokens` tokens (a chunk boundary), prefilled
    in memory from the stored token ids: exactly the state of the document truncated there. With
    `full`, the document's stored state, it starts from the stored state's last snapshot before the
    cut (`Engine.prefix`: at most state_io.SNAPSHOT_TOKENS to prefill), else from the start."""
    key = (str(library.home), doc_id, str(engine.fingerprint), int(n_tokens))
    if key not in _PREFIXES:
        while len(_PREFIXES) >= 2:
            _PREFIXES.pop(next(iter(_PREFIXES)))
        prefix = getattr(engine, "prefix", None)
        state = prefix(full, int(n_tokens)) if prefix is not None and full is not None else None
        if state is None:
            state = engine.new_state(None)
        for _ in engine.prefill(state, library.token_ids(doc_id)[: int(n_tokens)]):
            pass
        _PREFIXES[key] = state
    return _PREFIXES[key]
