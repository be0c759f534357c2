"""The question-answering commands: ask, summarize, outline, trace, export (the document commands
ingest, list, page and rm are ingest/cli.py's; both open the library and the engine through
ingest/session.py)."""

from __future__ import annotations

import argparse
import os

from cli_io import emit, json_flag
from ingest.parts import page_labels, pages_ref
from ingest.session import DOC_HELP, load_engine, open_library

from .errors import QAError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask a question about a document (or, with --all, about every document)")
    p.add_argument("doc_id", metavar="DOC_ID", nargs="?", help=DOC_HELP + " (left out with --all)")
    p.add_argument("question", metavar="QUESTION", nargs="?", help="the question")
    p.add_argument("--all", action="store_true", dest="all_docs",
                   help="ask every prefilled document: each retrieves on its own, answers grouped by document")
    p.add_argument("--before-page", type=int, metavar="N", default=None,
                   help="spoiler-safe: read and retrieve only what ends before page N, the file's page number "
                        "counted from 1 (a printed label may differ; the answer the document truncated there "
                        "would get)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="longest answer in tokens (default 64)")
    p.add_argument(
        "--mask", default=None, metavar="CHUNK[,CHUNK...]",
        help="regenerate with these document chunks barred from retrieval (chunk numbers, as the "
        "evidence lists them) and report the new answer beside the unmasked one",
    )  # fmt: skip
    json_flag(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("summarize", help="summarize a document (extractive by default)")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument(
        "--mode",
        choices=("extractive", "abstractive"),
        default="extractive",
        help="extractive: sentences quoted from each part that tell what happens; abstractive: generated "
        "(default extractive)",
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=128, help="longest abstractive summary (default 128)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pages", metavar="A-B", default=None, help="only pages A to B (physical page numbers)")
    where.add_argument("--chapter", type=int, metavar="N", default=None,
                       help="only part N (chapters or sections; `drt-reader outline DOC` lists them)")
    p.add_argument("--before-page", type=int, metavar="N", default=None,
                   help="the story so far: summarize only what ends before page N, the file's page number "
                        "counted from 1 (nothing from page N on)")
    json_flag(p)
    p.set_defaults(func=cmd_summarize)

    p = sub.add_parser("outline", help="the document's parts, statements and what used them, people and places")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("--chunk", type=int, metavar="N", default=None,
                   help="instead: what chunk N relied on (the chunks it retrieved while it was read)")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw it: who appears where (books) or the statements and what each relies on "
                        "(papers)")
    json_flag(p)
    p.set_defaults(func=cmd_outline)

    p = sub.add_parser("trace", help="the document's dependency map (what each chunk retrieved)")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    json_flag(p)
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("export", help="the questions, answers and latest summary of a document, as Markdown")
    p.add_argument("doc_id", metavar="DOC_ID", help=DOC_HELP)
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write the Markdown to FILE (atomically) and print its path (default: print it)")
    json_flag(p)
    p.set_defaults(func=cmd_export)


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
    from ingest.boilerplate import matter_label

    label = matter_label(e)
    return f", {label}" if label else ""


def _evidence_text(evidence: list[dict], labels: dict[int, str] | None = None) -> str:
    from .evidence import snippet as text_snippet, weight_text

    lines = []
    for e in evidence:
        snippet = text_snippet(e["text"], 160)
        lines.append(f"  [chunk {e['chunk']}, {pages_ref(e['pages'], labels)}{_matter(e)}, "
                     f"weight {weight_text(e['weight'])}{_effect(e)}] {snippet}")
    return "\n".join(lines)


def _passage_lines(passages: list[dict], labels: dict[int, str] | None = None) -> list[str]:
    """A shown passage a line: its pages, chunk and the reader's probability, then its text."""
    from .evidence import snippet as text_snippet

    return [f"  [{pages_ref(p['pages'], labels)}, chunk {p['chunk']}, {100 * p['p']:.0f}%] "
            f"{text_snippet(p['text'], 200)}" for p in passages]


def quoted(text: str) -> str:
    """The quote between curly quotation marks, unless the passage itself opens with one (dialogue:
    "“Who is Planchet?” said ..." would otherwise print with a doubled mark)."""
    return text if text.startswith(("\u201c", "\"")) else f"\u201c{text}\u201d"


def answer_text(out: dict, labels: dict[int, str] | None = None) -> str:
    """The text-mode answer: the quote with its pages (printed labels where `labels` has them), or the
    abstention, then the model's short answer when it copied one from the quote."""
    if (out.get("statement") or {}).get("uses") is not None and not out.get("abstained"):
        # what it uses, then the statement
        return f"{out['answer']}\n\n{answer_text(dict(out, statement=None), labels)}"
    q = out.get("quote")
    passages = out.get("passages") or []
    if out.get("abstained"):
        from .ask import not_found

        heading, reason = not_found(out)  # asked before p. N: of the pages read, not the document
        if passages:  # the cross-encoder's closest passages, shown as what they are
            return "\n".join([f"{heading} {reason}",
                              "The closest passages (closest, not an answer):", *_passage_lines(passages, labels)])
        return f"{heading} {reason} The passages the model scored highest are below."
    if q and passages:  # evidence first: the best passage's quote, then the next two passages
        from .ask import quote_origin
        from .evidence import also_relevant

        origin = quote_origin(q)
        lines = [f"{quoted(q['text'])} ({pages_ref(q['pages'], labels)}{_matter(q)}, chunk {q['chunk']}"
                 f"{f'; {origin}' if origin else ''})"]
        if out.get("short_answer"):
            lines.append(f"Short answer: {out['short_answer']}")
        rest = also_relevant(passages, q)
        if rest:
            lines += ["Also relevant:", *_passage_lines(rest, labels)]
        return "\n".join(lines)
    if q:
        if q.get("introduces"):
            after = f"; the passage that introduces {q['introduces']}"
        elif not q.get("retrieved", True):
            after = f"; scored #{q.get('rank')} by the model, after the chunks it retrieved"
        else:
            after = ""
        lines = [f"{quoted(q['text'])} ({pages_ref(q['pages'], labels)}{_matter(q)}, chunk {q['chunk']}{after})"]
        if out.get("short_answer"):
            lines.append(f"Short answer: {out['short_answer']}")
        return "\n".join(lines)
    return out["answer"] or EMPTY_GENERATION


def cmd_ask(args: argparse.Namespace) -> int:
    from .ask import CONTRACT_KEYS, ask, parse_mask

    if args.all_docs:
        return _ask_all(args)
    if args.doc_id is None or args.question is None:
        raise QAError("give a document and a question (DOC_ID QUESTION), or --all QUESTION")
    mask = parse_mask(getattr(args, "mask", None))
    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = load_engine(args)
        out = ask(lib, engine, doc_id, args.question, max_new_tokens=args.max_new_tokens, mask=mask,
                  before_page=args.before_page)
        labels = page_labels(lib, doc_id)
    if not args.json:
        if mask:
            before = out["unmasked"]
            print(f"Without chunk{'s' if len(mask) > 1 else ''} {', '.join(map(str, out['masked']))} (masked):")
            print(answer_text(out, labels))
            print("\nBefore masking:\n" + answer_text(before, labels))
        else:
            print(answer_text(out, labels))
        on = {"generated": "generated text"}.get(out.get("effects_on") or "answer", out.get("effects_on") or "answer")
        print(f"\nEvidence (what the model retrieved; causal effect: how much less likely, in nats, the {on} "
              "above is with that chunk alone hidden from retrieval; + = the chunk supports it):\n"
              + (_evidence_text(out["evidence"], labels) or "  (none)"))
    else:
        emit(args, {k: out[k] for k in CONTRACT_KEYS})
    return 0


def _ask_all(args: argparse.Namespace) -> int:
    """`ask --all QUESTION`: every prefilled document, answers grouped by document."""
    from .ask import CONTRACT_KEYS, ask_all

    question = args.question if args.question is not None else args.doc_id
    if args.question is not None and args.doc_id is not None:
        raise QAError("--all asks every document: give the question only")
    if not question:
        raise QAError("give the question: drt-reader ask --all QUESTION")
    if args.mask:
        raise QAError("--mask names chunks of one document: it does not go with --all")
    with open_library(args) as lib:
        out = ask_all(lib, load_engine(args), question, max_new_tokens=args.max_new_tokens,
                      before_page=args.before_page)
        labels = {d["doc_id"]: page_labels(lib, d["doc_id"]) for d in out["documents"]}
    if args.json:
        emit(args, {"question": out["question"], "documents": [
            {"doc_id": d["doc_id"], "title": d["title"], **{k: d[k] for k in CONTRACT_KEYS}}
            for d in out["documents"]]})
        return 0
    blocks = []
    for d in out["documents"]:
        ev = _evidence_text(d["evidence"][:3], labels[d["doc_id"]]) or "  (none)"
        blocks.append(f"== {d['title']} ({d['doc_id'][:12]})\n{answer_text(d, labels[d['doc_id']])}\n{ev}")
    print("\n\n".join(blocks))
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from .summary import parse_pages, summarize

    pages = parse_pages(args.pages) if args.pages else None
    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = load_engine(args)
        out = summarize(lib, engine, doc_id, mode=args.mode, max_new_tokens=args.max_new_tokens,
                        chapter=args.chapter, pages=pages, before_page=args.before_page)
    text = (out["summary"] or EMPTY_GENERATION) + "\n\nEvidence:\n" + (_evidence_text(out["evidence"]) or "  (none)")
    if out["trace"].get("notice"):
        text = out["trace"]["notice"] + "\n\n" + text
    emit(args, out, text)
    return 0


def cmd_outline(args: argparse.Namespace) -> int:
    from .evidence import weight_text
    from .outline import build, document_statements, outline_text, relied_on
    from .summary import dependency_map

    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = load_engine(args)
        dep = dependency_map(lib, engine, doc_id)
        title = lib.document(doc_id)["title"]
        if args.chunk is not None:
            n = lib.document(doc_id)["n_chunks"]
            if not 0 <= args.chunk < n:
                raise QAError(f"chunk {args.chunk} is not in this document (0 to {n - 1})")
            rows = relied_on(document_statements(lib, doc_id), dep, args.chunk)
            by_idx = {r["idx"]: r for r in lib.chunks(doc_id, [args.chunk, *(r["chunk"] for r in rows)])}
            here = by_idx[args.chunk]
            lines = [f"chunk {args.chunk} ({pages_ref(list(range(here['page_first'], here['page_last'] + 1)))}) "
                     f"relied on {len(rows)} chunk(s):"]
            for r in rows:
                c = by_idx[r["chunk"]]
                snippet = " ".join(c["text"].split())[:120]
                what = f", {r['statement']}" if r["statement"] else ""
                lines.append(f"  [chunk {r['chunk']}, p. {c['page_first']}{what}, weight {weight_text(r['weight'])}] "
                             f"{snippet}")
            emit(args, {"doc_id": doc_id, "chunk": args.chunk, "relied_on": rows}, "\n".join(lines))
            return 0
        out = build(lib, doc_id, dep)
        text = outline_text(out, title)
        if args.plot:
            from .pictures import picture, png

            svg = picture(out)
            if not svg:
                raise QAError("nothing to draw: this document has neither statements nor people")
            text += f"\n\nPicture: {png(svg, args.plot)}"
            out = dict(out, plot=str(args.plot))
    emit(args, out, text)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_markdown, write_atomic

    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        md = export_markdown(lib, doc_id)
        n = len(lib.conversation(doc_id))
    out = None
    if args.out:
        path = os.path.abspath(os.path.expanduser(args.out))
        if os.path.isdir(path):
            raise QAError(f"--out {args.out} is a folder; give a file name")
        try:
            out = str(write_atomic(path, md))
        except OSError as e:
            raise QAError(f"cannot write {args.out}: {e.strerror or e}") from e
    obj = {"doc_id": doc_id, "out": out, "questions": n, "markdown": None if out else md}
    emit(args, obj, out if out else md.rstrip("\n"))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .summary import dependency_map

    with open_library(args) as lib:
        doc_id = lib.resolve(args.doc_id)
        engine = load_engine(args)
        dep = dependency_map(lib, engine, doc_id)
    obj = {"doc_id": doc_id, "model_fp": str(engine.fingerprint), "chunks": dep}
    lines = [f"{doc_id[:12]}: {len(dep)} chunks"]
    for row in dep:
        pairs = ", ".join(f"{j} ({w:.2f})" for j, w in zip(row["retrieved"], row["weights"]))
        lines.append(f"  chunk {row['chunk']}: {pairs or '-'}")
    emit(args, obj, "\n".join(lines))
    return 0
