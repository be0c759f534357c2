"""BM25 over a document's chunks: the lexical term of the model's question-time selection.

A reader's question shares its rare words with the passage that answers it. The model's learned
scores (dense keys plus its in-document word idf, `LexicalScorer`) find that passage less often
than a plain BM25 does on books they never saw (docs/qa.md). So BM25 becomes a term of the
selection itself (config `bm25_weight`, `Engine.generate`): what the heatmap and the evidence show
is what the model retrieved, and the learned scores add to BM25's rather than compete with them.

BM25 here is the textbook one (Robertson and Zaragoza 2009):

    score(q, c) = sum over distinct query terms t of
                  idf(t) * tf(t, c) * (k1 + 1) / (tf(t, c) + k1 * (1 - b + b * |c| / avg|c|))
    idf(t)      = log(1 + (n - df(t) + 0.5) / (df(t) + 0.5))

over terms = lower-cased words, question stop-words dropped (`STOP`: function words and the words
questions are made of: "what", "name", "called", "mr"), light suffix stemming (`stem`). A unit is
a chunk, or a chunk with `window` chunks each side (a passage wider than one 63-token chunk).
"""

from __future__ import annotations

import functools
import math
import os
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np

_WORD = re.compile(r"[^\W_]+")

# function words, and the words a question is made of rather than what it asks about
STOP = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each either ever few
for from further had hadn has hasn have haven having he her here hers herself him himself his how i if in
into is isn it its itself just let me more most much must mustn my myself neither no nor not now of off on
once only or other ought our ours ourselves out over own per same shan she should shouldn so some such than
that the their theirs them themselves then there these they this those through thus to too under until up
upon us very was wasn we were weren what whatever when where whereas whether which while who whom whose why
will with won would wouldn yet you your yours yourself yourselves
s t d ll m re ve
name named names called call calls say says said tell tells told give gives given describe describes described
according find passage book text chapter document mention mentioned mentions kind sort thing things way ways
mr mrs miss sir madam lady dr st
""".split())


@functools.lru_cache(maxsize=1 << 18)
def stem(w: str) -> str:
    """A light suffix stripper (plural and verb endings; the word itself when short): "cottages" ->
    "cottag", "cottage" -> "cottag", "married" -> "marri", "marries" -> "marri", "marrying" -> "marry".
    Cached: a book's half a million words are some tens of thousands of distinct ones."""
    if len(w) <= 3 or w.isdigit():
        return w
    for suf, rep in (("ies", "i"), ("ied", "i"), ("sses", "ss"), ("ness", ""), ("ments", "ment"),
                     ("ings", ""), ("ing", ""), ("edly", ""), ("ly", ""), ("ed", ""), ("es", ""), ("s", ""), ("e", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            if suf == "s" and w.endswith(("ss", "us", "is")):
                continue
            return w[: len(w) - len(suf)] + rep
    return w


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; apostrophes split: "Darcy's" -> "darcy", "s")."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def terms(text: str) -> list[str]:
    """The BM25 terms of `text`: its words without stop-words, stemmed."""
    return [stem(w) for w in words(text) if w not in STOP]


class BM25:
    """BM25 over `texts` (a document's chunks, in order). `scores(question)` -> [n] float64; a unit
    is chunk i with `window` chunks each side (0: the chunk alone). The postings are arrays (each
    term's units and frequencies, in unit order), so an index saves to one .npz and loads in
    milliseconds (`save`, `load`): a stored document's index is built once, not on every new
    process's first question (drt_core.memory_index, qa.ask's DocStats)."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75, window: int = 0):
        self.n, self.k1, self.b, self.window = len(texts), float(k1), float(b), int(window)
        chunk_terms = [terms(t) for t in texts]
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths = np.zeros(self.n)
        for i in range(self.n):
            lo, hi = max(0, i - self.window), min(self.n, i + self.window + 1)
            bag = Counter(t for j in range(lo, hi) for t in chunk_terms[j])
            lengths[i] = sum(bag.values())
            for t, f in bag.items():
                postings.setdefault(t, []).append((i, f))
        self.norm = self.k1 * (1 - self.b + self.b * lengths / max(float(lengths.mean()) if self.n else 1.0, 1e-9))
        self.vocab = {t: r for r, t in enumerate(postings)}
        flat = [p for ps in postings.values() for p in ps]
        self.indptr = np.cumsum([0, *(len(ps) for ps in postings.values())]).astype(np.int64)
        self.units = np.array([i for i, _ in flat], dtype=np.int64)
        self.tf = np.array([f for _, f in flat], dtype=np.float64)

    def posting(self, t: str) -> tuple[np.ndarray, np.ndarray]:
        """The units holding term t and its frequency in each (empty arrays for an unknown term)."""
        r = self.vocab.get(t)
        if r is None:
            return self.units[:0], self.tf[:0]
        a, z = self.indptr[r], self.indptr[r + 1]
        return self.units[a:z], self.tf[a:z]

    def chunks_of(self, t: str) -> list[int]:
        return self.posting(t)[0].tolist()

    def idf(self, t: str) -> float:
        df = len(self.posting(t)[0])
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, question: str) -> np.ndarray:
        out = np.zeros(self.n)
        for t in dict.fromkeys(terms(question)):
            idx, tf = self.posting(t)
            if len(idx):
                out[idx] += self.idf(t) * tf * (self.k1 + 1) / (tf + self.norm[idx])
        return out

    def search(self, question: str, k: int) -> list[tuple[int, float]]:
        """The k best units as (index, score), best first; units scoring 0 are left out."""
        s = self.scores(question)
        order = np.lexsort((np.arange(self.n), -s))[: max(int(k), 0)]
        return [(int(i), float(s[i])) for i in order if s[i] > 0]

    # -- on disk --------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """The index as one .npz (no pickled objects), written atomically (a temporary file renamed)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, version=np.int64(FORMAT), params=np.array([self.n, self.k1, self.b, self.window]),
                     terms=np.array(list(self.vocab), dtype=str), indptr=self.indptr, units=self.units,
                     tf=self.tf, norm=self.norm)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BM25 | None":
        """The index `save` wrote, or None when the file is missing, of another format, or damaged
        (the caller builds it again)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if int(z["version"]) != FORMAT:
                    return None
                ix = cls.__new__(cls)
                n, ix.k1, ix.b, w = (float(x) for x in z["params"])
                ix.n, ix.window = int(n), int(w)
                ix.vocab = {str(t): r for r, t in enumerate(z["terms"].tolist())}
                ix.indptr, ix.units, ix.tf, ix.norm = z["indptr"], z["units"], z["tf"], z["norm"]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            return None
        ok = len(ix.indptr) == len(ix.vocab) + 1 and len(ix.norm) == ix.n and ix.indptr[-1] == len(ix.units)
        return ix if ok else None

    @classmethod
    def kept(cls, path: str | os.PathLike, n: int, window: int, texts) -> tuple["BM25", bool]:
        """The index kept at `path` when it is of `n` units and `window`, else one built from
        `texts()` and saved there; and whether the file holds it now (False: the disk refused it,
        and the caller says so or not; a read-only library answers all the same)."""
        have = cls.load(path)
        if have is not None and have.n == n and have.window == window:
            return have, True
        have = cls(texts(), window=window)
        try:
            have.save(path)
        except OSError:
            return have, False
        return have, True


FORMAT = 1  # BM25.save's layout; a file of another is built again
