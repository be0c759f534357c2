"""Where a 2-hop answer is lost, on the samples of `drt-reader eval niah --task 2hop` (seed 0, five
depths, the validation books):

`python bench/probes/twohop.py ranks MODEL [LENGTH] [SAMPLES]`: the rank of the chunk holding hop 1's
value ("a -> b", matched by the question's start code) and of hop 2's ("b -> c", which no word of the
question names) in the answer row's scores, for each group's query (the batch forward's scores),
and with G >= 2 how often each hop is in some group's top-k (what the copy head reads with config
copy_groups="all").

`python bench/probes/twohop.py copy MODEL [LENGTH] [SAMPLES]`: teacher-forced, at the first token of
each value (after ":" for hop 1, after "," for hop 2): the model's output right; the copy head's
pointer pointing at the right token (its heaviest token); the gate's mean opening (sigmoid), which
mixes the pointer into the LM output. Each miss prints the slot the pointer chose and the text
before it.

Both run the batch forward of the whole sample: at 64K that takes about 13 GB of RAM."""
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from bench.niah_retrieval import parse_len, score_rank  # noqa: E402
from drt_core import DRTForCausalLM  # noqa: E402
from drt_core.evaluate import niah_depths, niah_example  # noqa: E402
from drt_core.tasks import retrieval_targets  # noqa: E402


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


def copy(model, model_dir, examples):
    from drt_core.tokenizer import load_tokenizer

    cap, orig = {}, model._batch_copy

    def spy(*a):
        cap["copy"] = orig(*a)
        return cap["copy"]

    model._batch_copy = spy
    tok = load_tokenizer(model_dir)
    comma = tok.encode(",", add_special_tokens=False)
    R = model.config.copy_lead + model.config.chunk_size - 1 + model.config.copy_span
    stats = {h: np.zeros(3) for h in ("hop 1", "hop 2")}
    for i, ex in enumerate(examples):
        a0, a1 = ex.answer_spans[0]
        with torch.no_grad():
            out = model(torch.tensor(ex.ids[:a1])[None])
        gate, p, toks = cap["copy"]
        ans = ex.ids[a0:a1].tolist()
        sep = next(j for j in range(len(ans)) if ans[j] in comma)
        for hop, t in (("hop 1", a0 - 1), ("hop 2", a0 + sep)):  # position t predicts token t + 1
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


if __name__ == "__main__":
    mode, model_dir = sys.argv[1], sys.argv[2]
    L = parse_len(sys.argv[3]) if len(sys.argv) > 3 else 4096
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    hay = np.fromfile("data/books/val.bin", dtype=np.uint16).astype(np.int64)
    model = DRTForCausalLM.from_pretrained(model_dir).eval()
    examples = [niah_example("2hop", hay, L, i, 0, niah_depths(5), "train", model_dir) for i in range(n)]
    print(f"{L} tokens, {n} samples: " + {"ranks": ranks, "copy": copy}[mode](model, model_dir, examples))
