"""`python bench/probes/twohop_ranks.py MODEL [LENGTH] [SAMPLES]`: for 2-hop examples (the seeds and
depths of `drt-reader eval niah --task 2hop`), the rank of the chunk holding hop 1's value ("a -> b",
matched by the question's start code) and of hop 2's ("b -> c", which no word of the question names)
in the answer row's landmark scores, for each group's query (model.landmarks serves group 0 only;
here the batch forward's scores for every group), and with G >= 2 how often each hop is in some
group's top-k (what the copy head reads with config copy_groups="all")."""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from bench.niah_retrieval import parse_len, score_rank  # noqa: E402
from drt_core import DRTForCausalLM  # noqa: E402
from drt_core.evaluate import niah_depths, niah_example  # noqa: E402
from drt_core.tasks import retrieval_targets  # noqa: E402

model_dir = sys.argv[1]
L = parse_len(sys.argv[2]) if len(sys.argv) > 2 else 4096
n = int(sys.argv[3]) if len(sys.argv) > 3 else 10
hay = np.fromfile("data/books/val.bin", dtype=np.uint16).astype(np.int64)
model = DRTForCausalLM.from_pretrained(model_dir).eval()
G = model.config.num_groups
k = model.config.chunk_topk
hits = np.zeros((G, 2), int)
union = np.zeros(2, int)  # in the top-k of some group: what the copy head reads with copy_groups="all"
for i in range(n):
    ex = niah_example("2hop", hay, L, i, 0, niah_depths(5), "train", model_dir)  # the eval's sample i
    ids = torch.tensor(ex.prompt_ids(0))[None]
    (row, (h1, h2)), = retrieval_targets(ex, model_dir)
    with torch.no_grad():
        out = model(ids, output_retrieval=True)
    line = [f"sample {i}: hops in chunks {h1}, {h2} of {row}"]
    got = np.zeros(2, bool)
    for g in range(G):
        s = out.retrieval[g]["scores"][0, row, :row]
        r1, r2 = score_rank(s, h1), score_rank(s, h2)
        hits[g] += [r1 <= k, r2 <= k]
        got |= [r1 <= k, r2 <= k]
        line.append(f"g{g} ranks {r1}, {r2}")
    union += got
    print("; ".join(line), flush=True)
print(f"{L} tokens, top-{k} hits over {n} samples: " + ", ".join(f"g{g} hop 1 {a}, hop 2 {b}" for g, (a, b) in enumerate(hits.tolist()))
      + (f"; in some group's top-{k}: hop 1 {union[0]}, hop 2 {union[1]}" if G > 1 else ""))
