"""What every command shares, for people: the error meant for them and the way results are printed.

A small module below every package, so that drt_core, ingest and ui can raise `UserError` and
print with `emit` without importing `app` (the command line that imports them all).
"""

from __future__ import annotations

import argparse
import json


class UserError(Exception):
    """An error caused by the user's input: printed as one line, exit status 2."""


def emit(args: argparse.Namespace, obj: dict, text: str | None = None) -> None:
    """Print a command's result: one JSON object with --json, else readable text."""
    if getattr(args, "json", False):
        print(json.dumps(obj, ensure_ascii=False, default=str))
    else:
        print(text if text is not None else json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def table_head(cols: list[str]) -> list[str]:
    """The header and rule of a Markdown table (the evaluations' reports)."""
    return ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
