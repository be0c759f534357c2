"""Two plain retrievers over a document's chunks, the yardsticks of `drt-reader eval qa`.

Both index exactly the chunk texts the library stores for a document (the 63-token chunks DRT
retrieves), so a comparison with DRT's evidence is chunk for chunk:

    bm25 = BM25Index(texts)      # lexical: SQLite FTS5, porter stemming, BM25 ranking
    dense = MiniLMIndex(texts)   # semantic: frozen all-MiniLM-L6-v2 embeddings, cosine (faiss)
    bm25.search(question, k)     # -> [(chunk index, score), ...], best first, higher is better

Their "answer" is the quote `qa.ask.quote_from_evidence` takes from their top chunk (the rule
DRT's answer follows; `eval qa`).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import numpy as np

# word tokens: letters and digits only (no "_", no quotes, no FTS5 operators or syntax characters)
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of `text`."""
    return _WORD.findall(text.lower())


def fts_query(question: str) -> str:
    """A safe FTS5 MATCH expression for any text: each distinct word quoted, OR-ed together.

    Quoting makes every term a plain string (a question saying NEAR, AND or "col:" stays text);
    the word regex already drops quotes, *, -, ^, :, parentheses. "" when no word is left."""
    terms = dict.fromkeys(words(question))  # distinct, in order
    return " OR ".join(f'"{t}"' for t in terms)


class BM25Index:
    """BM25 over `texts` with SQLite FTS5 (in memory; tokenizer 'porter unicode61')."""

    def __init__(self, texts: list[str]):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE chunks USING fts5(text, tokenize='porter unicode61')")
        self.db.executemany("INSERT INTO chunks (rowid, text) VALUES (?, ?)", enumerate(texts))

    def search(self, question: str, k: int) -> list[tuple[int, float]]:
        """The k best chunks as (index, -bm25) pairs, best first ([] if the question has no words)."""
        q = fts_query(question)
        if not q or k < 1:
            return []
        rows = self.db.execute(
            "SELECT rowid, -bm25(chunks) FROM chunks WHERE chunks MATCH ? "
            "ORDER BY bm25(chunks), rowid LIMIT ?",
            (q, int(k)),
        ).fetchall()
        return [(int(i), float(s)) for i, s in rows]


class MiniLMIndex:
    """Cosine similarity of frozen MiniLM embeddings (`drt_core.fixed_retriever.embed_texts`, the
    RPT baseline's embedder, unit vectors) in a faiss inner-product index."""

    def __init__(self, texts: list[str], device: str = "cpu", cache: str | Path | None = None):
        """`cache`: a folder keeping each text list's embeddings (by the texts' hash), so that a second
        evaluation of the same documents does not embed them again (about 1,300 tokens/s on 2 cores)."""
        import faiss

        from drt_core.fixed_retriever import EMBED_DIM, embed_texts

        self.device = device
        self.index = faiss.IndexFlatIP(EMBED_DIM)
        if not texts:
            return
        path = None
        if cache is not None:
            h = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
            path = Path(cache) / f"minilm-{h}.npy"
        if path is not None and path.is_file():
            emb = np.load(path)
        else:
            emb = embed_texts(list(texts), device=device).cpu().numpy().astype("float32")
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp.npy")
                np.save(tmp, emb)
                tmp.replace(path)
        self.index.add(emb)

    def search(self, question: str, k: int) -> list[tuple[int, float]]:
        """The k chunks nearest the question as (index, cosine) pairs, best first."""
        from drt_core.fixed_retriever import embed_texts

        k = min(int(k), self.index.ntotal)
        if k < 1 or not question.strip():
            return []
        q = embed_texts([question], device=self.device).cpu().numpy().astype("float32")
        scores, ids = self.index.search(q, k)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
