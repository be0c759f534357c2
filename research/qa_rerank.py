"""Offline: re-order the four retrieved chunks by how much of the question their passage covers
(research, not product; docs/history/2026-12-04-window.md).

    python research/qa_rerank.py tmp/scores_val.pkl tmp/scores_hw.pkl

On research/qa_scores.py dumps. The retrieval (the top 4 of the shipped scores) is left as it is, so
hit@4 does not move; only which of the four comes first (the chunk the quote is taken from) does.
Variants: total + b x win, win = the in-document idf of the question words found in chunks c-1..c+1
together minus those in c alone (research/qa_window.py), for several b; and "cover": the idf of the
question words found in c-1..c+1 (ties: total). Prints hit@1 / MRR@4 per file.
"""

from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, "research")
from qa_offline import load  # noqa: E402
from qa_window import prep  # noqa: E402


def first_of_top4(r, key):
    top = np.argsort(-r["total"], kind="stable")[:4]
    order = sorted(top.tolist(), key=lambda c: -key(r, c))
    return order


def main(paths):
    ds = {p: load(p) for p in paths}
    for d in ds.values():
        prep(d)
    variants = {"shipped order": lambda r, c: r["total"][c]}
    for b in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0):
        variants[f"total + {b} win"] = lambda r, c, b=b: r["total"][c] + b * r["win"][c]
    variants["cover (ties: total)"] = lambda r, c: (r["word"][c] + r["win"][c]) * 1e3 + r["total"][c]
    for name, key in variants.items():
        cells = []
        for p, d in ds.items():
            rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
            h1, rr = [], []
            for r in rows:
                order = first_of_top4(r, key)
                g = set(r["gold_chunks"])
                h1.append(order[0] in g)
                rr.append(next((1 / (i + 1) for i, c in enumerate(order) if c in g), 0.0))
            cells.append(f"{p}: {100 * np.mean(h1):.1f}% / {np.mean(rr):.4f}")
        print(f"{name:22s}  " + "   ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
