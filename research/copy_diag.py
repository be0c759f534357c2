"""`python research/copy_diag.py MODEL`: does GCA copy? Copy-token loss with the true source chunks forced (oracle) vs wrong chunks,
and NIAH answer loss/first-token acc with the needle chunk forced vs a wrong chunk."""
import random, sys, numpy as np, torch
sys.path.insert(0, '.')
from drt_core import tasks
from drt_core.modeling import DRTForCausalLM
import torch.nn.functional as F
m = DRTForCausalLM.from_pretrained(sys.argv[1]).eval()
hay = np.memmap('data/books/val.bin', dtype=np.uint16, mode='r')
rng = random.Random(5)
def ce(logits, ids, w):
    lg = logits[0, :-1].float(); tg = torch.from_numpy(ids[1:]); mk = torch.from_numpy(w[1:] > 1)
    return F.cross_entropy(lg[mk], tg[mk]).item(), (lg[mk].argmax(-1) == tg[mk]).float().mean().item()
res = {'copy_true': [], 'copy_wrong': [], 'ans_true': [], 'ans_wrong': [], 'hit': []}
for i in range(6):
    h = rng.randrange(len(hay) - 3000)
    ex = tasks.build_repeat(hay[h:h + 1500].astype(np.int64), 1260, rng)
    f = torch.from_numpy(ex['forced'])[None]
    wrong = torch.where(f >= 0, torch.zeros_like(f), f)  # chunk 0 instead of the true sources
    ids = torch.from_numpy(ex['ids'])[None]
    with torch.no_grad():
        res['copy_true'].append(ce(m(ids, forced_chunks=f, forced_oracle=True).logits, ex['ids'], ex['weights'])[0])
        res['copy_wrong'].append(ce(m(ids, forced_chunks=wrong, forced_oracle=True).logits, ex['ids'], ex['weights'])[0])
    ex = tasks.build('multikey', hay, 1500, rng, n_pairs=3, n_distractors=2, needle_margin=320, answer_weight=10)
    C = -(-1500 // 63)
    f = torch.full((1, C), -1); fw = f.clone()
    for row, ch in tasks.retrieval_targets(ex):
        f[0, row] = ch[0]; fw[0, row] = (ch[0] + 3) % row
    ids = torch.from_numpy(ex.ids)[None]
    with torch.no_grad():
        out = m(ids, output_retrieval=True)
        for row, ch in tasks.retrieval_targets(ex):
            res['hit'].append(float((out.retrieval[0]['idx'][0, row] == ch[0]).any()))
        res['ans_true'].append(ce(m(ids, forced_chunks=f, forced_oracle=True).logits, ex.ids, ex.weights))
        res['ans_wrong'].append(ce(m(ids, forced_chunks=fw, forced_oracle=True).logits, ex.ids, ex.weights))
for k, v in res.items():
    v = np.array(v); print(k, np.round(v.mean(0), 3))
