"""`drt-reader bench niah_miss MODEL SAMPLE [--length 1m] [--samples 20] [--haystack data/books/val.bin]`: why a
single-needle sample of `bench.niah_retrieval --samples N` (same seed and depth) is or is not
retrieved: the rank of the chunk holding the value and of the chunk where the needle begins (they
differ when the needle is written across a chunk boundary), and the top-scored chunks with their
text and their scores' dense and lexical parts (model.landmarks: the engine's ranking, without the
upper layers)."""
from __future__ import annotations

import argparse

import numpy as np

from bench.niah_retrieval import landmark_scores, parse_len, score_rank
from drt_core.engine import Engine
from drt_core.train.tasks.needles import build, value_span


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="checkpoint directory")
    p.add_argument("sample", type=int, help="sample index of bench.niah_retrieval --samples 20")
    p.add_argument("--length", default="1m", help="haystack length (4k, 64k, 1m, ...)")
    p.add_argument("--samples", type=int, default=20, help="bench.niah_retrieval's --samples (sets the depth)")
    p.add_argument("--haystack", default="data/books/val.bin", help="uint16 token file")
    a = p.parse_args(argv)
    i, L = a.sample, parse_len(a.length)
    hay = np.fromfile(a.haystack, dtype=np.uint16).astype(np.int64)
    eng = Engine.from_pretrained(a.model)
    S1 = eng.cfg.chunk_tokens
    ex = build("single", hay, L, i, depth=(i + 0.5) / a.samples, phrasings="train", tokenizer_path=a.model)
    prompt = ex.prompt_ids(0).tolist()
    row = ex.prompt_ends[0] // S1 - 1
    v0, _ = value_span(ex, 0, a.model)
    t, start = v0 // S1, ex.needle_spans[ex.meta["real_needles"][0]][0] // S1
    s, dense = landmark_scores(eng, prompt, row, parts=True)

    def text(c: int) -> str:
        return repr(eng.tokenizer.decode(prompt[c * S1:(c + 1) * S1]))

    print(f"sample {i} at {L} tokens (haystack {len(hay)} tokens): value in chunk {t} (slot {v0 - t * S1}), "
          f"rank {score_rank(s, t)} of {row}; needle begins in chunk {start}, rank {score_rank(s, start)}")
    print(f"  value's chunk: score {float(s[t]):.1f} (dense {float(dense[t]):.1f}, "
          f"lexical {float(s[t] - dense[t]):.1f}): {text(t)[:120]}")
    if start != t:
        print(f"  needle's first chunk: ...{text(start)[-120:]}")
    for c in s.topk(10).indices.tolist():
        print(f"  top chunk {c} score {float(s[c]):.1f} (dense {float(dense[c]):.1f}, "
              f"lexical {float(s[c] - dense[c]):.1f}): {text(c)[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
