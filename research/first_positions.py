"""`python research/first_positions.py [--model M] [--length 64k] [--samples 0,10] [--prefix 0,1,4,16,62]`:
is a needle written at the very start of the stream (depth 0.0 of `drt-reader eval niah`, the
needle in the first tokens of chunk 0) retrieved, and does it become so when k tokens of ordinary
text come before the haystack? For each `eval niah` sample (same seed, depths and layout) it prints
the rank of the chunk holding the answer's first token among the chunks the answer's landmark may
select (model.landmarks: the engine's ranking, without the upper layers), as is and with each
prefix: the last k tokens of the haystack file's first 62 (the same text for every sample; k = 1
is <|endoftext|> alone). Round 17 of docs/history/2026-11-29-to-12-01-model-rounds.md measured it."""
from __future__ import annotations

import argparse
import sys

sys.path.insert(0, ".")
from bench.niah_retrieval import landmark_scores, score_rank  # noqa: E402
from drt_core.engine import Engine  # noqa: E402
from drt_core.evaluate import load_token_source, niah_depths, niah_example, parse_length  # noqa: E402
from drt_core.prompts import layout_prompt  # noqa: E402
from drt_core.tasks import PAD_ID, value_span  # noqa: E402


def prefix_tokens(k: int, hay, eos: int) -> list[int]:
    """k tokens to write before the haystack: none, <|endoftext|> (k = 1), or the last k of hay[:62]."""
    if k == 1:
        return [eos]
    if not 0 <= k <= 62:
        raise SystemExit(f"--prefix values must be in [0, 62], got {k}")
    return [int(t) for t in hay[62 - k:62]]


def aligned(prompt: list[int], n_context: int, pre: list[int], S1: int) -> list[int]:
    """pre + the haystack, with the question after it laid out again by prompts.layout_prompt (the
    app's layout: the prompt's last token on the first slot of a chunk). prompt: an example's
    prompt_ids, n_context haystack tokens, then the pads and the question."""
    n_pad = 0
    while prompt[n_context + n_pad] == PAD_ID:
        n_pad += 1
    question = prompt[n_context + n_pad:]
    return pre + prompt[:n_context] + layout_prompt(len(pre) + n_context, question, chunk_tokens=S1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--length", default="64k")
    p.add_argument("--samples", default="0,10", help="eval niah sample indices (with --depths 5: i %% 5 == 0 is depth 0.0)")
    p.add_argument("--depths", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefix", default="0,1,4,16,62", help="prefix lengths k (tokens)")
    p.add_argument("--haystack", default="data/books/val.bin")
    a = p.parse_args(argv)
    eng = Engine.from_pretrained(a.model)
    S1 = eng.cfg.chunk_tokens
    hay, _ = load_token_source(a.haystack, a.model)
    L = parse_length(a.length)
    for i in [int(x) for x in a.samples.split(",")]:
        ex = niah_example("single", hay, L, i, a.seed, niah_depths(a.depths), "train", a.model)
        prompt = ex.prompt_ids(0).tolist()
        v0, _ = value_span(ex, 0, a.model)
        cells = []
        for k in [int(x) for x in a.prefix.split(",")]:
            ids = aligned(prompt, ex.n_context, prefix_tokens(k, hay, eng.cfg.eos_token_id), S1)
            row = (len(ids) - 1) // S1 - 1  # the landmark that serves the answer chunk, after the whole question
            s = landmark_scores(eng, ids, row)
            c = (v0 + k) // S1
            cells.append(f"k={k}: rank {score_rank(s, c)} of {row} ({float(s[c]):.0f} vs best {float(s.max()):.0f})")
        print(f"{a.length} sample {i} depth {ex.meta['depth']} value at token {v0}: " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
