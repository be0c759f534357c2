"""drt-reader: the command line (docs/design.md, Contract 2).

Global options come before the command: `drt-reader [--home DIR] [--model NAME_OR_PATH] COMMAND ...`.
Every command takes `--json` after its name and prints one JSON object; bad input exits non-zero
with a one-line error. Each package registers its own commands (a `register(subparsers)` function);
this file only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path

from cli_io import UserError

ROOT = Path(__file__).resolve().parent
DEFAULT_MODEL = str(ROOT / "checkpoints" / "drt-tiny")

# The module that registers each group of commands (`register(subparsers)`), imported by name when
# the parser is built: by every command, `--help` included. So each imports only argparse-level
# things (the standard library, cli_io, its package's errors and text helpers), and its handlers
# import what the command runs when it runs (torch, transformers and the engine, gradio, the
# library). drt_core/__init__ is lazy (PEP 562) for the same reason. tests/test_cli_startup.py
# checks that `--help` and `list` load no torch, transformers or gradio; timings: docs/cli.md.
COMMAND_MODULES = [
    "ingest.cli",  # ingest, list, page, rm
    "qa.cli",  # ask, summarize, outline, trace, export
    "drt_core.train.cli",  # train, data (corpora -> token files)
    "bench.cli",  # bench gca | prefill | train | ingest | ...
    "ui.cli",  # serve
]
# modules that add subcommands to `eval` (register_eval(esub)), as light as the ones above
EVAL_MODULES = [
    "drt_core.evals.cli",  # eval niah | ppl
    "qa.eval_qa",  # eval qa
    "qa.eval_summary",  # eval summary
]


def default_home() -> str:
    return os.environ.get("DRT_HOME") or str(Path.home() / ".drt-reader")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="drt-reader", description=__doc__.splitlines()[0])
    p.add_argument("--home", default=None, help="data directory (env DRT_HOME; default ~/.drt-reader)")
    p.add_argument("--model", default=None, help=f"checkpoint name or path (default: {DEFAULT_MODEL})")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
        if name == "qa.cli":  # `eval` listed where it was, after the reading commands
            ev = sub.add_parser("eval", help="evaluate checkpoints: NIAH accuracy, perplexity, QA, summaries")
            esub = ev.add_subparsers(dest="eval_command", metavar="EVAL", required=True)
            for e in EVAL_MODULES:
                importlib.import_module(e).register_eval(esub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    args.home = args.home or default_home()
    args.model = args.model or DEFAULT_MODEL
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="[drt] %(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        rc = args.func(args)
    except UserError as e:  # every package's errors meant for people (cli_io): one line, no traceback
        print(f"drt-reader: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("drt-reader: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `drt-reader ... | head`: the reader has seen enough; no traceback
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 141
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
