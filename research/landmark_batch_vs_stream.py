"""Does a Landmark checkpoint answer a needle when every block is visible (the training computation)
but not through top-k retrieval (the engine)? Teacher-forced answer-token accuracy on `eval niah`'s
examples, batch forward vs the engine. `python research/landmark_batch_vs_stream.py MODEL LENGTH N`."""

from __future__ import annotations

import sys

import torch

from drt_core.engine import Engine
from drt_core.evaluate import default_haystack, load_token_source, niah_depths, niah_example, parse_length


def main(model_dir: str, length: str, n: int) -> None:
    eng = Engine.from_pretrained(model_dir)
    hay, _ = load_token_source(default_haystack(), None)
    L = parse_length(length)
    tot = {"batch": [0, 0], "stream": [0, 0]}
    for i in range(n):
        ex = niah_example("single", hay, L, i, 0, niah_depths(5), "train", None)
        a0, a1 = ex.answer_spans[0]
        ids = torch.tensor(ex.ids[:a1])[None]
        tgt = ids[0, a0:a1]
        with torch.no_grad():
            pb = eng.model(ids).logits[0, a0 - 1: a1 - 1].argmax(-1)
        ps = eng.feed(eng.new_state(), ex.ids[:a1], want_logits=True)[a0 - 1: a1 - 1].argmax(-1)
        for k, p in (("batch", pb), ("stream", ps)):
            tot[k][0] += int((p == tgt).sum())
            tot[k][1] += len(tgt)
        print(f"sample {i}: answer {tgt.tolist()} batch {pb.tolist()} stream {ps.tolist()}", flush=True)
    for k, (a, b) in tot.items():
        print(f"{k}: {a}/{b} answer tokens right ({100 * a / b:.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
