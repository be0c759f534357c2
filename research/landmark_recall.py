"""Does Landmark Attention's retrieval find the needle beyond its training length? (issue 31, item 3)

`python research/landmark_recall.py MODEL LENGTHS N [--json OUT]`, e.g.
`python research/landmark_recall.py runs/landmark-ft/model 2k,4k,16k,64k 10`.

The Landmark baseline never learned to copy a passkey (0/20 at 2K, inside its training length:
docs/history/2026-12-03-landmark-baseline.md), so its answers cannot say whether its retrieval
breaks beyond the training length, the paper's claim. This probe asks the retrieval directly. It
streams `eval niah`'s examples (same builder, seed and depths) through the engine, teacher-forcing
the answer, and records, in every layer and head, the landmark scores of the queries that predict
the answer tokens (the prompt's last token and the answer's tokens but the last) against every
earlier block (`LandmarkAttention._block_scores`, ranked by `LandmarkAttention.top_blocks` as the engine ranks them). The needle's blocks are those
holding any token of the needle sentence. Per length it reports, over samples x answer positions:

- hit: the share of query positions (those whose next token is an answer token) at which some head of a layer puts a needle block in its
  top-k (k = chunk_topk), per layer, and for any layer;
- rank: the needle's best rank (1 = first) among all earlier blocks in the engine's order, the
  best head per layer, median over positions;
- chance: the median best rank of H heads ranking at random, b (1 - 0.5^(1/H)); and the hit rate of k blocks drawn at random by each head, 1 - (1 - n_needle/b)^(H k') with
  k' = k (approximately), for the same positions.

Chance falls with length (b grows), so the meaningful comparison is hit against chance, and 2K
(inside the 2,016-token training length) against beyond.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from drt_core.engine import Engine
from drt_core.evaluate import default_haystack, load_token_source, niah_depths, niah_example, parse_length
from drt_core.landmark import LandmarkAttention


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("lengths")
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    eng = Engine.from_pretrained(a.model)
    cfg = eng.model.config
    assert cfg.arch == "landmark", f"{a.model} is a {cfg.arch} model, not a Landmark one"
    S, N, K, H = cfg.chunk_size, cfg.chunk_size - 1, cfg.chunk_topk, cfg.num_heads
    layers = [m for m in eng.model.modules() if isinstance(m, LandmarkAttention)]
    layer_of = {id(m): j for j, m in enumerate(layers)}
    rec: list = []  # (layer, b, slots [m], raw [H, m, b]) of the current sample's watched blocks
    watch: set[int] = set()
    orig = LandmarkAttention._block_scores

    def hook(self, q, blocks_k, kk, qpos):
        raw = orig(self, q, blocks_k, kk, qpos)
        b = blocks_k.shape[1]
        if b in watch:
            rec.append((layer_of[id(self)], b, (qpos - kk * S).tolist(), raw.detach().float().clone()))
        return raw

    LandmarkAttention._block_scores = hook
    hay, _ = load_token_source(default_haystack(), None)
    out = {"model": a.model, "k": K, "heads": H, "layers": len(layers), "lengths": []}
    for length in a.lengths.split(","):
        L = parse_length(length)
        per_layer_hit = np.zeros(len(layers))
        any_hit = chance = chance_layer = 0.0
        ranks = [[] for _ in layers]
        by_depth: dict = {}  # depth -> [positions, any-layer hits, best ranks over layers]
        n_pos = 0
        t0 = time.perf_counter()
        for i in range(a.n):
            ex = niah_example("single", hay, L, i, a.seed, niah_depths(5), "train", None)
            n0, n1 = ex.needle_spans[ex.meta["real_needles"][0]]
            needle_blocks = set(range(n0 // N, (n1 - 1) // N + 1))
            pe = ex.prompt_ends[0]
            a0, a1 = ex.answer_spans[0]
            queries = list(range(a0 - 1, a1 - 1))  # the positions whose next token is an answer token
            want = {(t // N, t % N) for t in queries}  # (block, slot) of each query position
            watch.clear()
            watch.update(bl for bl, _ in want)
            rec.clear()
            with torch.no_grad():
                eng.feed(eng.new_state(), list(map(int, ex.ids[:a1])), want_logits=False)
            hits = {}  # (block, slot) -> per-layer [hit, best rank]
            for j, b, slots, raw in rec:
                for r, slot in enumerate(slots):
                    if (b, slot) not in want:
                        continue
                    # every block in the engine's order (its tie rule included): the engine reads
                    # the first min(b, K) of each head, so a hit is a needle block ranked within them
                    order = LandmarkAttention.top_blocks(raw[:, r], b)  # [H, b]
                    best = min(int((order[h] == nb).nonzero()[0, 0]) + 1 for h in range(H) for nb in needle_blocks)
                    hits.setdefault((b, slot), {})[j] = (best <= min(b, K), best)
            for (b, slot), lay in hits.items():
                assert len(lay) == len(layers), "a query position was not seen in every layer"
                n_pos += 1
                hs = [lay[j][0] for j in range(len(layers))]
                per_layer_hit += np.array(hs, dtype=float)
                any_hit += any(hs)
                for j in range(len(layers)):
                    ranks[j].append(lay[j][1])
                d = by_depth.setdefault(ex.meta.get("depth", i % 5), [0, 0, []])
                d[0] += 1
                d[1] += any(hs)
                d[2].append(min(lay[j][1] for j in range(len(layers))))
                p_head = min(1.0, len(needle_blocks) * min(b, K) / b)
                chance += 1 - (1 - p_head) ** (H * len(layers))
                chance_layer += 1 - (1 - p_head) ** H
            print(f"{length} sample {i}: needle blocks {sorted(needle_blocks)} of {pe // N} earlier; "
                  f"{len(hits)} positions", flush=True)
        row = {"length": length, "tokens": L, "samples": a.n, "positions": n_pos,
               "hit_per_layer": (per_layer_hit / n_pos).round(3).tolist(),
               "chance_per_layer": round(chance_layer / n_pos, 3),
               "hit_any_layer": round(any_hit / n_pos, 3),
               "chance_any_layer": round(chance / n_pos, 3),
               "median_best_rank_per_layer": [statistics.median(r) for r in ranks],
               "by_depth": {str(k): {"positions": v[0], "hit_any_layer": round(v[1] / v[0], 3),
                                     "median_best_rank_any_layer": statistics.median(v[2])}
                            for k, v in sorted(by_depth.items())},
               "chance_median_best_rank": round((pe // N) * (1 - 0.5 ** (1 / H)), 1),
               "blocks_before_question": int(pe // N),
               "seconds": round(time.perf_counter() - t0, 1)}
        out["lengths"].append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
