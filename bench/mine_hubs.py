"""`drt-reader bench mine_hubs MODEL OUT.npy [--haystack data/books/train.bin] [--tokens 2m]
[--queries 64] [--top 10] [--keep 512]`: hard negatives for the retrieval scorer (`train
--hard-negatives OUT.npy`). Hubs are chunks that score high for every passkey question (RESULTS.md
§5, round 8): they outrank the needle at 1M. This mines them from a TRAINING haystack: the keys of
`--tokens` tokens of it (model.landmarks, in slices spread over the file) against the landmark
queries of `--queries` single-needle questions (train phrasings, other haystack windows); a chunk's
hub count is the number of questions that rank it in their top `--top`. Writes the `--keep` most
frequent hubs as an int64 array [keep, key_context + 63]: each chunk's tokens with the
key_context tokens before it (what its key reads)."""
import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from drt_core.evals.lengths import parse_length  # noqa: E402
from drt_core.modeling import DRTForCausalLM  # noqa: E402
from drt_core.train.tasks.needles import build  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--haystack", default="data/books/train.bin")
    p.add_argument("--tokens", default="2m")
    p.add_argument("--slices", type=int, default=8)
    p.add_argument("--queries", type=int, default=64)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--keep", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    model = DRTForCausalLM.from_pretrained(a.model).eval()
    S1, m = model.config.chunk_tokens, model.config.key_context
    hay = np.memmap(a.haystack, dtype=np.uint16, mode="r")
    per = parse_length(a.tokens) // a.slices // S1 * S1
    starts = np.linspace(0, len(hay) - per, a.slices).astype(int) // S1 * S1
    keys, spans = [], []
    with torch.no_grad():
        for s in starts:
            ids = torch.from_numpy(hay[s:s + per].astype(np.int64))
            k, _ = model.landmarks(ids)
            keys.append(k[1:per // S1])  # chunk 0 has no context in this slice
            spans += [s + c * S1 for c in range(1, per // S1)]
        keys = torch.cat(keys).float()
        queries = []
        for i in range(a.queries):
            ex = build("single", hay, 4096, 10_000 + a.seed * 1000 + i, depth=(i + 0.5) / a.queries,
                       phrasings="train", tokenizer_path=a.model)
            row = ex.prompt_ends[0] // S1 - 1
            _, q = model.landmarks(torch.from_numpy(ex.ids[: (row + 1) * S1]))
            queries.append(q[row])
        s = torch.stack(queries).float() @ keys.T  # [Q, N]
    top = s.topk(a.top, dim=-1).indices
    count = torch.bincount(top.flatten(), minlength=keys.shape[0]).float()
    order = torch.argsort(count + 1e-6 * s.mean(0), descending=True)[: a.keep]
    order = order[count[order] > 0]
    out = np.stack([np.asarray(hay[spans[i] - m: spans[i] + S1], dtype=np.int64) for i in order.tolist()])
    np.save(a.out, out)
    from drt_core.tokenizer import load_tokenizer

    tok = load_tokenizer(a.model)
    print(f"{keys.shape[0]} chunks x {a.queries} questions: {int((count > 0).sum())} in some top-{a.top}; "
          f"kept {len(out)} (counts {int(count[order[0]])} .. {int(count[order[-1]])}) -> {a.out}")
    for i in order[:8].tolist():
        print(f"  {int(count[i])}: {tok.decode(hay[spans[i]:spans[i] + S1].tolist())[:110]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
