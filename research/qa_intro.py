"""Offline: does the chunk where a question's word first occurs answer it? (research, not product;
docs/history/2026-12-04-quote-probes.md)

    python research/qa_intro.py tmp/scores_val.pkl tmp/scores_hw.pkl

On research/qa_scores.py dumps. intro[c] = the in-document idf of the question's words whose first
occurrence in the document is chunk c (a name's introduction, a term's definition); the "Who is X?"
reading of issue 29. Variants: total + b x intro, per file and per question type (hit@1 / hit@4).
`intro2`: the first two occurrences, the second at half weight.
"""

from __future__ import annotations

import math
import sys

import numpy as np

sys.path.insert(0, "research")
from qa_offline import hits, load, words  # noqa: E402


def prep(d) -> None:
    for info in d["docs"].values():
        seen: dict[str, list[int]] = {}
        for c, s in enumerate(info["sets"]):
            for w in s:
                occ = seen.setdefault(w, [])
                if len(occ) < 2:
                    occ.append(c)
        info["first"] = seen
    for r in d["rows"]:
        info = d["docs"][r["doc"]]
        n_all = len(info["texts"])
        intro, intro2 = np.zeros(r["n"]), np.zeros(r["n"])
        for w in set(words(r["question"])):
            occ = info["first"].get(w)
            if not occ:
                continue
            idf = max(0.0, math.log((n_all + 1) / (1 + info["df"][w])))
            for k, c in enumerate(occ):
                if c < r["n"]:
                    if k == 0:
                        intro[c] += idf
                    intro2[c] += idf * (1.0 if k == 0 else 0.5)
        r["intro"], r["intro2"] = intro, intro2


def evaluate(d, fn):
    rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
    h = np.array([hits(fn(r), r["gold_chunks"]) for r in rows])
    types: dict[str, list] = {}
    for r, x in zip(rows, h):
        types.setdefault(r["type"], []).append(x)
    per = " ".join(f"{t[:4]} {100 * np.mean(v, 0)[0]:.0f}/{100 * np.mean(v, 0)[1]:.0f}" for t, v in sorted(types.items()))
    return f"{100 * h[:, 0].mean():.1f} / {100 * h[:, 1].mean():.1f} ({per})"


def main(paths):
    ds = {p: load(p) for p in paths}
    for d in ds.values():
        prep(d)
    variants = {"total (shipped)": lambda r: r["total"]}
    for b in (0.5, 1.0, 2.0, 4.0, 8.0):
        variants[f"total + {b} intro"] = lambda r, b=b: r["total"] + b * r["intro"]
    for b in (1.0, 2.0, 4.0):
        variants[f"total + {b} intro2"] = lambda r, b=b: r["total"] + b * r["intro2"]
    for name, fn in variants.items():
        print(f"{name:22s} " + "   ".join(f"{p.split('/')[-1]}: {evaluate(d, fn)}" for p, d in ds.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
