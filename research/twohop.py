"""Where a 2-hop answer is lost, on the samples of `drt-reader eval niah --task 2hop` (seed 0, five
depths, the validation books):

`python research/twohop.py ranks MODEL [LENGTH] [SAMPLES]`: the rank of the chunk holding hop 1's
value ("a -> b", matched by the question's start code) and of hop 2's ("b -> c", which no word of the
question names) in the answer row's scores, for each group's query (the batch forward's scores),
and with G >= 2 how often each hop is in some group's top-k (what the copy head reads with config
copy_groups="all").

`python research/twohop.py copy MODEL [LENGTH] [SAMPLES]`: teacher-forced, at the first token of
each value (after ":" for hop 1, after the separator tasks.TWOHOP_SEP for hop 2): the model's output
right; the copy head's pointer pointing at the right token (its heaviest token); the gate's mean
opening (sigmoid), which mixes the pointer into the LM output. Each miss prints the slot the
pointer chose and the text before it.

`python research/twohop.py scores MODEL [LENGTH] [SAMPLES]`: at the same tokens, the pointer's
score of the slot it chose split into its terms: the learned query-key score (after copy_qk_cap),
the suffix-match bias, the recall biases (with copy_recall_age, ages included) and the chunk's
log fusion weight (copy_global's prior); for a miss, the same for the best slot holding the
right token (none printed when no retrieved slot holds it).

All three run the batch forward of the whole sample: at 64K that takes about 13 GB of RAM."""
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
from bench.niah_retrieval import parse_len, score_rank  # noqa: E402
from drt_core import DRTForCausalLM  # noqa: E402
from drt_core.evaluate import niah_depths, niah_example  # noqa: E402
from drt_core.modeling import MATCH_SCALE  # noqa: E402
from drt_core.tasks import TWOHOP_SEP, retrieval_targets  # noqa: E402


def ranks(model, model_dir, examples):
    G, k = model.config.num_groups, model.config.chunk_topk
    hits, union = np.zeros((G, 2), int), np.zeros(2, int)
    for i, ex in enumerate(examples):
        (row, (h1, h2)), = retrieval_targets(ex, model_dir)
        with torch.no_grad():
            out = model(torch.tensor(ex.prompt_ids(0))[None], output_retrieval=True)
        line, got = [f"sample {i}: hops in chunks {h1}, {h2} of {row}"], np.zeros(2, bool)
        for g in range(G):
            s = out.retrieval[g]["scores"][0, row, :row]
            r = np.array([score_rank(s, h1), score_rank(s, h2)])
            hits[g] += r <= k
            got |= r <= k
            line.append(f"g{g} ranks {r[0]}, {r[1]}")
        union += got
        print("; ".join(line), flush=True)
    return (f"top-{k} hits: " + ", ".join(f"g{g} hop 1 {a}, hop 2 {b}" for g, (a, b) in enumerate(hits.tolist()))
            + (f"; in some group's top-{k}: hop 1 {union[0]}, hop 2 {union[1]}" if G > 1 else ""))


def hop_positions(ex, sep_ids) -> tuple[tuple[str, int], tuple[str, int]]:
    """The positions whose next token starts each value of the first answer: the ":" of "Answer:"
    (hop 1) and the separator tasks.TWOHOP_SEP, as token ids sep_ids (hop 2). Position t predicts
    token t + 1."""
    a0, a1 = ex.answer_spans[0]
    sep = next(j for j, t in enumerate(ex.ids[a0:a1].tolist()) if t in sep_ids)
    return ("hop 1", a0 - 1), ("hop 2", a0 + sep)


def copy(model, model_dir, examples):
    from drt_core.tokenizer import load_tokenizer

    cap, orig = {}, model._batch_copy

    def spy(*a):
        cap["copy"] = orig(*a)
        return cap["copy"]

    model._batch_copy = spy
    tok = load_tokenizer(model_dir)
    sep_ids = tok.encode(TWOHOP_SEP, add_special_tokens=False)
    R = model.config.copy_lead + model.config.chunk_size - 1 + model.config.copy_span
    stats = {h: np.zeros(3) for h in ("hop 1", "hop 2")}
    for i, ex in enumerate(examples):
        a0, a1 = ex.answer_spans[0]
        with torch.no_grad():
            out = model(torch.tensor(ex.ids[:a1])[None])
        gate, p, toks = cap["copy"]
        for hop, t in hop_positions(ex, sep_ids):  # position t predicts token t + 1
            want = int(ex.ids[t + 1])
            mass = torch.zeros(int(toks.max()) + 1).index_add_(0, toks[0, t], p[0, t])
            stats[hop] += [int(out.logits[0, t].argmax()) == want, int(mass.argmax()) == want,
                           float(torch.sigmoid(gate[0, t]))]
            if int(mass.argmax()) != want:  # where the pointer went: its heaviest slot and the text before it
                r = int(p[0, t].argmax())
                lo = r - min(r % R, 12)
                print(f"sample {i} {hop}: want {tok.decode([want])!r} ({float(mass[want]):.2f}), pointer "
                      f"{tok.decode([int(toks[0, t, r])])!r} ({float(mass.max()):.2f}) after "
                      f"{tok.decode(toks[0, t, lo:r].tolist())!r}; answer so far "
                      f"{tok.decode(ex.ids[a0 - 12:t + 1].tolist())!r}", flush=True)
    n = len(examples)
    return "; ".join(f"{hop} first token: output right {int(ok)}, pointer right {int(ptr)}, mean gate {g / n:.2f}"
                     for hop, (ok, ptr, g) in stats.items())


