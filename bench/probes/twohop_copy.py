"""`python bench/probes/twohop_copy.py MODEL [LENGTH] [SAMPLES]`: where a 2-hop answer is lost, on the
samples of `drt-reader eval niah --task 2hop` (teacher-forced, batch forward). At the first token of
each value (after ":" for hop 1, after "," for hop 2) it counts: the model's output right; the copy
head's pointer pointing at the right token (its heaviest token); and the gate's mean opening
(sigmoid), which mixes the pointer into the LM output."""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from bench.niah_retrieval import parse_len  # noqa: E402
from drt_core import DRTForCausalLM  # noqa: E402
from drt_core.evaluate import niah_depths, niah_example  # noqa: E402
from drt_core.tokenizer import load_tokenizer  # noqa: E402

md = sys.argv[1]
L = parse_len(sys.argv[2]) if len(sys.argv) > 2 else 4096
n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
hay = np.fromfile("data/books/val.bin", dtype=np.uint16).astype(np.int64)
m = DRTForCausalLM.from_pretrained(md).eval()
tok = load_tokenizer(md)
cap = {}
orig = m._batch_copy


def spy(*a):
    cap["copy"] = orig(*a)
    return cap["copy"]


m._batch_copy = spy
comma = tok.encode(",", add_special_tokens=False)
stats = {h: np.zeros(3) for h in ("hop 1", "hop 2")}
for i in range(n):
    ex = niah_example("2hop", hay, L, i, 0, niah_depths(5), "train", md)
    a0, a1 = ex.answer_spans[0]
    with torch.no_grad():
        out = m(torch.tensor(ex.ids[:a1])[None])
    gate, p, toks = cap["copy"]
    ans = ex.ids[a0:a1].tolist()
    sep = next(j for j in range(len(ans)) if ans[j] in comma)
    for hop, t in (("hop 1", a0 - 1), ("hop 2", a0 + sep)):  # position t predicts token t + 1
        want = int(ex.ids[t + 1])
        mass = torch.zeros(int(toks.max()) + 1).index_add_(0, toks[0, t], p[0, t])
        stats[hop] += [int(out.logits[0, t].argmax()) == want, int(mass.argmax()) == want,
                       float(torch.sigmoid(gate[0, t]))]
for hop, (ok, ptr, g) in stats.items():
    print(f"{L} tokens, {hop} first token over {n}: output right {int(ok)}, pointer right {int(ptr)}, mean gate {g / n:.2f}")
