"""`drt-reader bench NAME [ARGS...]`: runs bench/NAME.py's main(argv).

Benchmarks (figures in docs/RESULTS.md): gca, prefill, train, ingest; reading: ask (answer latency on
a book, in process), citations (does the
model retrieve the statement a Stacks passage or a paper cites), paper_statements (does the outline
find a paper PDF's numbered statements, checked against its TeX), summary_coverage (whole-book summaries of
PDFs: chapters covered, no boilerplate, whole sentences); reliability: load (the served
app under N clients), faults (SIGKILLed ingests resumed bit-identical), fuzz (the parse worker).
Maintenance tools a round of
training runs again (docs/cli.md): niah_miss (why one needle sample is missed), mine_hubs (hard
negatives for `train --hard-negatives`), task_losses (loss per task from a run's log.jsonl),
interpolate (mix or splice two checkpoints' tensors), lexical_idf (lexical weightings on an
`eval qa --json` run, offline). One-off diagnostics are not kept in the tree
(docs/history/2026-12-06-research-removed.md)."""

from __future__ import annotations

import argparse
import importlib

BENCHES = ["gca", "prefill", "train", "ingest", "ask", "faults", "fuzz", "load", "citations", "paper_statements",
           "summary_coverage",
           "niah_miss", "mine_hubs", "task_losses", "interpolate", "lexical_idf"]


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks and maintenance tools (results go to docs/RESULTS.md "
                                     "by hand, with the command)")
    p.add_argument("name", choices=BENCHES, help="which benchmark")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of that benchmark (see bench/NAME.py --help)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    mod = importlib.import_module(f"bench.{args.name}")
    rest = list(args.rest)
    if args.json and "--json" not in rest:
        rest.append("--json")
    return int(mod.main(rest) or 0)
