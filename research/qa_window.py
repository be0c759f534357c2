"""Offline: does a chunk's neighbourhood, or a stem, help the word term? (research, not product)

    python research/qa_window.py tmp/scores_val.pkl tmp/scores_hw.pkl

On research/qa_scores.py dumps. Variants of the question landmark's ranking, hit@1 / hit@4 per file:
  total                the shipped scores (dense + token lexical + 2.0 x whole-word term)
  + b x win            the in-document idf of the question words found in chunks c-1..c+1 together
                       (a passage of three 63-token chunks), minus those in c alone, at weight b
  stem                 the word term over crude stems (lower case, common English suffixes cut)
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, "research")
from qa_offline import hits, load, report  # noqa: E402

_SUFFIX = re.compile(r"(ations|ation|ings|ing|edly|ed|ies|es|s|ly|ment|ments)$")


def stem(w: str) -> str:
    if len(w) <= 4:
        return w
    s = _SUFFIX.sub("", w)
    return s if len(s) >= 3 else w


def idf_of(df, n, w):
    return max(0.0, math.log((n + 1) / (1 + df.get(w, 0))))


def prep(d):
    from qa_offline import words
    for doc, info in d["docs"].items():
        n = len(info["texts"])
        sets = info["sets"]
        info["ssets"] = [{stem(w) for w in s} for s in sets]
        info["sdf"] = Counter(w for s in info["ssets"] for w in s)
    for r in d["rows"]:
        info = d["docs"][r["doc"]]
        n = r["n"]
        sets, df = info["sets"][:n], info["df"]
        qw = set(words(r["question"]))
        idf = {w: idf_of(df, len(info["texts"]), w) for w in qw}
        own = np.array([sum(idf[w] for w in qw & s) for s in sets])
        win = []
        for c in range(n):
            u = set().union(*sets[max(0, c - 1): min(n, c + 2)]) & qw
            win.append(sum(idf[w] for w in u))
        r["win"] = np.array(win) - own
        nxt = []
        for c in range(n):
            u = set().union(*sets[c: min(n, c + 2)]) & qw
            nxt.append(sum(idf[w] for w in u))
        r["nxt"] = np.array(nxt) - own
        qs = {stem(w) for w in qw}
        sidf = {w: idf_of(info["sdf"], len(info["texts"]), w) for w in qs}
        r["sword"] = np.array([sum(sidf[w] for w in qs & s) for s in info["ssets"][:n]])


def evaluate(d, fn, typ=None):
    rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"] and (typ is None or r["type"] == typ)]
    h = np.array([hits(fn(r), r["gold_chunks"]) for r in rows])
    return h[:, 0].mean(), h[:, 1].mean(), len(rows)


def main(paths):
    ds = {}
    for p in paths:
        ds[p] = load(p)
        prep(ds[p])
    variants = {"total (shipped)": lambda r: r["total"]}
    for b in (0.25, 0.5, 1.0, 2.0):
        variants[f"total + {b} win"] = lambda r, b=b: r["total"] + b * r["win"]
        variants[f"total + {b} next"] = lambda r, b=b: r["total"] + b * r["nxt"]
    for b in (1.0, 2.0):
        variants[f"total - 2 word + {b} stem"] = lambda r, b=b: r["total"] - 2.0 * r["word"] + b * r["sword"]
        variants[f"total + {b} stem"] = lambda r, b=b: r["total"] + b * r["sword"]
    report(ds, variants, evaluate, width=28)


if __name__ == "__main__":
    main(sys.argv[1:])
