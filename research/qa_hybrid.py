"""Offline: the model's retrieval scores + a x MiniLM cosine over every chunk (research, not product;
docs/history/2026-12-04-quote-probes.md).

    python research/qa_hybrid.py tmp/scores_val.pkl tmp/scores_hw.pkl

On research/qa_scores.py dumps. Embeds every chunk of each dump's documents once (cached beside the
dump as *.mini.npz) and the questions; prints hit@1 / hit@4 of total + a x cos(question, chunk) for a
grid of a, per file and per question type. What a semantic term inside the retrieval scores could
give, before building it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, "research")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qa_intro import evaluate  # noqa: E402
from qa_offline import load  # noqa: E402

from drt_core.fixed_retriever import embed_texts  # noqa: E402


def cosines(path: str, d) -> None:
    cache = Path(path).with_suffix(".mini.npz")
    if cache.exists():
        emb = dict(np.load(cache))
    else:
        emb = {doc: embed_texts(info["texts"]).numpy() for doc, info in d["docs"].items()}
        np.savez(cache, **emb)
    rows = [r for r in d["rows"] if r["answerable"] and r["gold_chunks"]]
    qe = embed_texts([r["question"] for r in rows]).numpy()
    for r, q in zip(rows, qe):
        r["cos"] = emb[r["doc"]][: r["n"]] @ q


def main(paths):
    torch.set_num_threads(1)
    ds = {}
    for p in paths:
        ds[p] = load(p)
        cosines(p, ds[p])
    for a in (0, 2, 5, 10, 20, 40, 80, 1e6):
        fn = (lambda r, a=a: r["total"] + a * r["cos"]) if a < 1e6 else (lambda r: r["cos"])
        cells = [f"{Path(p).stem}: {evaluate(d, fn)}" for p, d in ds.items()]
        print(f"a={a:<8g} " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
