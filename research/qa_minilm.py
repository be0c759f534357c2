"""Offline: which of the four retrieved chunks to quote, with MiniLM's reading of the question
(research, not product; docs/history/2026-12-04-quote-probes.md).

    python research/qa_minilm.py tmp/scores_val.pkl tmp/scores_hw.pkl

On research/qa_scores.py dumps. Retrieval (the top 4 of the model's scores) is left as it is, so
hit@4 does not move; only which of the four is quoted first. Features of a candidate chunk c:
  win    the shipped quote_chunk bonus (question words in c-1, c+1 and not in c; research/qa_window.py)
  chunk  MiniLM cosine of the question and chunk c's text
  pass   MiniLM cosine of the question and the passage c-1..c+1
  sent   the best MiniLM cosine of the question and one sentence overlapping chunk c
Prints hit@1 (the quoted chunk is gold) and MRR@4 per file, and per question type.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, "research")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qa_offline import chunk_sentences, load  # noqa: E402
from qa_window import prep  # noqa: E402

from drt_core.fixed_retriever import embed_texts  # noqa: E402


def features(d) -> None:
    """Adds r["top4"] and r["mini"] = {feature: [4]} to every answerable row with gold chunks."""
    rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
    texts, owners = [], []
    for i, r in enumerate(rows):
        t = d["docs"][r["doc"]]["texts"]
        r["top4"] = np.argsort(-r["total"], kind="stable")[:4].tolist()
        texts.append(r["question"]), owners.append((i, "q", -1))
        for j, c in enumerate(r["top4"]):
            texts.append(t[c]), owners.append((i, "chunk", j))
            texts.append("".join(t[max(0, c - 1): c + 2])), owners.append((i, "pass", j))
            for _, _, s in chunk_sentences(t, c):
                texts.append(s), owners.append((i, "sent", j))
    torch.set_num_threads(1)
    e = embed_texts(texts).numpy()
    q = {i: e[k] for k, (i, kind, _) in enumerate(owners) if kind == "q"}
    for r in rows:
        r["mini"] = {"chunk": np.zeros(4), "pass": np.zeros(4), "sent": np.full(4, -1.0)}
    for k, (i, kind, j) in enumerate(owners):
        if kind == "q":
            continue
        v = float(e[k] @ q[i])
        m = rows[i]["mini"][kind]
        m[j] = max(m[j], v) if kind == "sent" else v


def main(paths):
    ds = {}
    for p in paths:
        ds[p] = load(p)
        prep(ds[p])
        features(ds[p])
    ship = lambda r, j: r["total"][r["top4"][j]] + 0.5 * r["win"][r["top4"][j]]  # noqa: E731
    variants = {"model order": lambda r, j: r["total"][r["top4"][j]], "shipped (total + 0.5 win)": ship}
    for f in ("chunk", "pass", "sent"):
        variants[f"{f} alone"] = lambda r, j, f=f: r["mini"][f][j]
        for a in (5, 10, 20, 40, 80):
            variants[f"shipped + {a} {f}"] = lambda r, j, f=f, a=a: ship(r, j) + a * r["mini"][f][j]
    for a in (10, 20, 40):
        variants[f"shipped + {a} (pass + sent)/2"] = \
            lambda r, j, a=a: ship(r, j) + a * 0.5 * (r["mini"]["pass"][j] + r["mini"]["sent"][j])
    for name, key in variants.items():
        cells = []
        for p, d in ds.items():
            rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
            h1, rr = [], []
            types: dict[str, list] = {}
            for r in rows:
                order = sorted(range(4), key=lambda j: -key(r, j))
                g = set(r["gold_chunks"])
                ranked = [r["top4"][j] for j in order]
                h1.append(ranked[0] in g)
                types.setdefault(r["type"], []).append(ranked[0] in g)
                rr.append(next((1 / (i + 1) for i, c in enumerate(ranked) if c in g), 0.0))
            per = " ".join(f"{t[:4]} {100 * np.mean(v):.0f}" for t, v in sorted(types.items()))
            cells.append(f"{Path(p).stem}: {100 * np.mean(h1):.1f}% / {np.mean(rr):.3f} ({per})")
        print(f"{name:32s}  " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
