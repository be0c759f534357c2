"""`python research/cite_overfit.py [LR] [MODEL]`: can the retrieval scorer (query and key
encoders, query projection, landmark norms) fit citation targets at all, and does what it learns
carry to other windows? It trains on 4 fixed 8K-token windows of the Stacks training chapters and
reports their loss and hit@4 beside those of 4 other windows (the lower layers frozen and run once)."""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from research._cite import citation_windows, hits  # noqa: E402
from drt_core.modeling import DRTForCausalLM, forced_retrieval_loss, retrieval_scores  # noqa: E402

torch.manual_seed(0)
lr = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-3
model = DRTForCausalLM.from_pretrained(sys.argv[2] if len(sys.argv) > 2 else "checkpoints/drt-tiny")
S = model.config.chunk_size
wins = [(x, T) for x, _, T in citation_windows(model, 8)]
print("targets per window", [int((T[0] >= 0).any(-1).sum()) for _, T in wins])
names = ("query_projs.", "query_enc.", "key_enc.", "lmk_norms.")
params = [p for n, p in model.named_parameters() if any(f in n for f in names)]
for n, p in model.named_parameters():
    p.requires_grad_(any(f in n for f in names))
opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def loss_of(x, T):
    k, _, _, own = model.encode_chunks(x)
    c = torch.arange(x.shape[1])
    s = retrieval_scores(model.landmark_query(0, x[:, :, S - 1], own), k, c, c)
    return forced_retrieval_loss(s, T), s


def hit4(x, T):
    with torch.no_grad():
        return np.mean(hits(loss_of(x, T)[1], T))


for step in range(61):
    x, T = wins[step % 4]
    loss, _ = loss_of(x, T)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    if step % 10 == 0:
        with torch.no_grad():
            tr = sum(loss_of(*w)[0].item() for w in wins[:4]) / 4
            te = sum(loss_of(*w)[0].item() for w in wins[4:]) / 4
        print(f"step {step}: train loss {tr:.3f} hit@4 {np.mean([hit4(*w) for w in wins[:4]]):.2f} | "
              f"other loss {te:.3f} hit@4 {np.mean([hit4(*w) for w in wins[4:]]):.2f}", flush=True)
