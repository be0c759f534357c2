"""`python research/cite_lexpool.py [LR]`: a prototype of a lexical term for the scorer, outside
the model. Each chunk gets key_lex = sum_t a_t E[x_t] (token embeddings, a = softmax_t of a learned
gate on the lower-layer states), the query chunk q_lex likewise with its own gate; score = the shipped
scorer's + lam * q_lex M k_lex (M starts as the identity). Trained on 32 Stacks windows of 8K
tokens, hit@4 measured on those and on 8 others: does a term that can match label names generalise?"""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from research._cite import citation_windows, hits  # noqa: E402
from drt_core.modeling import DRTForCausalLM, forced_retrieval_loss, retrieval_scores  # noqa: E402

torch.manual_seed(0)
model = DRTForCausalLM.from_pretrained("checkpoints/drt-tiny").eval()
S, D = model.config.chunk_size, model.config.hidden_size
wins = []
for x, emb, T in citation_windows(model, 40):
    with torch.no_grad():
        k, _, _, own = model.encode_chunks(x)
        c = torch.arange(x.shape[1])
        base = retrieval_scores(model.landmark_query(0, x[:, :, S - 1], own), k, c, c)
    wins.append((x[0, :, :S - 1], emb[0, :, :S - 1], base, T))
print("windows ready", flush=True)
wa, wb = torch.nn.Linear(D, 1), torch.nn.Linear(D, 1)
M, lam = torch.nn.Parameter(torch.eye(D)), torch.nn.Parameter(torch.tensor(1.0))
params = list(wa.parameters()) + list(wb.parameters()) + [M, lam]
opt = torch.optim.Adam(params, lr=float(sys.argv[1]) if len(sys.argv) > 1 else 3e-3)


def scores(h, e, base):
    a = torch.softmax(wa(h).squeeze(-1), -1)  # [C, S-1]: where each key chunk's lexical term reads
    b = torch.softmax(wb(h).squeeze(-1), -1)
    kl, ql = torch.einsum("cs,csd->cd", a, e), torch.einsum("cs,csd->cd", b, e)
    kl, ql = kl / kl.norm(dim=-1, keepdim=True), ql / ql.norm(dim=-1, keepdim=True)
    lex = (ql @ M) @ kl.T
    return base + lam * 10 * lex.masked_fill(~torch.isfinite(base[0]), 0)[None]


def hit4(w):
    with torch.no_grad():
        return hits(scores(*w[:3]), w[3])


def report(step):
    tr = np.mean(sum((hit4(w) for w in wins[:32]), []))
    te = np.mean(sum((hit4(w) for w in wins[32:]), []))
    print(f"step {step}: hit@4 train {tr:.3f} held-out windows {te:.3f} lam {lam.item():.2f}", flush=True)


report(0)
with torch.no_grad():
    lam.zero_()
report("0 (lam=0, base only)")
with torch.no_grad():
    lam.fill_(0.1)
for step in range(1, 401):
    w = wins[step % 32]
    loss = forced_retrieval_loss(scores(*w[:3]), w[3])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        report(step)
