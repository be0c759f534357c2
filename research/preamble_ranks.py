"""`python research/preamble_ranks.py MODEL[,MODEL...] LENGTH SAMPLES`: for `drt-reader eval niah`
samples (default seed and 5 depths: sample i % 5 == 0 is depth 0.0, the needle in the stream's
first tokens), the DENSE rank of the chunk holding the value (landmark keys . query / sqrt(D), no
lexical terms: model.landmarks, which honours config stream_preamble) and its score against the
best. Issue 31, item 2 (docs/history/2026-12-03-stream-preamble.md): compare a checkpoint with a
copy whose config.json sets stream_preamble. Example:
    python research/preamble_ranks.py checkpoints/drt-tiny,tmp/no-preamble 64k 0,10,5"""
from __future__ import annotations

import sys

import torch

sys.path.insert(0, ".")
from bench.niah_retrieval import score_rank  # noqa: E402
from drt_core.engine import Engine  # noqa: E402
from drt_core.evaluate import load_token_source, niah_depths, niah_example, parse_length  # noqa: E402
from drt_core.tasks import value_span  # noqa: E402


def main(argv: list[str]) -> int:
    models, L, samples = argv[0].split(","), parse_length(argv[1]), [int(x) for x in argv[2].split(",")]
    for m in models:
        eng = Engine.from_pretrained(m)
        S1 = eng.cfg.chunk_tokens
        hay, _ = load_token_source("data/books/val.bin", m)
        out = []
        for i in samples:
            ex = niah_example("single", hay, L, i, 0, niah_depths(5), "train", m)
            prompt = ex.prompt_ids(0).tolist()
            v0, _ = value_span(ex, 0, m)
            row = ex.prompt_ends[0] // S1 - 1
            keys, q = eng.model.landmarks(torch.tensor(prompt[: (row + 1) * S1]))
            s = keys[:row].float() @ q[row].float() / keys.shape[-1] ** 0.5
            out.append(f"sample {i} (value at token {v0}): rank {score_rank(s, v0 // S1)} of {row} "
                       f"({float(s[v0 // S1]):.1f} vs best {float(s.max()):.1f})")
        print(m, argv[1], "; ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
