"""A document's chunk memory as the engine reads it: the overlay a generation writes on, and the
indexes derived from the stored chunks.

- `OverlayMemory`: a read-only stored memory plus the chunks a generation appends, in RAM; a fork
  of a document's state (DocState.fork) writes there, so a question never changes the document.
- `MemoryIndex`: what the engine computes from one memory's stored chunks and keeps, grown as the
  memory grows: the token ids (what the lexical term, the fixed retriever and BM25 read), each
  chunk's distinct tokens and whole words (the lexical term), the running in-document counts
  (`LexicalStats`), the frozen MiniLM embeddings (the fixed_retriever baseline), an exact faiss
  inner-product index over the landmark keys (Engine(use_faiss=True)), and the BM25 index of the
  chunks' texts (the question's selection term). A fork's index starts from its base's rows, so
  every question about a stored document computes only its own new chunks.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from store.chunk_store import ChunkMemory, RamChunkMemory

from .bm25 import BM25
from .fixed_retriever import EMBED_DIM, embed_chunks
from .lexical import LexicalStats, distinct_max, distinct_tokens
from .drt import select_topk

FAISS_MARGIN = 8  # extra hits fetched so near-ties at the k-th place resolve on the exact scores


class PrefixMemory(ChunkMemory):
    """The first `n` rows of a stored memory, read-only: the document's memory as it stood when its
    prefill had read that far (`Engine.prefix`, under an OverlayMemory for what is fed after)."""

    def __init__(self, base: ChunkMemory, n: int):
        assert 0 <= n <= base.n, (n, base.n)
        self.base, self._n = base, int(n)
        self.D, self.N, self.G, self.k = base.D, base.N, base.G, base.k

    @property
    def n(self) -> int:
        return self._n

    def keys(self) -> np.ndarray:
        return self.base.keys()[: self._n]

    def gather(self, idx):
        return self.base.gather(idx)

    def gather_keys(self, idx):
        return self.base.gather_keys(idx)

    def tokens(self, idx):
        return self.base.tokens(idx)

    def word_gates(self, idx):
        return self.base.word_gates(idx)

    def selections(self):
        si, sw = self.base.selections()
        return si[: self._n], sw[: self._n]


class OverlayMemory(ChunkMemory):
    """A read-only base memory plus chunks appended in RAM: generation never mutates a stored doc."""

    def __init__(self, base: ChunkMemory):
        self.base = base
        self.D, self.N, self.G, self.k = base.D, base.N, base.G, base.k
        self.top = RamChunkMemory(base.D, base.N, base.G, base.k, np.float32)
        self.n0 = base.n

    @property
    def n(self) -> int:
        return self.n0 + self.top.n

    def append(self, *rows) -> None:
        self.top.append(*rows)

    def set_selection(self, rows, sel_idx, sel_w) -> None:
        rows = np.asarray(rows)
        assert (rows >= self.n0).all(), "generation must not rewrite the stored document"
        self.top.set_selection(rows - self.n0, sel_idx, sel_w)

    def keys(self) -> np.ndarray:
        return np.concatenate([self.base.keys(), self.top.keys()]) if self.top.n else self.base.keys()

    def gather(self, idx):
        row = ((self.N, self.D), np.float32)
        return self._merge(idx, lambda mem, rows: mem.gather(rows), (row, row))

    def gather_keys(self, idx):
        return self._merge(idx, lambda mem, rows: (mem.gather_keys(rows),), (((self.N, self.D), np.float32),))[0]

    def tokens(self, idx):
        return self._merge(idx, lambda mem, rows: (mem.tokens(rows),), (((self.N,), np.int32),))[0]

    def word_gates(self, idx):
        return self._merge(idx, lambda mem, rows: (mem.word_gates(rows),), (((self.N, 2), np.float32),))[0]

    def _merge(self, idx, read, rows_as) -> tuple[np.ndarray, ...]:
        """read(memory, rows) -> arrays [len(rows), *shape], one per (shape, dtype) of `rows_as`, from
        the base for rows below n0 and from the RAM top above, put back in idx's order and shape."""
        idx = np.asarray(idx)
        lo = idx < self.n0
        out = tuple(np.zeros((*idx.shape, *shape), dtype) for shape, dtype in rows_as)
        for rows, mem, off in ((lo, self.base, 0), (~lo, self.top, self.n0)):
            if rows.any():
                for o, part in zip(out, read(mem, idx[rows] - off)):
                    o[rows] = part
        return out

    def selections(self):
        bi, bw = self.base.selections()
        ti, tw = self.top.selections()
        return np.concatenate([bi, ti]), np.concatenate([bw, tw])


