"""`python bench/probes/niah_miss.py MODEL SAMPLE [LENGTH] [HAYSTACK]`: why a single-needle sample
of `bench.niah_retrieval --samples 20` (same seed and depth) is or is not retrieved: the rank of the
chunk holding the value and of the chunk where the needle begins (they differ when the needle is
written across a chunk boundary), and the top-scored chunks with their text (model.landmarks: the
engine's ranking, without the upper layers)."""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from bench.niah_retrieval import landmark_scores, parse_len, score_rank  # noqa: E402
from drt_core.engine import Engine  # noqa: E402
from drt_core.tasks import build, value_span  # noqa: E402

model, i = sys.argv[1], int(sys.argv[2])
L = parse_len(sys.argv[3]) if len(sys.argv) > 3 else parse_len("1m")
hay = np.fromfile(sys.argv[4] if len(sys.argv) > 4 else "data/books/val.bin", dtype=np.uint16).astype(np.int64)
eng = Engine.from_pretrained(model)
S1 = eng.cfg.chunk_tokens
ex = build("single", hay, L, i, depth=(i + 0.5) / 20, phrasings="train", tokenizer_path=model)
prompt = ex.prompt_ids(0).tolist()
row = ex.prompt_ends[0] // S1 - 1
v0, v1 = value_span(ex, 0, model)
t, start = v0 // S1, ex.needle_spans[ex.meta["real_needles"][0]][0] // S1
s = landmark_scores(eng, prompt, row)


def text(c):
    return repr(eng.tokenizer.decode(prompt[c * S1:(c + 1) * S1]))


print(f"sample {i} at {L} tokens (haystack {len(hay)} tokens): value in chunk {t} (slot {v0 - t * S1}), rank {score_rank(s, t)}"
      f" of {row}; needle begins in chunk {start}, rank {score_rank(s, start)}")
print(f"  value's chunk: {text(t)[:120]}")
if start != t:
    print(f"  needle's first chunk: ...{text(start)[-120:]}")
for c in s.topk(10).indices.tolist():
    print(f"  top chunk {c} score {float(s[c]):.1f}: {text(c)[:100]}")
