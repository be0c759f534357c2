"""The cross-encoder in bf16 against fp32: the same reading, and how much faster.

    python -m bench.ce_dtype --questions runs/val_all.jsonl --home runs/evalhome [--docs-root ../shared] [--n 60]

For each validation question: its document's BM25 top 16 chunks, read by the shipped cross-encoder
in fp32 and in bf16 (qa.cross_encoder.Scorer(dtype=...)); prints how often the best passage, the
best three and the best span agree, the relevance logits' largest gap, and the seconds of each.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", required=True)
    p.add_argument("--home", required=True)
    p.add_argument("--docs-root", default=str(ROOT.parent / "shared"))
    p.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    p.add_argument("--n", type=int, default=60)
    a = p.parse_args(argv)

    from ingest.pipeline import sha256_file
    from qa.baselines import BM25Index
    from qa.cross_encoder import Scorer
    from store.library import Library

    qs = [json.loads(line) for line in Path(a.questions).read_text().splitlines() if line.strip()][: a.n]
    fp32, bf16 = Scorer(a.model, dtype=torch.float32), Scorer(a.model, dtype=torch.bfloat16)
    same1 = same3 = same_span = 0
    gap, secs = 0.0, {"fp32": 0.0, "bf16": 0.0}
    with Library(a.home) as lib:
        ids: dict[str, str] = {}
        for q in qs:
            doc = ids.setdefault(q["doc"], sha256_file(Path(a.docs_root) / q["doc"]))
            texts = [c["text"] for c in lib.chunks(doc)]
            top = [texts[i] for i, _ in BM25Index(texts).search(q["question"], 16)]
            reads = {}
            for name, sc in (("fp32", fp32), ("bf16", bf16)):
                t = time.monotonic()
                reads[name] = sc.read(q["question"], top)
                secs[name] += time.monotonic() - t
            r32, r16 = ([r.relevance for r in reads[k]] for k in ("fp32", "bf16"))
            order32 = sorted(range(len(top)), key=lambda i: -r32[i])
            order16 = sorted(range(len(top)), key=lambda i: -r16[i])
            same1 += order32[0] == order16[0]
            same3 += set(order32[:3]) == set(order16[:3])
            same_span += reads["fp32"][order32[0]].span == reads["bf16"][order32[0]].span
            gap = max(gap, max(abs(x - y) for x, y in zip(r32, r16)))
    n = len(qs)
    print(f"{n} questions: best passage the same {same1 / n:.1%}, best three {same3 / n:.1%}, best span "
          f"{same_span / n:.1%}; largest relevance gap {gap:.3f}; seconds fp32 {secs['fp32']:.1f}, bf16 "
          f"{secs['bf16']:.1f} ({secs['fp32'] / max(secs['bf16'], 1e-9):.2f}x)")


if __name__ == "__main__":
    main()
