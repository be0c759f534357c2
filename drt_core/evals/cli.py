"""The command line of drt_core.evals: `eval niah` and `eval ppl` (docs/cli.md), under app's `eval`
group.

The parsers only: this module imports argparse, and each handler imports the module that runs it
(niah, ppl: numpy, torch, the engine) when the command runs, so that `drt-reader --help` stays fast.
"""

from __future__ import annotations

import argparse


def register_eval(esub) -> None:
    """`eval niah` and `eval ppl` (drt_core.evals.niah and .ppl run them)."""

    def common(q):
        q.add_argument("--models", default=None,
                       help="checkpoints to compare, comma-separated (default: the global --model)")
        q.add_argument("--memmap-above", default="64k",
                       help="use the memmap tier (temp dir) for inputs longer than this (default 64k)")
        q.add_argument("--tmp-dir", default=None, help="where the memmap tier writes (default: system temp)")
        q.add_argument("--device", default=None, help="torch device (default: env DRT_DEVICE or cpu)")
        q.add_argument("--faiss", action="store_true", help="retrieve through a faiss index (same top-k)")
        q.add_argument("--json", action="store_true", help="print one JSON object")

    n = esub.add_parser("niah", help="needle-in-a-haystack accuracy per length (and depth)")
    n.add_argument("--lengths", required=True, help="e.g. 4k,64k,1m,16m (k = 1024, m = 1024^2 tokens)")
    n.add_argument("--task", default="single", choices=["single", "multikey", "2hop"])
    n.add_argument("--haystack", default=None,
                   help="haystack: a uint16 .bin token file or a text file (default data/books/val.bin)")
    n.add_argument("--samples", type=int, default=10, help="examples per length (default 10)")
    n.add_argument("--depths", type=int, default=5, help="needle depths spread over [0, 1] (default 5)")
    n.add_argument("--phrasings", default="train", choices=["train", "heldout", "all"],
                   help="needle/question phrasings: train (the paper's protocol, default) "
                        "or heldout (unseen)")
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--max-new-tokens", type=int, default=None, help="default: answer length + 8")
    common(n)
    n.set_defaults(func=cmd_niah)

    q = esub.add_parser("ppl", help="perplexity = exp(mean NLL) per evaluation length")
    q.add_argument("--file", required=True, help="a uint16 .bin token file or a text file")
    q.add_argument("--lengths", required=True, help="e.g. 4k,16k,64k (k = 1024)")
    q.add_argument("--windows", type=int, default=4, help="at most this many windows per length (default 4)")
    common(q)
    q.set_defaults(func=cmd_ppl)


def cmd_niah(args: argparse.Namespace) -> int:
    from . import niah

    return niah.cmd_niah(args)


def cmd_ppl(args: argparse.Namespace) -> int:
    from . import ppl

    return ppl.cmd_ppl(args)
