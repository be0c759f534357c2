"""Commands `ingest`, `list`, `ask`, `summarize`, `trace`, `export`, `page`, `rm` (docs/design.md Contract 2).

Each takes `--json` to print one JSON object. DOC_ID may be any unique prefix of the document's
sha256. `args.home` and `args.model` come from app.py's global options. Heavy imports (the engine,
torch) happen inside the handlers, so `drt-reader --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .errors import IngestError
from .parts import pages_ref


DOC_HELP = "document id (a unique prefix is enough), or its title or file name, or a part of one"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="add a document (PDF, EPUB, text, Markdown, TeX) and prefill it")
    p.add_argument("path", help="the file; its content decides the type")
    p.add_argument("--title", default=None, help="title to show (default: from the file)")
    p.add_argument(
        "--password", default=None, help="password of an encrypted PDF (or env DRT_PDF_PASSWORD)"
    )
    _json(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("list", help="the documents in the library")
    _json(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("ask", help="ask a question about a document (or, with --all, about every document)")
    p.add_argument("doc_id", metavar="DOC_ID", nargs="?", help=DOC_HELP + " (left out with --all)")
    p.add_argument("question", metavar="QUESTION", nargs="?", help="the question")
    p.add_argument("--all", action="store_true", dest="all_docs",
                   help="ask every prefilled document: each retrieves on its own, answers grouped by document")
    p.add_argument("--before-page", type=int, metavar="N", default=None,
                   help="spoiler-safe: read and retrieve only what ends before page N (the answer the "
                        "document truncated there would get)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="longest answer in tokens (default 64)")
    p.add_argument(
        "--mask", default=None, metavar="CHUNK[,CHUNK...]",
        help="regenerate with these document chunks barred from retrieval (chunk numbers, as the "
        "evidence lists them) and report the new answer beside the unmasked one",
    )  # fmt: skip
    _json(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("summarize", help="summarize a document (extractive by default)")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument(
        "--mode",
        choices=("extractive", "abstractive"),
        default="extractive",
        help="extractive: the passages the document retrieves most; abstractive: generated "
        "(default extractive)",
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=128, help="longest abstractive summary (default 128)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pages", metavar="A-B", default=None, help="only pages A to B (physical page numbers)")
    where.add_argument("--chapter", type=int, metavar="N", default=None,
                       help="only part N (chapters or sections; `drt-reader outline DOC` lists them)")
    _json(p)
    p.set_defaults(func=cmd_summarize)

    p = sub.add_parser("outline", help="the document's parts, statements and what used them, people and places")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("--chunk", type=int, metavar="N", default=None,
                   help="instead: what chunk N relied on (the chunks it retrieved while it was read)")
    _json(p)
    p.set_defaults(func=cmd_outline)

    p = sub.add_parser("trace", help="the document's dependency map (what each chunk retrieved)")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    _json(p)
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("export", help="the questions, answers and latest summary of a document, as Markdown")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write the Markdown to FILE (atomically) and print its path (default: print it)")
    _json(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("page", help="a page of a document as a PNG, with a passage (chunk) highlighted")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("page", type=int, metavar="PAGE", help="physical page number (1 is the first page)")
    p.add_argument("--highlight", type=int, metavar="CHUNK", default=None,
                   help="highlight this chunk's text on the page (chunk numbers, as the evidence lists them)")
    p.add_argument("--out", required=True, metavar="FILE.png", help="where to write the PNG")
    _json(p)
    p.set_defaults(func=cmd_page)

    p = sub.add_parser("rm", help="remove a document and its prefilled states")
    p.add_argument("doc_id", metavar="DOC_ID",
                   help="document id (a unique prefix is enough), or its whole title or file name")
    _json(p)
    p.set_defaults(func=cmd_rm)


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _emit(args: argparse.Namespace, obj: dict, text: str | None = None) -> None:
    if getattr(args, "json", False):
        print(json.dumps(obj, ensure_ascii=False, default=str))
    else:
        print(text if text is not None else json.dumps(obj, indent=2, ensure_ascii=False, default=str))


@contextmanager
def _library(args: argparse.Namespace) -> Iterator:
    from store.library import Library

    lib = Library(args.home)
    try:
        yield lib
    finally:
        lib.close()


def _engine(args: argparse.Namespace):
    from . import pipeline

    return pipeline.load_engine(args.model)


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


class _ProgressPrinter:
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


def cmd_ingest(args: argparse.Namespace) -> int:
    from . import pipeline

    cancel = threading.Event()
    printer = _ProgressPrinter(sys.stderr.isatty() or bool(getattr(args, "verbose", False)))
    password = args.password or os.environ.get("DRT_PDF_PASSWORD") or None
    with _library(args) as lib, _cancel_on_sigint(cancel):
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
    _emit(args, obj, text)
    return 0 if res.status == "done" else 130


# ---------------------------------------------------------------------------------------------
# list / rm
# ---------------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    with _library(args) as lib:
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
    _emit(args, {"documents": out}, "\n".join(lines) if lines else "the library is empty")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    from .pipeline import remove_document

    with _library(args) as lib:
        doc_id, title = remove_document(lib, args.doc_id)
    _emit(args, {"doc_id": doc_id, "removed": True}, f"removed {doc_id[:12]}  {title}")
    return 0


def cmd_page(args: argparse.Namespace) -> int:
    from .page import png_size, render_page

    with _library(args) as lib:
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
    _emit(args, obj, args.out)
    return 0


# ---------------------------------------------------------------------------------------------
# ask / summarize / trace
# ---------------------------------------------------------------------------------------------


# text mode only (--json keeps the empty string): a blank line alone reads like a hang or a crash
EMPTY_GENERATION = "(no text: the model ended its answer at once; the evidence below is what it retrieved)"


def _effect(e: dict) -> str:
    """", causal effect +1.234" (nats) when the row has one (ask), else ""."""
    if "causal_effect" not in e:
        return ""
    v = e["causal_effect"]
    return ", causal effect n/a" if v is None else f", causal effect {v:+.3f}"


def _matter(e: dict) -> str:
    """", licence page" (contents page, index page) for a passage on such a page, else ""."""
    from .boilerplate import matter_label

    label = matter_label(e)
    return f", {label}" if label else ""


def _evidence_text(evidence: list[dict]) -> str:
    from .ask import snippet as text_snippet

    lines = []
    for e in evidence:
        snippet = text_snippet(e["text"], 160)
        lines.append(f"  [chunk {e['chunk']}, {pages_ref(e['pages'])}{_matter(e)}, weight {e['weight']:.3f}{_effect(e)}] "
                     f"{snippet}")
    return "\n".join(lines)


def quoted(text: str) -> str:
    """The quote between curly quotation marks, unless the passage itself opens with one (dialogue:
    "“Who is Planchet?” said ..." would otherwise print with a doubled mark)."""
    return text if text.startswith(("\u201c", "\"")) else f"\u201c{text}\u201d"


def answer_text(out: dict) -> str:
    """The text-mode answer: the quote with its pages, or the abstention, then the model's short
    answer when it copied one from the quote."""
    q = out.get("quote")
    if out.get("abstained"):
        from .ask import abstain_reason

        return f"{out['answer']} {abstain_reason(out)} The passages the model scored highest are below."
    if q:
        if q.get("introduces"):
            after = f"; the passage that introduces {q['introduces']}"
        elif not q.get("retrieved", True):
            after = f"; scored #{q.get('rank')} by the model, after the chunks it retrieved"
        else:
            after = ""
        lines = [f"{quoted(q['text'])} ({pages_ref(q['pages'])}{_matter(q)}, chunk {q['chunk']}{after})"]
        if out.get("short_answer"):
            lines.append(f"Short answer: {out['short_answer']}")
        return "\n".join(lines)
    return out["answer"] or EMPTY_GENERATION


def cmd_ask(args: argparse.Namespace) -> int:
    from .ask import CONTRACT_KEYS, ask, parse_mask

    if args.all_docs:
        return _ask_all(args)
    if args.doc_id is None or args.question is None:
        raise IngestError("give a document and a question (DOC_ID QUESTION), or --all QUESTION")
    mask = parse_mask(getattr(args, "mask", None))
    with _library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = _engine(args)
        out = ask(lib, engine, doc_id, args.question, max_new_tokens=args.max_new_tokens, mask=mask,
                  before_page=args.before_page)
    if not args.json:
        if mask:
            before = out["unmasked"]
            print(f"Without chunk{'s' if len(mask) > 1 else ''} {', '.join(map(str, out['masked']))} (masked):")
            print(answer_text(out))
            print("\nBefore masking:\n" + answer_text(before))
        else:
            print(answer_text(out))
        on = out.get("effects_on") or "answer"
        print(f"\nEvidence (what the model retrieved; causal effect: how much less likely, in nats, the {on} "
              "above is with that chunk alone hidden from retrieval; + = the chunk supports it):\n"
              + (_evidence_text(out["evidence"]) or "  (none)"))
    else:
        _emit(args, {k: out[k] for k in CONTRACT_KEYS})
    return 0


def _ask_all(args: argparse.Namespace) -> int:
    """`ask --all QUESTION`: every prefilled document, answers grouped by document."""
    from .ask import CONTRACT_KEYS, ask_all

    question = args.question if args.question is not None else args.doc_id
    if args.question is not None and args.doc_id is not None:
        raise IngestError("--all asks every document: give the question only")
    if not question:
        raise IngestError("give the question: drt-reader ask --all QUESTION")
    if args.mask:
        raise IngestError("--mask names chunks of one document: it does not go with --all")
    with _library(args) as lib:
        out = ask_all(lib, _engine(args), question, max_new_tokens=args.max_new_tokens,
                      before_page=args.before_page)
    if args.json:
        _emit(args, {"question": out["question"], "documents": [
            {"doc_id": d["doc_id"], "title": d["title"], **{k: d[k] for k in CONTRACT_KEYS}} for d in out["documents"]]})
        return 0
    blocks = []
    for d in out["documents"]:
        ev = _evidence_text(d["evidence"][:3]) or "  (none)"
        blocks.append(f"== {d['title']} ({d['doc_id'][:12]})\n{answer_text(d)}\n{ev}")
    print("\n\n".join(blocks))
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from .summary import parse_pages, summarize

    pages = parse_pages(args.pages) if args.pages else None
    with _library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = _engine(args)
        out = summarize(lib, engine, doc_id, mode=args.mode, max_new_tokens=args.max_new_tokens,
                        chapter=args.chapter, pages=pages)
    text = (out["summary"] or EMPTY_GENERATION) + "\n\nEvidence:\n" + (_evidence_text(out["evidence"]) or "  (none)")
    if out["trace"].get("notice"):
        text = out["trace"]["notice"] + "\n\n" + text
    _emit(args, out, text)
    return 0


def cmd_outline(args: argparse.Namespace) -> int:
    from .outline import build, document_statements, outline_text, relied_on
    from .summary import dependency_map

    with _library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = _engine(args)
        dep = dependency_map(lib, engine, doc_id)
        title = lib.document(doc_id)["title"]
        if args.chunk is not None:
            n = lib.document(doc_id)["n_chunks"]
            if not 0 <= args.chunk < n:
                raise IngestError(f"chunk {args.chunk} is not in this document (0 to {n - 1})")
            rows = relied_on(document_statements(lib, doc_id), dep, args.chunk)
            by_idx = {r["idx"]: r for r in lib.chunks(doc_id, [args.chunk, *(r["chunk"] for r in rows)])}
            lines = [f"chunk {args.chunk} ({pages_ref(list(range(by_idx[args.chunk]['page_first'], by_idx[args.chunk]['page_last'] + 1)))}) "
                     f"relied on {len(rows)} chunk(s):"]
            for r in rows:
                c = by_idx[r["chunk"]]
                snippet = " ".join(c["text"].split())[:120]
                what = f", {r['statement']}" if r["statement"] else ""
                lines.append(f"  [chunk {r['chunk']}, p. {c['page_first']}{what}, weight {r['weight']:.3f}] {snippet}")
            _emit(args, {"doc_id": doc_id, "chunk": args.chunk, "relied_on": rows}, "\n".join(lines))
            return 0
        out = build(lib, doc_id, dep)
    _emit(args, out, outline_text(out, title))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_markdown, write_atomic

    with _library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        md = export_markdown(lib, doc_id)
        n = len(lib.conversation(doc_id))
    out = None
    if args.out:
        path = os.path.abspath(os.path.expanduser(args.out))
        if os.path.isdir(path):
            raise IngestError(f"--out {args.out} is a folder; give a file name")
        try:
            out = str(write_atomic(path, md))
        except OSError as e:
            raise IngestError(f"cannot write {args.out}: {e.strerror or e}") from e
    obj = {"doc_id": doc_id, "out": out, "questions": n, "markdown": None if out else md}
    _emit(args, obj, out if out else md.rstrip("\n"))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .summary import dependency_map

    with _library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = _engine(args)
        dep = dependency_map(lib, engine, doc_id)
    obj = {"doc_id": doc_id, "model_fp": str(engine.fingerprint), "chunks": dep}
    lines = [f"{doc_id[:12]}: {len(dep)} chunks"]
    for row in dep:
        pairs = ", ".join(f"{j} ({w:.2f})" for j, w in zip(row["retrieved"], row["weights"]))
        lines.append(f"  chunk {row['chunk']}: {pairs or '-'}")
    _emit(args, obj, "\n".join(lines))
    return 0
