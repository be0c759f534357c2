"""Is copying through GCA learnable at all? `python research/copy_synthetic.py [options]`

The smallest test the issue asks for: sequences of uniformly random tokens (vocabulary of --vocab
ids) in which a passage comes back after a gap longer than the self-attention window
(tasks.build_repeat). Only GCA can predict the copied tokens; everything else is noise at
ln(vocab). The passage's source chunks are given to the copy rows as their only retrieved chunks
(--oracle 1) or forced into a natural top-k (--oracle 0), or not forced at all (--force 0).
Prints per step the loss and accuracy on the copied tokens (chance: ln(vocab), 1/vocab).

--wiring residual adds GCA's output to the residual stream (y = a + g + MLP(norm(a + g))), a
diagnostic departure from the spec's bypass wiring, to see which part of the path is slow.
"""
import argparse, json, random, sys, time

import numpy as np
import torch

sys.path.insert(0, ".")
from drt_core import tasks
from drt_core.config import DRTConfig
from drt_core.modeling import DRTForCausalLM, UpperBlock
from drt_core.train import answer_metrics

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="scratch")
ap.add_argument("--vocab", type=int, default=512)
ap.add_argument("--len", type=int, default=756)
ap.add_argument("--span-chunks", type=int, default=2)
ap.add_argument("--gap", type=int, default=300)
ap.add_argument("--near-frac", type=float, default=0.0,
                help="fraction of rows whose copy is INSIDE the window (gap 20, nothing forced): "
                     "in-window copying (induction) next to copying through GCA")
ap.add_argument("--dense-frac", type=float, default=0.0,
                help="fraction of rows made of random segments each repeated at once ([A A B B ...], "
                     "20-60 tokens each): a dense in-window induction signal")
ap.add_argument("--bs", type=int, default=8)
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--oracle", type=int, default=1)
ap.add_argument("--force", type=int, default=1)
ap.add_argument("--wiring", default="bypass", choices=["bypass", "residual"])
ap.add_argument("--set", action="append", default=[], help="config override key=value (scratch only)")
ap.add_argument("--qk-init", type=float, default=0.0,
                help="if > 0: GCA query and chunk-memory key projections start as this times the identity")
ap.add_argument("--vo-init", type=float, default=0.0,
                help="if > 0: chunk-memory value and GCA output projections start as this times the identity")
ap.add_argument("--smear-lr-mult", type=float, default=1.0,
                help="learning-rate multiplier of the smeared-key logits (with --set smear_keys=true)")
ap.add_argument("--smear-spread", type=float, default=0.0,
                help="if > 0: the smear logits of each layer's heads start spread from +x to -x "
                     "(the last head keyed mostly on the previous position)")
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default=None)
a = ap.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)

if a.wiring == "residual":
    def fwd(self, x, gca_fn, pos0=0, cache=None):
        a_ = x + self.attn(self.norm1(x), pos0, cache)
        g = gca_fn(self.gca, a_)
        return a_ + g + self.mlp(self.norm2(a_ + g))
    UpperBlock.forward = fwd

if a.init == "scratch":
    cfg = DRTConfig.from_pretrained("checkpoints/drt-tiny")
    cfg.copy_head = False  # the synthetic probe is about copying without the copy head
    for kv in a.set:
        k, v = kv.split("=", 1)
        setattr(cfg, k, json.loads(v))
    m = DRTForCausalLM(cfg)
else:  # --set applies here too (e.g. smear_keys=true on a plain checkpoint: the logits start at smear_init)
    m = DRTForCausalLM.from_pretrained(a.init, **{k: json.loads(v) for k, v in (kv.split("=", 1) for kv in a.set)})
if a.qk_init or a.vo_init:
    eye = torch.eye(m.config.hidden_size)
    with torch.no_grad():
        if a.qk_init:
            m.encoder.k_proj.weight.copy_(a.qk_init * eye)
        if a.vo_init:
            m.encoder.v_proj.weight.copy_(a.vo_init * eye)
        for grp in m.groups:
            for blk in grp:
                if a.qk_init:
                    blk.gca.q.weight.copy_(a.qk_init * eye)
                if a.vo_init:
                    blk.gca.o.weight.copy_(a.vo_init * eye)
if a.smear_spread:
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("smear"):
                p.copy_(torch.linspace(a.smear_spread, -a.smear_spread, p.numel()))
m.train()


def dense_row(noise, rng):
    """[A A B B ...]: random segments of 20-60 tokens, each said twice in a row; weight 5 on repeats."""
    ids, wts, n = [], [], len(noise)
    while len(ids) < n:
        seg = [int(t) for t in noise[len(ids): len(ids) + rng.randrange(20, 61)]]
        ids += seg + seg
        wts += [1.0] * len(seg) + [5.0] * len(seg)
    return {"ids": np.array(ids[:n], np.int64), "weights": np.array(wts[:n], np.float32),
            "forced": np.full((-(-n // tasks.CHUNK_TOKENS), 2), -1, np.int64)}


smear_p = [p for n, p in m.named_parameters() if n.endswith("smear")]
other_p = [p for n, p in m.named_parameters() if not n.endswith("smear")]
opt = torch.optim.AdamW([{"params": other_p, "mult": 1.0}, {"params": smear_p, "mult": a.smear_lr_mult}],
                        lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
t0 = time.time()
for step in range(a.steps):
    for g in opt.param_groups:
        g["lr"] = a.lr * g["mult"] * min(1.0, (step + 1) / a.warmup)
    rng = random.Random(f"copy:{a.seed}:{step}")
    rows, near = [], []
    for i in range(a.bs):
        noise = np.array([3 + rng.randrange(a.vocab) for _ in range(a.len)], np.int64)
        near.append(i < round((a.near_frac + a.dense_frac) * a.bs))
        if i < round(a.dense_frac * a.bs):
            rows.append(dense_row(noise, rng))
            continue
        rows.append(tasks.build_repeat(noise, a.len, rng, n_passages=1, span_chunks=a.span_chunks,
                                       gap=20 if near[-1] else a.gap))
        if near[-1]:
            rows[-1]["forced"][:] = -1
    ids = torch.from_numpy(np.stack([r["ids"] for r in rows]))
    wt = torch.from_numpy(np.stack([r["weights"] for r in rows]))
    forced = torch.from_numpy(np.stack([r["forced"] for r in rows])) if a.force else None
    near = torch.tensor(near)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        res = m(ids, labels=ids, label_weights=wt, forced_chunks=forced, forced_oracle=bool(a.oracle))
    met = answer_metrics(res.logits, ids, wt)
    if 0 < int(near.sum()) < a.bs:
        nm = answer_metrics(res.logits[near], ids[near], wt[near])
        fm = answer_metrics(res.logits[~near], ids[~near], wt[~near])
        met.update(near_loss=nm["ans_loss"], near_acc=nm["ans_acc"], far_loss=fm["ans_loss"], far_acc=fm["ans_acc"])
    opt.zero_grad()
    res.loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    if step % 5 == 0 or step == a.steps - 1:
        print(json.dumps({"step": step, "copy_loss": round(met["ans_loss"], 3), "copy_acc": round(met["ans_acc"], 3),
                          "chance_loss": round(float(np.log(a.vocab)), 3),
                          **{k: round(v, 3) for k, v in met.items() if k.startswith(("near", "far"))},
                          **({"own_key_share": [[round(float(x), 2) for x in torch.sigmoid(p)] for p in smear_p]} if smear_p else {}),
                          "s": round(time.time() - t0)}), flush=True)
if a.out:
    m.save_pretrained(a.out)
