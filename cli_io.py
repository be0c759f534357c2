"""What every command shares, for people: the error meant for them and the way results are printed.

A small module below every package (it imports none of ours), so that every package can raise
`UserError` and print with `emit` without importing `app` (the command line that imports them all).

`UserError` is the one root of the errors meant for people: each package's own errors subclass it
(`drt_core.errors.DRTError`, `store.errors.StoreError`, `ingest.errors.IngestError`,
`qa.errors.QAError`), and app.py catches it once.
"""

from __future__ import annotations

import argparse
import json


class UserError(Exception):
    """An error caused by the user's input or setup, said to them: printed by the command line as
    one line, without a traceback, exit status 2 (gr.Error in the UI). Its message is one line
    whatever it was given (MuPDF messages and file names may carry newlines)."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


def json_flag(p: argparse.ArgumentParser) -> None:
    """A command's `--json` option: print one JSON object (what `emit` reads)."""
    p.add_argument("--json", action="store_true", help="print one JSON object")


def emit(args: argparse.Namespace, obj: dict, text: str | None = None) -> None:
    """Print a command's result: one JSON object with --json, else readable text."""
    if getattr(args, "json", False):
        print(json.dumps(obj, ensure_ascii=False, default=str))
    else:
        print(text if text is not None else json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def table_head(cols: list[str]) -> list[str]:
    """The header and rule of a Markdown table (the evaluations' reports)."""
    return ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
