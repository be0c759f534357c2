"""Same tokens, more context: `python -m bench.ppl_context --models A,B --file data/books/test.bin`.

`eval ppl` scores different spans of the file at different lengths (its 4K windows are the first
tokens of the file, its 64K windows much more text), so its columns mix the effect of context with
that of the text. This bench holds the text fixed: for each window of `--context` tokens it scores
the LAST `--tail` tokens twice, once after the whole window (long context, reachable only through
retrieval beyond the self-attention window) and once after only the `--tail` tokens that precede
them (each scored token then has tail..2*tail-1 tokens of context, about the training length), and
reports both perplexities per model, on exactly the same tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


from drt_core.evals.lengths import parse_length as parse_len  # noqa: E402  (one length syntax: 4k, 1m)


def run(models: list[str], file: str, context: int, tail: int, windows: int) -> dict:
    from drt_core.engine import Engine

    ids = np.fromfile(file, dtype=np.uint16).astype(np.int64)
    nw = min(windows, len(ids) // context)
    out = {"file": file, "context": context, "tail": tail, "windows": nw, "models": []}
    for path in models:
        eng = Engine.from_pretrained(path)
        long_nll, short_nll = [], []
        for w in range(nw):
            win = ids[w * context:(w + 1) * context].tolist()
            long_nll.append(eng.nll(win)[-tail:])
            short_nll.append(eng.nll(win[-2 * tail - 1:])[-tail:])  # `tail` tokens of context, then the same tail
        lo, sh = np.concatenate(long_nll), np.concatenate(short_nll)
        out["models"].append({"model": path, "ppl_long_context": math.exp(lo.mean()),
                              "ppl_short_context": math.exp(sh.mean()), "tokens": int(lo.size)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.ppl_context", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="checkpoints/drt-tiny")
    p.add_argument("--file", default="data/books/test.bin")
    p.add_argument("--context", default="64k")
    p.add_argument("--tail", type=int, default=4032)
    p.add_argument("--windows", type=int, default=4)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    res = run([m for m in a.models.split(",") if m], a.file, parse_len(a.context), a.tail, a.windows)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{res['file']}: last {res['tail']} tokens of {res['windows']} windows of {res['context']:,} tokens")
    print("| model | ppl after the whole window | ppl after {0} tokens | ratio |".format(res["tail"]))
    print("|---|---|---|---|")
    for m in res["models"]:
        print(f"| `{m['model']}` | {m['ppl_long_context']:.1f} | {m['ppl_short_context']:.1f} | "
              f"{m['ppl_long_context'] / m['ppl_short_context']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
