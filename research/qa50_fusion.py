"""Issue 50 probe: learned-only, BM25-only and fused rankings on cached questions (research/qa_scores.py:
its "total" is the learned selection score, the BM25 term is added after it).

    python research/qa50_fusion.py tmp/qa50/dev.pkl [tmp/qa50/val.pkl ...]

hit@1 / hit@4 over the answerable questions whose gold was found, overall, per type and per document.
Fusion: learned + w * bm25 / max(bm25) (the engine's `bm25_weight`, config `bm25_norm = "max"`), or
learned + w * bm25 (raw). Validation and development sets only: never the sealed set.
"""

from __future__ import annotations

import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drt_core.bm25 import BM25  # noqa: E402
from ingest.baselines import BM25Index  # noqa: E402


def learned_scores(row: dict, n: int) -> np.ndarray:
    """The question's learned scores over the document's n library chunks (NaN past the state's chunks)."""
    t = np.asarray(row["total"], dtype=np.float64)[:n]
    return np.concatenate([t, np.full(n - len(t), np.nan)])


def rank(scores: np.ndarray, k: int = 4) -> list[int]:
    s = np.where(np.isfinite(scores), scores, -np.inf)
    return [int(i) for i in np.lexsort((np.arange(len(s)), -s))[:k]]


def fused(learned, bm, w, norm):
    b = bm / bm.max() if norm == "max" and bm.max() > 0 else bm
    return np.nan_to_num(learned, nan=-1e9) + w * b


def main(paths):
    systems = defaultdict(lambda: defaultdict(list))  # system -> key -> hits
    for path in paths:
        data = pickle.load(open(path, "rb"))
        idx = {}
        for doc, d in data["docs"].items():
            idx[doc] = {"fts": BM25Index(d["texts"]), "w0": BM25(d["texts"]), "w1": BM25(d["texts"], window=1)}
        for r in data["rows"]:
            if not r["answerable"] or not r["gold_chunks"]:
                continue
            g, doc = set(r["gold_chunks"]), r["doc"]
            ix = idx[doc]
            n = len(data["docs"][doc]["texts"])
            learned = learned_scores(r, n)
            runs = {"learned": rank(learned), "bm25-fts": [i for i, _ in ix["fts"].search(r["question"], 4)]}
            for wname in ("w0", "w1"):
                bm = ix[wname].scores(r["question"])
                runs[f"bm25s-{wname}"] = rank(np.where(bm > 0, bm, -np.inf))
                for norm in ("max", "raw"):
                    for w in ((8, 16, 32, 64, 128) if norm == "max" else (1, 2, 4, 8, 16, 32)):
                        runs[f"fuse-{wname}-{norm}-{w}"] = rank(fused(learned, bm, w, norm))
            for name, rk in runs.items():
                for key in ("all", f"{Path(path).stem}", f"type:{r['type']}", f"doc:{Path(doc).name[:20]}"):
                    systems[name][key].append((float(bool(g & set(rk[:1]))), float(bool(g & set(rk[:4])))))
    keys = sorted({k for s in systems.values() for k in s}, key=lambda k: (k != "all", k))
    print("system".ljust(24) + "".join(k[:22].rjust(24) for k in keys))
    for name, by in systems.items():
        cells = []
        for k in keys:
            h = np.array(by.get(k, []))
            cells.append((f"{100 * h[:, 0].mean():.1f}/{100 * h[:, 1].mean():.1f} n={len(h)}" if len(h) else "-").rjust(24))
        print(name.ljust(24) + "".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
