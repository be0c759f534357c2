"""`python -m bench.causal [--model M] [--text FILE | --bin FILE --length 64k] [--question Q]`: the
cost of `ask`'s causal effects, one forked pass per masked chunk against the batched pass
(`Engine.answer_logprobs`, every mask a row of one batch), on the same document and answer, timed
interleaved in one run; and the largest difference between the two's log-likelihoods."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.niah_retrieval import parse_len
from drt_core.engine import Engine

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    p.add_argument("--text", default=str(ROOT / "tests" / "assets" / "frankenstein_excerpt.txt"),
                   help="a text file, the document (default: the test excerpt, ~10K tokens)")
    p.add_argument("--bin", default=None, help="a uint16 token file instead of --text (its first --length tokens)")
    p.add_argument("--length", default="64k")
    p.add_argument("--question", default="Who is the stranger and what does he tell Walton?")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--masks", type=int, default=8, help="masked chunks (one pass each, or rows of one batch)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    eng = Engine.from_pretrained(a.model)
    if a.bin:
        ids = np.fromfile(a.bin, dtype=np.uint16)[: parse_len(a.length)].astype(np.int64).tolist()
    else:
        ids = eng.tokenizer.encode(Path(a.text).read_text(encoding="utf-8"), add_special_tokens=False)
    st = eng.new_state()
    t0 = time.perf_counter()
    eng.feed(st, ids)
    prefill_s = time.perf_counter() - t0
    ev = list(eng.generate(st, a.question, max_new_tokens=a.max_new_tokens, stop_at_newline=False))
    answer = ev[-1].ids
    prompt = eng.prompt_ids(st, a.question)
    # ask's case: one mask per evidence chunk (what the retrieval of the answer's chunks picked), --masks of them
    chunks = [c for c, _ in eng.evidence(st, ev[-1].trace)][: a.masks]
    masks = [[c] for c in chunks]
    seq_s, bat_s, diff = [], [], 0.0
    for _ in range(a.reps):
        t0 = time.perf_counter()
        one = [eng.answer_logprob(st, a.question, answer, m, prompt_ids=prompt) for m in masks]
        seq_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        many = eng.answer_logprobs(st, a.question, answer, masks, prompt_ids=prompt)
        bat_s.append(time.perf_counter() - t0)
        diff = max(diff, max(abs(x - y) for x, y in zip(one, many)))
    res = {"model": a.model, "doc_tokens": len(ids), "doc_chunks": st.n_chunks, "prefill_s": round(prefill_s, 2),
           "answer_tokens": len(answer), "prompt_tokens": len(prompt), "masked_chunks": len(masks),
           "sequential_s": round(float(np.median(seq_s)), 4), "batched_s": round(float(np.median(bat_s)), 4),
           "speedup": round(float(np.median(seq_s)) / float(np.median(bat_s)), 2),
           "max_abs_diff_nats": diff, "reps": a.reps}
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
