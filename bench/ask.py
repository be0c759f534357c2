"""Ask latency in process: `python -m bench.ask --doc PATH [--questions FILE] [--home DIR] [--json]`.

Ingests the document (once; a library under --home keeps it), loads the shipped model, then times
`ingest.ask.ask(..., causal=False)` (the answer the reader sees, without the causal effects) for each
question: the first question of the process (it builds the document's BM25 and reader statistics)
and the p50 / p95 / max of the rest. Questions: one per line from --questions, else a built-in list
of plain reader questions (who / what / where / how many). Prints the document's tokens and chunks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUESTIONS = [
    "Who is the heroine of the story?", "Where does the story take place?", "What is the name of the inn?",
    "How old is the youngest brother?", "Who married the widow?", "What did the reddleman sell?",
    "Where did the letter come from?", "What happened at the dance?", "Who owns the house on the heath?",
    "How much money was in the box?", "Why did she leave the village?", "Who is the captain?",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ask", description=__doc__.split("\n")[0])
    ap.add_argument("--doc", required=True)
    ap.add_argument("--questions", default=None, help="a text file, one question a line")
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    ap.add_argument("--home", default="tmp/bench-ask")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from ingest import pipeline
    from ingest.ask import ask
    from store.library import Library

    qs = ([q.strip() for q in Path(a.questions).read_text().splitlines() if q.strip()] if a.questions else QUESTIONS)
    eng = pipeline.load_engine(a.model)
    with Library(a.home) as lib:
        res = pipeline.ingest(a.doc, library=lib, engine=eng)
        times, answers = [], []
        for q in qs:
            t0 = time.perf_counter()
            out = ask(lib, eng, res.doc_id, q, max_new_tokens=64, causal=False)
            times.append(time.perf_counter() - t0)
            answers.append({"question": q, "seconds": round(times[-1], 3), "abstained": out["abstained"],
                            "short_answer": out.get("short_answer"), "quote": (out.get("quote") or {}).get("text")})
    rest = sorted(times[1:])
    p = lambda x: rest[min(len(rest) - 1, int(round(x * (len(rest) - 1))))] if rest else None  # noqa: E731
    out = {"doc": str(a.doc), "tokens": res.tokens, "chunks": res.chunks, "first_s": round(times[0], 3),
           "p50_s": round(statistics.median(rest), 3) if rest else None, "p95_s": p(0.95), "max_s": max(rest) if rest else None,
           "questions": len(qs), "answers": answers}
    if a.json:
        print(json.dumps(out, indent=2))
    elif not rest:
        print(f"{out['doc']}: {out['tokens']:,} tokens, {out['chunks']:,} chunks; ask without causal effects: "
              f"first {out['first_s']} s (one question: no p50 / p95)")
    else:
        print(f"{out['doc']}: {out['tokens']:,} tokens, {out['chunks']:,} chunks; ask without causal effects: "
              f"first {out['first_s']} s, then p50 {out['p50_s']} s, p95 {out['p95_s']:.3f} s, max {out['max_s']:.3f} s "
              f"over {len(rest)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