def scores(model, model_dir, examples):
    from drt_core.tokenizer import load_tokenizer

    ch, cfg, cap = model.copy_head, model.config, {}
    head_fwd, batch_copy = ch.forward, model._batch_copy

    def spy_head(*a):
        cap["args"] = a
        return head_fwd(*a)

    def spy_copy(*a):
        cap["copy"] = batch_copy(*a)
        return cap["copy"]

    ch.forward, model._batch_copy = spy_head, spy_copy
    tok = load_tokenizer(model_dir)
    sep_ids = tok.encode(TWOHOP_SEP, add_special_tokens=False)
    R = cfg.copy_lead + cfg.chunk_size - 1 + cfg.copy_span
    S1 = cfg.chunk_size - 1
    right_n = {"hop 1": 0, "hop 2": 0}
    for i, ex in enumerate(examples):
        with torch.no_grad():
            model(torch.tensor(ex.ids[:ex.answer_spans[0][1]])[None])
            h, emb, mem_k, prev_emb, w, bigram, match, recall = cap["args"]
            gate, p, toks = cap["copy"]
            for hop, t in hop_positions(ex, sep_ids):
                want, z, m = int(ex.ids[t + 1]), t // S1 - 1, t % S1  # row z serves chunk z + 1
                hn = ch.norm(h[z:z + 1, m:m + 1])
                q = ch.q(hn) + ch.q_tok(ch.tok_norm(emb[z:z + 1, m:m + 1]))
                mk = mem_k[z:z + 1]
                keys = ch.k(mk) + ch.k_prev(F.pad(mk, (0, 0, 1, 0))[..., :-1, :]) + ch.k_tok(ch.tok_norm(prev_emb[z:z + 1]))
                if ch.bigram:
                    q = q + ch.q_tok2(ch.tok_norm(bigram[0][z:z + 1, m:m + 1]))
                    keys = keys + ch.k_tok2(ch.tok_norm(bigram[1][z:z + 1]))
                qk = (torch.einsum("zmd,zjnd->zmjn", q, keys) / math.sqrt(ch.d))[0, 0].flatten()
                if ch.qk_cap:
                    qk = ch.qk_cap * torch.tanh(qk / ch.qk_cap)
                terms = {"qk": qk}
                if ch.match:
                    terms["match"] = (MATCH_SCALE * ch.match_bias[match[z, m].long()]).flatten()
                if ch.recall:
                    J, rc = ch.recall, recall[z, m].long()
                    table = ch.recall_bias
                    if ch.ages:
                        table = (table[:, None, :] + ch.recall_age_bias.transpose(1, 2)).flatten(1)
                    padded = F.pad(rc, (J, 0))
                    terms["recall"] = (MATCH_SCALE * sum(table[o][padded[..., J - 1 - o: J - 1 - o + rc.shape[-1]]]
                                                         for o in range(J))).flatten()
                if cfg.copy_global:
                    terms["log w"] = torch.log(w[z].clamp_min(1e-30)).repeat_interleave(R)
                total = sum(terms.values())
                tk = toks[0, t]

                def say(r):
                    return (f"{tok.decode([int(tk[r])])!r} (chunk {r // R}, slot {r % R}): "
                            + ", ".join(f"{k} {float(v[r]):.1f}" for k, v in terms.items()) + f" = {float(total[r]):.1f}")

                chosen = int(p[0, t].argmax())
                ok = int(tk[chosen]) == want
                right_n[hop] += ok
                line = f"sample {i} {hop} {'right' if ok else 'MISS'}: chose {say(chosen)}"
                holds = [r for r in range(len(tk)) if int(tk[r]) == want]
                if not ok:
                    line += f" | right {say(max(holds, key=lambda r: float(total[r])))}" if holds else " | right: not read"
                print(line, flush=True)
    ch.forward, model._batch_copy = head_fwd, batch_copy
    return "pointer right at the first token: " + ", ".join(f"{h} {n}/{len(examples)}" for h, n in right_n.items())


if __name__ == "__main__":
    mode, model_dir = sys.argv[1], sys.argv[2]
    L = parse_len(sys.argv[3]) if len(sys.argv) > 3 else 4096
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    hay = np.fromfile("data/books/val.bin", dtype=np.uint16).astype(np.int64)
    model = DRTForCausalLM.from_pretrained(model_dir).eval()
    examples = [niah_example("2hop", hay, L, i, 0, niah_depths(5), "train", model_dir) for i in range(n)]
    print(f"{L} tokens, {n} samples: " + {"ranks": ranks, "copy": copy, "scores": scores}[mode](model, model_dir, examples))
