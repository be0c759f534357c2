"""The command line of drt_core.train: `train` and `data` (docs/cli.md).

The parsers only: this module imports argparse, `flags` and `options` (standard library), and each
handler imports the module that does the work (loop, data: numpy, torch, the model) when the
command runs, so that `drt-reader --help` and the commands that do not train stay fast.
"""

from __future__ import annotations

import argparse

from .flags import add_args
from .options import SPLIT_SEED


def register(sub: argparse._SubParsersAction) -> None:
    """`train` and `data`."""
    p = sub.add_parser("train", help="train DRT or a baseline "
                                     "(resumes from OUT/state.pt, or OUT/state.dcp with --fsdp)")
    add_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("data", help="tokenize the corpora into flat uint16 token files (and train the "
                                    "tokenizer)")
    p.add_argument("--corpora", required=True, help="corpora directory (books/, shakespeare/, milton/, "
                                                    "stacks/)")
    p.add_argument("--out", required=True, help="output directory for splits.json and the .bin files")
    p.add_argument("--train-tokenizer", action="store_true", help="train the BPE on the training split first")
    p.add_argument("--vocab-size", type=int, default=8192, help="vocabulary size when training (default "
                                                                "8192)")
    p.add_argument("--tokenizer-out", default=None, help="where to write the trained tokenizer (default: "
                                                         "--model)")
    p.add_argument("--measure-sizes", default="4096,8192,16384", help="vocab sizes to measure bytes/token "
                                                                      "for")
    p.add_argument("--seed", type=int, default=SPLIT_SEED, help="seed of the document split")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_data)


def cmd_train(args: argparse.Namespace) -> int:
    from . import loop

    return loop.run(args)


def cmd_data(args: argparse.Namespace) -> int:
    from . import data

    return data.run(args)
