"""Offline ranking and abstention experiments on research/qa_scores.py dumps (research, not product).

    python research/qa_offline.py tmp/scores_val.pkl tmp/scores_hw.pkl

Prints hit@1 / hit@4 of variants of the question landmark's ranking (the model's dense + lexical
scores, with a word-level in-document idf overlap added at several weights), per file.
"""

from __future__ import annotations

import math
import pickle
import re
import sys
from collections import Counter

import numpy as np

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def doc_words(texts):
    sets = [set(words(t)) for t in texts]
    df = Counter(w for s in sets for w in s)
    return sets, df


def word_overlap(q: str, sets, df, n: int) -> np.ndarray:
    """sum over distinct question words shared with each chunk of relu(log((n+1)/(1+df)))."""
    qw = set(words(q))
    idf = {w: max(0.0, math.log((n + 1) / (1 + df.get(w, 0)))) for w in qw}
    return np.array([sum(idf[w] for w in qw & s) for s in sets], dtype=np.float64)


def hits(score: np.ndarray, gold: list[int]) -> tuple[float, float]:
    order = np.argsort(-score, kind="stable")[:4]
    g = set(gold)
    return float(order[0] in g), float(bool(g & set(order.tolist())))


def load(path):
    with open(path, "rb") as f:
        d = pickle.load(f)
    for doc, info in d["docs"].items():
        info["sets"], info["df"] = doc_words(info["texts"])
    for r in d["rows"]:
        info = d["docs"][r["doc"]]
        r["word"] = word_overlap(r["question"], info["sets"], info["df"], len(info["texts"]))[: r["n"]]
    return d


def evaluate(d, fn) -> tuple[float, float, int]:
    rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
    h = np.array([hits(fn(r), r["gold_chunks"]) for r in rows])
    return h[:, 0].mean(), h[:, 1].mean(), len(rows)


def main(paths):
    ds = {p: load(p) for p in paths}
    variants = {"total (shipped)": lambda r: r["total"], "dense only": lambda r: r["dense"],
                "lex only": lambda r: r["lex"], "word only": lambda r: r["word"]}
    for a in (0.5, 1.0, 2.0, 4.0, 8.0):
        variants[f"total + {a} word"] = lambda r, a=a: r["total"] + a * r["word"]
        variants[f"dense + {a} word"] = lambda r, a=a: r["dense"] + a * r["word"]
    report(ds, variants)


def report(ds, variants, evaluate_fn=None, width: int = 24) -> None:
    """One line per ranking variant: hit@1 / hit@4 on each dump (research/qa_window.py shares it)."""
    ev = evaluate_fn or evaluate
    for name, fn in variants.items():
        print(f"{name:{width}s}", "  ".join(f"{p.split('/')[-1]}: hit@1 {h1:.3f} hit@4 {h4:.3f} (n={n})"
                                           for p, d in ds.items() for h1, h4, n in [ev(d, fn)]))


if __name__ == "__main__":
    main(sys.argv[1:])


# ---------------------------------------------------------------------------------------------
# quotes: which sentence of the retrieved chunks to quote
# ---------------------------------------------------------------------------------------------

_SENT = re.compile(r"""[.!?;][\"'\u2019\u201d)\]]*\s+|\n\s*\n""")


def chunk_sentences(texts, c):
    """Sentences (start, end, text) of chunks c-1..c+1 joined, that overlap chunk c."""
    lo, hi = max(0, c - 1), min(len(texts), c + 2)
    parts = texts[lo:hi]
    joined = "".join(parts)
    a = sum(len(t) for t in texts[lo:c])
    b = a + len(texts[c])
    out, s = [], 0
    for m in _SENT.finditer(joined):
        out.append((s, m.end()))
        s = m.end()
    out.append((s, len(joined)))
    return [(x, y, " ".join(joined[x:y].split())) for x, y in out if y > a and x < b and joined[x:y].strip()]


def sentence_score(q: str, sent: str, df, n) -> float:
    qw = set(words(q))
    return sum(max(0.0, math.log((n + 1) / (1 + df.get(w, 0)))) for w in qw & set(words(sent)))
