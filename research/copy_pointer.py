"""Is a pointer (copy) head over the retrieved chunks learnable where copying through GCA was not?
`python research/copy_pointer.py [--oracle 1] [--steps 150] ...`

Beside the LM head, a one-head pointer attends from each token to the slots of the chunks its
retrieval row selected (the same chunks and fusion weights GCA reads; softmax-one per chunk, as in
GCA), with keys from the chunk memory (smeared: a slot's key mixes in the previous slot's, so the
head can point at "the token after the one that matches"). The next-token distribution is
(1 - g) softmax(LM logits) + g * sum of the pointer's weights on the slots holding each token,
with a learned gate g (pointer-generator networks, See et al., 2017). The pointer gets the answer
gradient directly (d loss / d weight of the right slot), not through GCA -> MLP -> residual.

Fine-tunes a checkpoint on short NIAH sequences (the needle beyond the window), the needle chunk
forced (--oracle 1: answer rows read only it) and prints per step the answer loss and the
first-answer-token accuracy of the mixture (chance 1/10 on digits). Diagnostic for docs/history/2026-11-29-to-12-01-model-rounds.md."""
import argparse, json, random, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, ".")
from drt_core import tasks
from drt_core.modeling import DRTForCausalLM, RMSNorm, smear

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="checkpoints/drt-tiny-pretrained")
ap.add_argument("--task", default="multikey")
ap.add_argument("--len", type=int, default=756)
ap.add_argument("--pairs", type=int, default=2)
ap.add_argument("--distr", type=int, default=3)
ap.add_argument("--bs", type=int, default=8)
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--head-lr", type=float, default=3e-3)
ap.add_argument("--oracle", type=int, default=1)
ap.add_argument("--aw", type=float, default=5.0)
ap.add_argument("--freeze", type=int, default=0, help="1: train the pointer head only")
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--out", default=None)
a = ap.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
torch.manual_seed(0)


class PointerHead(nn.Module):
    def __init__(self, D: int, d: int = 64):
        super().__init__()
        self.d = d
        self.norm = RMSNorm(D)
        self.q = nn.Linear(D, d, bias=False)
        self.k = nn.Linear(D, d, bias=False)
        self.smear = nn.Parameter(torch.zeros(1))
        self.gate = nn.Linear(D, 1)
        nn.init.normal_(self.q.weight, std=0.02)
        nn.init.normal_(self.k.weight, std=0.02)
        nn.init.zeros_(self.gate.weight)
        nn.init.constant_(self.gate.bias, -2.0)

    def forward(self, h, mem, chunk_ids, idx, w):
        """h [B, C, S1, D] final states; mem [B, C, S1, D] chunk memory; chunk_ids [B, C, S1] token ids;
        idx, w [B, C, k] retrieval rows (row c serves chunk c+1).
        Returns gate logit [B, C, S1], pointer weights [B, C-1, S1, k, S1] for chunks 1.., slot tokens
        [B, C-1, k, S1]."""
        B, C, S1, D = h.shape
        q = self.q(self.norm(h[:, 1:]))  # [B, C-1, S1, d]
        keys = self.k(mem)  # [B, C, S1, d]
        keys = smear(keys.transpose(1, 2), self.smear).transpose(1, 2)  # along the slots of each chunk
        sel = idx[:, :-1]  # [B, C-1, k]
        bi = torch.arange(B).view(B, 1, 1)
        K = keys[bi, sel]  # [B, C-1, k, S1, d]
        toks = chunk_ids[bi, sel]  # [B, C-1, k, S1]
        s = torch.einsum("bctd,bcjsd->bctjs", q.float(), K.float()) / self.d ** 0.5
        # softmax-one per retrieved chunk, weighted by the fusion weights
        m_ = s.amax(-1, keepdim=True).clamp_min(0)
        e = torch.exp(s - m_)
        p = e / (e.sum(-1, keepdim=True) + torch.exp(-m_))
        p = p * w[:, :-1].float().unsqueeze(2).unsqueeze(-1)
        return self.gate(h).squeeze(-1), p, toks


hay = np.memmap("data/books/train.bin", dtype=np.uint16, mode="r")
m = DRTForCausalLM.from_pretrained(a.init)
m.train()
S1 = m.config.chunk_tokens
ptr = PointerHead(m.config.hidden_size)
cap = {}
m.encoder.register_forward_hook(lambda mod, i, o: cap.__setitem__("mem", o[1]))
m.norm.register_forward_hook(lambda mod, i, o: cap.__setitem__("h", o))
if a.freeze:
    for p_ in m.parameters():
        p_.requires_grad_(False)
