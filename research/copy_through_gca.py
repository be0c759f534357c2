"""Is copying through GCA learnable? `python research/copy_through_gca.py [--task repeat|multikey|single] ...`

Fine-tunes a checkpoint (default: the pretrained one) on short sequences whose needle (NIAH) or
copied passage (repeat) sits beyond the self-attention window, with the right chunk forced into the
selection (--force 1) or given alone (--oracle 1), and prints per step the loss on the answer /
copied tokens and, for NIAH, the first-answer-token accuracy. Diagnostic for docs/history/2026-11-29-to-12-01-model-rounds.md."""
import argparse, random, time, json, sys
import numpy as np, torch
sys.path.insert(0, '.')
from drt_core import tasks
from drt_core.modeling import DRTForCausalLM
from drt_core.train import answer_metrics

ap = argparse.ArgumentParser()
ap.add_argument('--lr', type=float, default=1e-3)
ap.add_argument('--gca-mult', type=float, default=1.0)
ap.add_argument('--force', type=float, default=1.0)
ap.add_argument('--steps', type=int, default=80)
ap.add_argument('--bs', type=int, default=8)
ap.add_argument('--len', type=int, default=756)
ap.add_argument('--pairs', type=int, default=2)
ap.add_argument('--task', default='multikey')
ap.add_argument('--aw', type=float, default=5.0)
ap.add_argument('--init', default='checkpoints/drt-tiny-pretrained')
ap.add_argument('--out', default=None)
ap.add_argument('--oracle', type=int, default=0)
ap.add_argument('--o-scale', type=float, default=1.0)
ap.add_argument('--distr', type=int, default=3)
a = ap.parse_args()
torch.manual_seed(0)
hay = np.memmap('data/books/train.bin', dtype=np.uint16, mode='r')
m = DRTForCausalLM.from_pretrained(a.init); m.train()
with torch.no_grad():
    for grp in m.groups:
        for blk in grp: blk.gca.o.weight.mul_(a.o_scale)
gca_names = ('gca.', 'encoder.', 'lmk_norms.')
g1 = [p for n, p in m.named_parameters() if any(s in n for s in gca_names)]
g0 = [p for n, p in m.named_parameters() if not any(s in n for s in gca_names)]
opt = torch.optim.AdamW([{'params': g0, 'lr': a.lr}, {'params': g1, 'lr': a.lr * a.gca_mult}], weight_decay=0.0, betas=(0.9, 0.95))
C = -(-a.len // 63)
for step in range(a.steps):
    rng = random.Random(f'probe:{step}')
    if a.task == 'repeat':
        rows = [tasks.build_repeat(hay[(h := rng.randrange(len(hay) - 4000)): h + a.len], a.len, rng) for _ in range(a.bs)]
        ids = torch.from_numpy(np.stack([r['ids'] for r in rows])); lab = ids.clone(); wt = torch.from_numpy(np.stack([r['weights'] for r in rows]))
        forced = torch.from_numpy(np.stack([r['forced'] for r in rows]))
        if not a.oracle and a.force < 1: forced[:] = -1
        with torch.autocast('cpu', dtype=torch.bfloat16):
            res = m(ids, labels=lab, label_weights=wt, forced_chunks=forced, forced_oracle=bool(a.oracle))
        met = answer_metrics(res.logits, lab, wt)
        opt.zero_grad(); res.loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
        print(json.dumps({'step': step, 'loss': round(float(res.loss), 3), 'copy_loss': round(met['ans_loss'], 3), 'copy_acc': round(met['ans_acc'], 3)}), flush=True)
        continue
    exs = [tasks.build(a.task, hay, a.len, rng, n_pairs=(1 if a.task=='single' else a.pairs), n_distractors=None if a.task!='multikey' else a.distr, needle_margin=320, answer_weight=a.aw) for _ in range(a.bs)]
    ids = torch.from_numpy(np.stack([e.ids for e in exs])); lab = torch.from_numpy(np.stack([e.labels for e in exs])); wt = torch.from_numpy(np.stack([e.weights for e in exs]))
    forced = torch.full((a.bs, C), -1, dtype=torch.long)
    hits = 0; nq = 0
    for b, e in enumerate(exs):
        for row, ch in tasks.retrieval_targets(e):
            if rng.random() < a.force:
                forced[b, row] = ch[0]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        res = m(ids, labels=lab, label_weights=wt, forced_chunks=forced, forced_oracle=bool(a.oracle), output_retrieval=True)
    idx = res.retrieval[0]['idx']
    for b, e in enumerate(exs):
        for row, ch in tasks.retrieval_targets(e):
            nq += 1; hits += int((idx[b, row] == ch[0]).any()) if forced[b,row] < 0 else 0
    met = answer_metrics(res.logits, lab, wt)
    # first-token accuracy
    first = []
    for b, e in enumerate(exs):
        for (s, _e), p in zip(e.answer_spans, e.prompt_ends):
            first.append(int(res.logits[b, p].argmax()) == int(e.ids[s]))
    opt.zero_grad(); res.loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    print(json.dumps({'step': step, 'loss': round(float(res.loss), 3), 'ans_loss': round(met['ans_loss'], 3), 'ans_acc': round(met['ans_acc'], 3), 'first_acc': round(float(np.mean(first)), 3), 'unforced_hit': hits}), flush=True)
if a.out:
    m.save_pretrained(a.out)
