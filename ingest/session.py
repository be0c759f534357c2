"""What a command of ingest's or qa's opens and shows: the library under `--home`
(`open_library`), the engine of `--model` (`load_engine`), the DOC_ID argument's help and the
progress line on stderr (`ProgressPrinter`).

Shared by ingest/cli.py and qa/cli.py (and qa's evaluations), so that qa never imports ingest's
command module. As light as those: the library and the engine are imported when a command opens
them, so registering the commands (`drt-reader --help`) loads neither.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from typing import Iterator

DOC_HELP = "document id (a unique prefix is enough), or its title or file name, or a part of one"


@contextmanager
def open_library(args: argparse.Namespace) -> Iterator:
    """The library in `args.home` (store.library.Library), closed on the way out."""
    from store.library import Library

    lib = Library(args.home)
    try:
        yield lib
    finally:
        lib.close()


def load_engine(args: argparse.Namespace):
    """The engine of `args.model` (ingest.pipeline.load_engine: cached per process; EngineUnavailable
    when it cannot be loaded)."""
    from .pipeline import load_engine as load

    return load(args.model)


class ProgressPrinter:
    """One updating line on stderr (only when stderr is a terminal, or with -v)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.last = 0.0
        self.stage = ""
        self.message = ""
        self.open = False

    def __call__(self, p) -> None:
        if not self.enabled:
            return
        t = time.monotonic()
        news = (p.stage, p.message) != (self.stage, self.message)
        if not news and t - self.last < 0.5 and p.done < p.total:
            return
        self.last, self.stage, self.message = t, p.stage, p.message
        pct = f"{100 * p.done / p.total:5.1f}%" if p.total else ""
        extra = ""
        if p.tokens_per_s:
            extra += f" {p.tokens_per_s:,.0f} tok/s"
        if p.eta_s is not None:
            extra += f" ETA {p.eta_s:,.0f} s"
        print(f"\r[{p.stage:8s}] {pct} {p.message}{extra}\033[K", end="", file=sys.stderr, flush=True)
        self.open = p.stage != "done"
        if not self.open:
            print(file=sys.stderr)

    def close(self) -> None:
        """Clear an unfinished progress line, so an error message starts on a clean line."""
        if self.enabled and self.open:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self.open = False