groups = [{"params": list(ptr.parameters()), "lr": a.head_lr}]
if not a.freeze:
    groups.append({"params": list(m.parameters()), "lr": a.lr})
opt = torch.optim.AdamW(groups, weight_decay=0.0, betas=(0.9, 0.95))
C = -(-a.len // S1)
t0 = time.time()
for step in range(a.steps):
    rng = random.Random(f"pointer:{step}")
    exs = [tasks.build(a.task, hay, a.len, rng, n_pairs=(1 if a.task == "single" else a.pairs),
                       n_distractors=None if a.task != "multikey" else a.distr, needle_margin=320,
                       answer_weight=a.aw) for _ in range(a.bs)]
    ids = torch.from_numpy(np.stack([e.ids for e in exs]))
    wt = torch.from_numpy(np.stack([e.weights for e in exs])).float()
    forced = torch.full((a.bs, C), -1, dtype=torch.long)
    for b, e in enumerate(exs):
        for row, ch in tasks.retrieval_targets(e):
            forced[b, row] = ch[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        res = m(ids, forced_chunks=forced, forced_oracle=bool(a.oracle), output_retrieval=True)
    r = res.retrieval[0]
    B, L = ids.shape
    pad = C * S1 - L
    h = F.pad(cap["h"].float(), (0, 0, 0, pad)).view(B, C, S1, -1)
    mem = cap["mem"].float().view(B, C, S1, -1)
    cids = F.pad(ids, (0, pad)).view(B, C, S1)
    glog, p, toks = ptr(h, mem, cids, r["idx"], r["weights"])
    # next-token targets of chunks 1..C-1
    tgt = F.pad(ids[:, 1:], (0, pad + 1), value=-100).view(B, C, S1)[:, 1:]  # [B, C-1, S1]
    wts = F.pad(wt[:, 1:], (0, pad + 1)).view(B, C, S1)[:, 1:]
    logp_lm = torch.log_softmax(res.logits.float(), -1)  # [B, L, V]
    logp_lm = F.pad(logp_lm, (0, 0, 0, pad)).view(B, C, S1, -1)[:, 1:]
    lp_lm_t = logp_lm.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    p_copy_t = (p * (toks.unsqueeze(2) == tgt.unsqueeze(-1).unsqueeze(-1))).sum((-1, -2))
    g = glog[:, 1:]
    lp = torch.logaddexp(F.logsigmoid(-g) + lp_lm_t, F.logsigmoid(g) + torch.log(p_copy_t + 1e-9))
    valid = (tgt >= 0).float() * wts
    loss = -(lp * valid).sum() / valid.sum()
    ans = (wts > 1) & (tgt >= 0)
    ans_loss = float(-(lp[ans]).mean())
    # first answer token: full mixture argmax at each prompt end
    first, first_lm, gates = [], [], []
    for b, e in enumerate(exs):
        for (s_, _e), pe in zip(e.answer_spans, e.prompt_ends):
            c, t = pe // S1 - 1, pe % S1
            mix = (1 - torch.sigmoid(g[b, c, t])) * logp_lm[b, c, t].exp()
            mix = mix.index_add(0, toks[b, c].reshape(-1), torch.sigmoid(g[b, c, t]) * p[b, c, t].reshape(-1))
            first.append(int(mix.argmax()) == int(e.ids[s_]))
            first_lm.append(int(logp_lm[b, c, t].argmax()) == int(e.ids[s_]))
            gates.append(float(torch.sigmoid(g[b, c, t])))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(ptr.parameters()) + list(m.parameters()), 1.0)
    opt.step()
    print(json.dumps({"step": step, "loss": round(float(loss), 3), "ans_loss": round(ans_loss, 3),
                      "first_acc": round(float(np.mean(first)), 3), "first_acc_lm": round(float(np.mean(first_lm)), 3),
                      "gate": round(float(np.mean(gates)), 3), "own_key": round(float(torch.sigmoid(ptr.smear)), 3),
                      "s": round(time.time() - t0)}), flush=True)
if a.out:
    torch.save(ptr.state_dict(), a.out)
