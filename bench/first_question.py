"""A document's first question against its next ones, with and without `qa.ask.warm` (what the UI
runs when a document is picked), in one process each:

    python -m bench.first_question --home runs/evalhome --title "Vanity Fair" --mode cold
    python -m bench.first_question --home runs/evalhome --title "Vanity Fair" --mode warm

Prints the seconds of the warm-up (mode warm) and of each question (`ask`, causal effects on).
Alternate the two modes a few times: the machine's load moves the figures.
"""

from __future__ import annotations

import argparse
import json
import time

QUESTIONS = ("Who is Rawdon Crawley?", "Whom does Amelia marry?")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.first_question")
    ap.add_argument("--home", required=True, help="a library holding the prefilled document")
    ap.add_argument("--title", required=True)
    ap.add_argument("--model", default="checkpoints/drt-tiny")
    ap.add_argument("--mode", choices=("cold", "warm"), default="cold")
    ap.add_argument("--question", action="append", help="(repeatable) default: two questions on Vanity Fair")
    a = ap.parse_args(argv)
    from ingest.pipeline import load_engine
    from qa.ask import ask, warm
    from store.library import Library

    lib = Library(a.home)
    eng = load_engine(a.model)
    doc = {d["title"]: d["id"] for d in lib.documents()}[a.title]
    out = {"mode": a.mode}
    if a.mode == "warm":
        t = time.perf_counter()
        warm(lib, eng, doc)
        out["warm_s"] = round(time.perf_counter() - t, 3)
    out["questions_s"] = []
    for q in a.question or QUESTIONS:
        t = time.perf_counter()
        ask(lib, eng, doc, q, max_new_tokens=8)
        out["questions_s"].append(round(time.perf_counter() - t, 3))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
