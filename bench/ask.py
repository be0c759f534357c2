"""Ask latency: `python -m bench.ask --doc PATH [--questions FILE] [--home DIR] [--server] [--json]`
(`drt-reader bench ask ...`).

Ingests the document (once; a library under --home keeps it), loads the shipped model, then times
`qa.ask.ask(..., causal=False)` (the answer the reader sees, without the causal effects) for each
question: the first question of the process (it builds the document's BM25 and reader statistics)
and the p50 / p95 / max of the rest. Questions: one per line from --questions, else a built-in list
of plain reader questions (who / what / where / how many). Prints the document's tokens and chunks.
`--server`: the same questions through a warm served app and one client (`served`).
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
    ap.add_argument("--server", action="store_true",
                    help="through a warm served app (`drt-reader serve`) with one gradio_client client: the "
                         "time until the answer shows, then until its causal effects arrive")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.server:
        return served(a)
    from ingest import pipeline
    from qa.ask import ask
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
           "p50_s": round(statistics.median(rest), 3) if rest else None, "p95_s": p(0.95),
           "max_s": max(rest) if rest else None,
           "questions": len(qs), "answers": answers}
    if a.json:
        print(json.dumps(out, indent=2))
    elif not rest:
        print(f"{out['doc']}: {out['tokens']:,} tokens, {out['chunks']:,} chunks; ask without causal effects: "
              f"first {out['first_s']} s (one question: no p50 / p95)")
    else:
        print(f"{out['doc']}: {out['tokens']:,} tokens, {out['chunks']:,} chunks; ask without causal effects: "
              f"first {out['first_s']} s, then p50 {out['p50_s']} s, p95 {out['p95_s']:.3f} s, "
              f"max {out['max_s']:.3f} s "
              f"over {len(rest)} questions")
    return 0


def served(a) -> int:
    """The document ingested into --home first (in process), then `drt-reader serve` on that home and
    one client asking each question through `/ask`: seconds until the streamed event that carries the
    answer ("early"), and until the final event (with the causal effects). The first question warms
    the server (loads the model, builds the document's BM25 and reader statistics) and is reported
    apart."""
    from gradio_client import Client

    from bench.load import start_server
    from ingest import pipeline
    from store.library import Library
    from ui.screenshots import free_port

    qs = ([q.strip() for q in Path(a.questions).read_text().splitlines() if q.strip()] if a.questions else QUESTIONS)
    eng = pipeline.load_engine(a.model)
    with Library(a.home) as lib:
        res = pipeline.ingest(a.doc, library=lib, engine=eng)
    del eng
    port = free_port()
    proc = start_server(Path(a.home), a.model, port, None)
    rows = []
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        for q in qs:
            t0 = time.perf_counter()
            shown = None
            job = client.submit(res.doc_id, q, 64, api_name="/ask")
            for ev in job:
                if shown is None and isinstance(ev, dict) and ("early" in ev or ev.get("done")):
                    shown = time.perf_counter() - t0
            final = time.perf_counter() - t0
            rows.append({"question": q, "answer_s": round(shown if shown is not None else final, 3),
                         "effects_s": round(final, 3)})
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    rest = rows[1:]

    def pct(key: str, q: float) -> float | None:
        xs = sorted(r[key] for r in rest)
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None

    out = {"doc": str(a.doc), "tokens": res.tokens, "first": rows[0] if rows else None, "questions": len(rows),
           "answer_p50_s": pct("answer_s", 0.5), "answer_p95_s": pct("answer_s", 0.95),
           "effects_after_p50_s": (pct("effects_s", 0.5) or 0) - (pct("answer_s", 0.5) or 0),
           "effects_p95_s": pct("effects_s", 0.95), "rows": rows}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['doc']}: {out['tokens']:,} tokens; served, one client: first question {rows[0]['answer_s']} s "
              f"(answer) / {rows[0]['effects_s']} s (effects); then the answer shows in p50 {out['answer_p50_s']} s, "
              f"p95 {out['answer_p95_s']} s; the causal effects arrive p50 {out['effects_after_p50_s']:.2f} s later "
              f"(final p95 {out['effects_p95_s']} s) over {len(rest)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
