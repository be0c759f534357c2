"""The command line of drt_core.train: `train`, `data`, `eval niah` and `eval ppl` (docs/cli.md).

The parsers only: this module imports argparse and `options` (standard library), and each handler
imports the module that does the work (loop, data, evaluate: numpy, torch, the model) when the
command runs, so that `drt-reader --help` and the commands that do not train stay fast.
"""

from __future__ import annotations

import argparse

from .options import SPLIT_SEED, add_args


def register(sub: argparse._SubParsersAction) -> None:
    """`train` and `data`."""
    p = sub.add_parser("train", help="train DRT or a baseline (resumes from OUT/state.pt, or OUT/state.dcp with --fsdp)")
    add_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("data", help="tokenize the corpora into flat uint16 token files (and train the tokenizer)")
    p.add_argument("--corpora", required=True, help="corpora directory (books/, shakespeare/, milton/, stacks/)")
    p.add_argument("--out", required=True, help="output directory for splits.json and the .bin files")
    p.add_argument("--train-tokenizer", action="store_true", help="train the BPE on the training split first")
    p.add_argument("--vocab-size", type=int, default=8192, help="vocabulary size when training (default 8192)")
    p.add_argument("--tokenizer-out", default=None, help="where to write the trained tokenizer (default: --model)")
    p.add_argument("--measure-sizes", default="4096,8192,16384", help="vocab sizes to measure bytes/token for")
    p.add_argument("--seed", type=int, default=SPLIT_SEED, help="seed of the document split")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_data)


def register_eval(esub) -> None:
    """`eval niah` and `eval ppl` under app's `eval` group (drt_core.train.evaluate runs them)."""

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
                   help="needle/question phrasings: train (the paper's protocol, default) or heldout (unseen)")
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


def cmd_train(args: argparse.Namespace) -> int:
    from . import loop

    return loop.run(args)


def cmd_data(args: argparse.Namespace) -> int:
    from . import data

    return data.run(args)


def cmd_niah(args: argparse.Namespace) -> int:
    from . import evaluate

    return evaluate.cmd_niah(args)


def cmd_ppl(args: argparse.Namespace) -> int:
    from . import evaluate

    return evaluate.cmd_ppl(args)
