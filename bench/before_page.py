"""The first spoiler-safe question (`ask --before-page N`) on a long book, in a new process:

    python -m bench.before_page --home runs/evalhome --title "THE RETURN OF THE NATIVE" --page 170

The state of the book cut before page N is built on the first such question (qa.views.prefix_state):
from the stored state's last snapshot before the cut where the stored state keeps snapshots
(state_io.SNAPSHOT_TOKENS; states prefilled since they are kept), else by a prefill from the start.
Prints the seconds of the first and of a second question, the tokens before the cut, and where the
prefill started. Run it on a library prefilled before snapshots and on one prefilled after.
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.before_page")
    ap.add_argument("--home", required=True)
    ap.add_argument("--title", required=True)
    ap.add_argument("--page", type=int, required=True)
    ap.add_argument("--model", default="checkpoints/drt-tiny")
    ap.add_argument("--question", default="Who is Clym Yeobright?")
    a = ap.parse_args(argv)
    from ingest.pipeline import load_engine, ready_state
    from qa.ask import ask
    from qa.views import BeforePage
    from store.library import Library

    lib = Library(a.home)
    eng = load_engine(a.model)
    doc = {d["title"]: d["id"] for d in lib.documents()}[a.title]
    full = ready_state(lib, eng, doc)
    view = BeforePage(lib, doc, a.page)
    start = eng.prefix(full, view.n_tokens)
    out = {"tokens_before_cut": view.n_tokens, "prefill_from": start.n_tokens if start is not None else 0,
           "snapshots": len(full.memory.meta.get("snapshots", []))}
    for key in ("first_s", "second_s"):
        t = time.perf_counter()
        ask(lib, eng, doc, a.question, max_new_tokens=8, before_page=a.page)
        out[key] = round(time.perf_counter() - t, 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
