"""What a fixed-retriever (RPT-style) training step costs on top of a DRT step, on this machine:
`python research/fixed_cost.py [--reps 3]`.

Times, alternately in one process (so outside load weighs on both alike), (a) one DRT tiny training
step (forward + backward) on a [4, 4032] batch of real book text and (b) the frozen MiniLM embedding
of that batch's 4 x 64 chunks, which the fixed_retriever arch needs at every step (its chunks are
random windows, so embeddings cannot be cached across steps). Prints the medians and (a+b)/a.
"""

import argparse
import statistics
import time

import numpy as np
import torch

from drt_core import DRTConfig, DRTForCausalLM
from drt_core.fixed_retriever import embed_chunks

p = argparse.ArgumentParser()
p.add_argument("--reps", type=int, default=3)
p.add_argument("--data", default="data/books/val.bin")
a = p.parse_args()

torch.manual_seed(0)
cfg = DRTConfig.from_preset("tiny")
model = DRTForCausalLM(cfg)
toks = np.fromfile(a.data, dtype=np.uint16)[: 4 * 4032].astype(np.int64)
ids = torch.from_numpy(toks).view(4, 4032)
embed_chunks(ids[:1, :63], cfg)  # load MiniLM once
step, emb = [], []
for _ in range(a.reps):
    t = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, labels=ids)
    out.loss.backward()
    model.zero_grad(set_to_none=True)
    step.append(time.perf_counter() - t)
    t = time.perf_counter()
    e = embed_chunks(ids, cfg)
    emb.append(time.perf_counter() - t)
s, m = statistics.median(step), statistics.median(emb)
print(f"DRT step {s:.2f} s | MiniLM embedding of its {e.shape[0]}x{e.shape[1]} chunks {m:.2f} s | "
      f"fixed-retriever step / DRT step = {(s + m) / s:.2f}x")