class MemoryIndex:
    """The per-chunk data derived from one chunk memory, cached and grown as the memory grows (a
    truncated memory starts them again). `base`: the index of the stored memory under an
    OverlayMemory (a fork's); its rows for the shared chunks are reused, never recomputed."""

    def __init__(self, memory: ChunkMemory, device: torch.device, base: MemoryIndex | None = None):
        self.memory, self.device, self.base = memory, device, base
        self.rows: dict[str, torch.Tensor] = {}  # name -> one row per stored chunk
        self.stats: LexicalStats | None = None
        self.faiss = None  # faiss.IndexFlatIP over the landmark keys (faiss_topk)
        self.bm25_index: BM25 | None = None

    def _grown(self, name: str, n: int, empty: Callable[[], torch.Tensor],
               grow: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Rows `name` for the memory's n chunks: the cached ones (a fork's from its base's, for the
        chunks they share), `grow(have)` appending the missing ones."""
        have = self.rows.get(name)
        if have is None and self.base is not None:
            base, n0 = self.base.rows.get(name), self.memory.n0
            have = base[:n0] if base is not None and len(base) >= n0 else None
        if have is None or len(have) > n:
            have = empty()
        if len(have) < n:
            have = grow(have)
        self.rows[name] = have
        return have

    def _stored(self, name: str, read, tail: tuple, dtype) -> torch.Tensor:
        """[n, *tail] rows the memory stores per chunk (read(memory, rows)), for every stored chunk, on
        the CPU: read once per chunk, a fork's shared chunks from its base's."""
        mem = self.memory

        def grow(have):
            return torch.cat([have, torch.from_numpy(np.asarray(read(mem, np.arange(len(have), mem.n)), dtype))])

        return self._grown(name, mem.n, lambda: torch.from_numpy(np.zeros((0, *tail), dtype)), grow)

    def tokens(self) -> torch.Tensor:
        """[n, N] token ids of every stored chunk, on the engine's device (kept on the CPU)."""
        return self._stored("tokens", lambda mem, rows: mem.tokens(rows), (self.memory.N,), np.int32).to(self.device)

    def per_chunk(self, name: str, compute, empty, context: int = 0) -> torch.Tensor:
        """A per-chunk function of the stored token ids, for every stored chunk, cached as `name`.
        context > 0: compute(toks, chunks) also reads the `context` stored rows before the new ones
        (chunks: the rows' chunk indices); their own results are dropped."""
        toks = self.tokens()

        def grow(have):
            a = len(have)
            if context:
                a0 = max(0, a - context)
                new = compute(toks[a0:], torch.arange(a0, len(toks), device=toks.device))[a - a0:]
            else:
                new = compute(toks[a:])
            return torch.cat([have.to(toks.device), new])

        return self._grown(name, len(toks), lambda: empty(toks), grow)

    def word_gates(self) -> torch.Tensor:
        """[n, N, 2] (config lexical_gates): every stored chunk's word gates as the memory holds them
        (LexicalScorer.word_gates of its lower-layer states, stored by the stream beside its tokens),
        on the CPU; read once per chunk, a fork's shared chunks from its base's."""
        return self._stored("word_gates", lambda mem, rows: mem.word_gates(rows), (self.memory.N, 2), np.float32)

    def key_word_gates(self, lexical) -> torch.Tensor:
        """[n, N]: the key-side word gates of every stored chunk aligned with its distinct words (the
        `distinct_words` rows of lexical_stats: a word's largest gate in the chunk, lexical.distinct_max)."""
        raw = self.word_gates()

        def gates(t, c):  # c: the rows' chunk indices (a word cut by a boundary is whole where it ends)
            return distinct_max(lexical.word_ids(t[None], c)[0], raw[c.cpu(), :, 1].to(t.device))[1]

        return self.per_chunk("key_word_gates", gates, lambda t: torch.zeros(0, t.shape[1], device=t.device),
                              context=1)

    def embeddings(self, cfg) -> torch.Tensor:
        """[n, 384] frozen MiniLM embeddings of every stored chunk's text (the fixed_retriever
        baseline's keys and queries, drt_core.fixed_retriever), computed from the stored token ids
        (a reopened state recomputes them)."""
        return self.per_chunk("embeddings",
                              lambda toks: embed_chunks(toks.long(), cfg)[:, 0],  # one chunk a row
                              lambda toks: torch.zeros(0, EMBED_DIM, device=toks.device))

    def lexical_stats(self, lexical, vocab_size: int, pad: int) -> LexicalStats:
        """The memory's LexicalStats (the lexical term's in-document counts). A fork's starts from
        a copy of its base's counts, first brought up to the chunks they share: every question
        about a stored document then counts only its own new chunks (the first one after a reopen
        counts the document once, for all the questions after it)."""

        def tokens(t):
            return distinct_tokens(t, pad)

        def words(t, c):  # c: the rows' chunk indices (a word cut by a boundary is whole where it ends)
            return distinct_tokens(lexical.word_ids(t[None], c)[0], 0)

        kt = self.per_chunk("distinct_tokens", tokens, lambda t: t[:0].long())[None]
        kw = (self.per_chunk("distinct_words", words, lambda t: t[:0].long(), context=1)[None]
              if lexical.words is not None else None)
        st = self.stats
        if st is None and self.base is not None:
            # the base's chunks never change under a fork
            base = self.base.lexical_stats(lexical, vocab_size, pad)
            base._count_before(min(self.memory.n0, base.key_tokens.shape[1]))
            st = base.copy_for(kt, kw)
        if st is None or st.n > kt.shape[1]:  # new, or the memory was truncated below the counts
            st = LexicalStats(vocab_size, kt, kw)
        st.key_tokens, st.key_words = kt, kw
        self.stats = st
        return st

    def bm25(self, tokenizer, window: int) -> BM25:
        """The BM25 index (drt_core.bm25) of the stored document's chunks, their texts decoded from
        the stored token ids; a fork's is its base's; rebuilt when the memory has grown."""
        root = self
        while root.base is not None:
            root = root.base
        have = root.bm25_index
        if have is None or have.n != root.memory.n or have.window != window:
            # a stored memory keeps its index beside its files: built once, not on each new process's
            # first question (the state directory is the model's and tokenizer's: their fingerprint)
            def texts():
                toks = root.tokens().cpu().tolist()
                dec = getattr(tokenizer, "batch_decode", None)
                return dec(toks, skip_special_tokens=True) if dec is not None else [tokenizer.decode(t) for t in toks]

            folder = getattr(root.memory, "dir", None)
            if folder is not None and Path(folder).is_dir():
                have = BM25.kept(Path(folder) / f"bm25-w{int(window)}.npz", root.memory.n, window, texts)[0]
            else:
                have = BM25(texts(), window=window)
            root.bm25_index = have
        return have

    def faiss_topk(self, q: torch.Tensor, q_chunk: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The exact top-k past chunks of the landmark queries q [m', D] of chunks q_chunk [m'] and
        their fusion weights (idx [m', k] long, w [m', k]), from an exact inner-product faiss index
        (IndexFlatIP) over the keys stored so far, grown incrementally. Every stored key e < n, and
        a landmark of chunk c may only see e < c, so at most n - c (<= the landmarks of this run)
        of the index's hits are ineligible: asking for k + (n - min c) + a small margin and masking
        e >= c leaves the exact top-k. The picked scores are recomputed like retrieval_scores, so
        idx equals the matrix product's and the weights agree to float rounding."""
        mem, dev = self.memory, q.device
        m = q.shape[0]
        n = mem.n
        if self.faiss is None or self.faiss.ntotal > n:  # new memory, or truncated: rebuild
            self.faiss = mem.faiss_index()
        elif self.faiss.ntotal < n:
            self.faiss.add(np.ascontiguousarray(mem.keys()[self.faiss.ntotal:n], dtype=np.float32))
        kk = min(n, k + n - int(q_chunk.min()) + FAISS_MARGIN) if n else 0
        if kk == 0:
            return torch.zeros(m, k, dtype=torch.long, device=dev), torch.zeros(m, k, device=dev)
        qf = np.ascontiguousarray(q.detach().float().cpu().numpy())
        _, cand = self.faiss.search(qf, kk)  # [m, kk] ids, -1 where fewer than kk exist
        cand_t = torch.from_numpy(cand.astype(np.int64)).to(dev)
        ok = (cand_t >= 0) & (cand_t < q_chunk[:, None])  # strict causal mask e < c
        safe = cand_t.clamp_min(0)
        # [m, kk, D]
        keys = torch.from_numpy(np.asarray(mem.keys()[safe.cpu().numpy()], dtype=np.float32)).to(dev)
        s = torch.einsum("cd,ced->ce", q.float(), keys) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~ok, float("-inf"))
        if kk < k:
            s = F.pad(s, (0, k - kk), value=float("-inf"))
            safe = F.pad(safe, (0, k - kk))
        loc, w = select_topk(s, k, gumbel=False)
        valid = torch.isfinite(s.gather(1, loc))
        idx = safe.gather(1, loc).masked_fill(~valid, 0)  # select_topk's convention: 0 where unused
        return idx, w
