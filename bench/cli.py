"""`drt-reader bench NAME [ARGS...]`: runs bench/NAME.py's main(argv) (gca, prefill, train, ingest)."""

from __future__ import annotations

import argparse
import importlib

BENCHES = ["gca", "prefill", "train", "ingest"]


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks (results go to docs/RESULTS.md by hand, with the command)")
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
