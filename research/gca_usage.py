"""`python research/gca_usage.py MODEL`: size of the GCA output next to the residual stream in
each upper layer, and what removing GCA does to the loss and logits (1260 tokens of held-out text)."""
import sys, numpy as np, torch
sys.path.insert(0,'.')
from drt_core.modeling import DRTForCausalLM, GCA
m = DRTForCausalLM.from_pretrained(sys.argv[1]).eval()
hay = np.memmap('data/books/val.bin', dtype=np.uint16, mode='r')
ids = torch.from_numpy(hay[1000:1000+1260].astype(np.int64))[None]
rec = {}
hooks = []
for gi, grp in enumerate(m.groups):
    for li, blk in enumerate(grp):
        def hk(mod, inp, out, key=f'{gi}.{li}'):
            rec[key] = (inp[0].float().norm(dim=-1).mean().item(), out.float().norm(dim=-1).mean().item())
        hooks.append(blk.gca.register_forward_hook(hk))
with torch.no_grad(): a = m(ids, labels=ids)
print('norms (a, gca_out):', rec, 'loss', a.loss.item())
for h in hooks: h.remove()
orig = GCA.forward
GCA.forward = lambda self, x, *r: torch.zeros_like(x)
with torch.no_grad(): b = m(ids, labels=ids)
GCA.forward = orig
print('loss without GCA', b.loss.item(), 'max logit change', (a.logits - b.logits).abs().max().item())
for n, p in m.named_parameters():
    if 'gca.o' in n or 'gca.q' in n or 'encoder.v_proj' in n: print(n, p.std().item())
