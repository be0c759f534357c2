"""Commands `ingest`, `list`, `page`, `rm` (docs/design.md Contract 2; the reading commands are
qa/cli.py's).

Each takes `--json` to print one JSON object. DOC_ID may be any unique prefix of the document's
sha256. `args.home` and `args.model` come from app.py's global options; the library and the engine
are opened by ingest/session.py, which qa's commands share. Heavy imports (the engine, torch)
happen inside the handlers, so `drt-reader --help` stays fast.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from cli_io import emit, json_flag

from .errors import IngestError
from .session import DOC_HELP, ProgressPrinter, open_library


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="add a document (PDF, EPUB, text, Markdown, TeX) and prefill it")
    p.add_argument("path", help="the file; its content decides the type")
    p.add_argument("--title", default=None, help="title to show (default: from the file)")
    p.add_argument(
        "--password", default=None, help="password of an encrypted PDF (or env DRT_PDF_PASSWORD)"
    )
    json_flag(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("list", help="the documents in the library")
    json_flag(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("page", help="a page of a document as a PNG, with a passage (chunk) highlighted")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("page", type=int, metavar="PAGE", help="physical page number (1 is the first page)")
    p.add_argument("--highlight", type=int, metavar="CHUNK", default=None,
                   help="highlight this chunk's text on the page (chunk numbers, as the evidence lists them)")
    p.add_argument("--out", required=True, metavar="FILE.png", help="where to write the PNG")
    json_flag(p)
    p.set_defaults(func=cmd_page)

    p = sub.add_parser("rm", help="remove a document and its prefilled states")
    p.add_argument("doc_id", metavar="DOC_ID",
                   help="document id (a unique prefix is enough), or its whole title or file name")
    json_flag(p)
    p.set_defaults(func=cmd_rm)


# ---------------------------------------------------------------------------------------------
# ingest
# ---------------------------------------------------------------------------------------------


@contextmanager
def _cancel_on_sigint(cancel: threading.Event) -> Iterator[None]:
    """First Ctrl-C: stop prefill at the next batch (kept, resumable). Second: abort at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        print("\ndrt-reader: stopping after the current batch (Ctrl-C again to abort)", file=sys.stderr)

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def cmd_ingest(args: argparse.Namespace) -> int:
    from . import pipeline

    cancel = threading.Event()
    printer = ProgressPrinter(sys.stderr.isatty() or bool(getattr(args, "verbose", False)))
    password = args.password or os.environ.get("DRT_PDF_PASSWORD") or None
    with open_library(args) as lib, _cancel_on_sigint(cancel):
        try:
            res = pipeline.ingest(
                args.path,
                library=lib,
                engine=lambda: pipeline.load_engine(args.model),
                title=args.title,
                password=password,
                progress=printer,
                cancel=cancel,
            )
        finally:
            printer.close()
    for w in res.warnings:
        print(f"drt-reader: warning: {w}", file=sys.stderr)
    if res.status != "done":
        print(
            f"drt-reader: prefill stopped at {res.tokens_prefilled:,} of {res.tokens:,} tokens; "
            "run the same command again to resume",
            file=sys.stderr,
        )
    obj = res.to_json()
    text = (
        f"{res.doc_id[:12]}  {res.title}\n"
        f"  {res.pages} pages, {res.tokens:,} tokens, {res.chunks:,} chunks, {res.seconds:.1f} s"
        f"{'' if res.created else ' (already in the library)'}"
    )
    emit(args, obj, text)
    return 0 if res.status == "done" else 130


# ---------------------------------------------------------------------------------------------
# list / rm
# ---------------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    with open_library(args) as lib:
        docs = lib.documents()
    out = []
    for d in docs:
        out.append(
            {
                "doc_id": d["id"],
                "title": d["title"],
                "tokens": d["n_tokens"],
                "pages": d["n_pages"],
                "chunks": d["n_chunks"],
                "kind": d["kind"],
                "source_name": d["source_name"],
                "bytes": d["n_bytes"],
                "created_at": d["created_at"],
                "warnings": d["warnings"],
                "prefill": [
                    {
                        "model_fp": s["model_fp"],
                        "status": s["status"],
                        "tokens_done": s["n_tokens_done"],
                        "tokens_total": s["n_tokens_total"],
                    }
                    for s in d["prefill"]
                ],
            }
        )
    lines = []
    for d in out:
        st = ", ".join(f"{s['status']} {s['tokens_done']:,}/{s['tokens_total']:,}" for s in d["prefill"])
        st = st or "not prefilled"
        title = d["title"][:50]
        lines.append(f"{d['doc_id'][:12]}  {title:50s}  {d['pages']:5d} pp  {d['tokens']:9,d} tok  {st}")
    emit(args, {"documents": out}, "\n".join(lines) if lines else "the library is empty")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    from .pipeline import remove_document

    with open_library(args) as lib:
        doc_id, title = remove_document(lib, args.doc_id)
    emit(args, {"doc_id": doc_id, "removed": True}, f"removed {doc_id[:12]}  {title}")
    return 0


def cmd_page(args: argparse.Namespace) -> int:
    from .page import png_size, render_page

    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        png = render_page(lib, doc_id, args.page, highlight=args.highlight)
    try:
        with open(args.out, "wb") as f:
            f.write(png)
    except OSError as e:
        raise IngestError(f"cannot write {args.out}: {e.strerror or e}") from e
    width, height = png_size(png)
    obj = {"doc_id": doc_id, "page": args.page, "highlight": args.highlight, "out": args.out,
           "width": width, "height": height}
    emit(args, obj, args.out)
    return 0
