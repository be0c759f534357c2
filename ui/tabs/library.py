"""The Library tab: upload a document with staged progress, Cancel, Resume, Delete, the list.

Handlers first (plain functions, testable without a browser: `tests/ui/test_handlers.py`), then
the tab's layout (`layout`), its events (`wire`; /ingest is the Add event's endpoint) and its
API-only endpoints (`api`: /documents, /passage). Uploads go through `ingest.pipeline`, the same
code as `drt-reader ingest`.
"""

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generator, Iterator

import gradio as gr

from ingest import pipeline
from ingest.errors import Cancelled, PasswordRequired, TooLarge, WrongPassword

from ..context import (
    ALL_DOCS,
    MODEL,
    PRIVATE,
    Job,
    UIContext,
    UIError,
    error_text,
    human_size,
    in_place,
    session_of,
    to_gr_error,
    user_facing,
)
from ..jobs import StageBoard, cancel_job, run_threaded
from ..render import md_escape, pages_text, quote

logger = logging.getLogger(__name__)

# what the upload widget offers; the pipeline decides by the content, never by the name
ACCEPTED_SUFFIXES = [".pdf", ".epub", ".txt", ".text", ".md", ".markdown", ".tex", ".ltx"]


def _state_of(doc: dict, fp: str | None) -> tuple[str, int, int]:
    """(state, tokens done, tokens total) of a document for the model fingerprint fp."""
    rows = doc.get("prefill") or []
    row = next((r for r in rows if r["model_fp"] == fp), None) if fp else (rows[-1] if rows else None)
    if row is None:
        return "not prefilled", 0, int(doc["n_tokens"])
    status = "ready" if row["status"] == "done" else ("partial" if row["n_tokens_done"] else "pending")
    return status, int(row["n_tokens_done"]), int(row["n_tokens_total"])


def list_documents(ctx: UIContext) -> list[dict]:
    """Every document: doc_id, title, pages, tokens, chunks, kind, state (for this model)."""
    fp = ctx.fingerprint()
    out = []
    for d in ctx.library.documents():
        state, done, total = _state_of(d, fp)
        if state != "ready" and d["id"] in ctx.prefilling:
            state = "prefilling"
        out.append(
            {
                "doc_id": d["id"],
                "title": d["title"],
                "pages": int(d["n_pages"]),
                "tokens": int(d["n_tokens"]),
                "chunks": int(d["n_chunks"]),
                "kind": d["kind"],
                "source_name": d["source_name"],
                "state": state,
                "tokens_done": done,
                "tokens_total": total,
                "created_at": d["created_at"],
            }
        )
    return out


def _state_text(d: dict) -> str:
    if d["state"] == "ready":
        return "ready"
    if d["state"] == "prefilling":  # its live count is the progress panel's; the table is not refreshed meanwhile
        return f"prefilling now ({d['tokens_total']:,} tokens; its progress is shown above)"
    if d["state"] in ("partial", "pending"):
        pct = 100 * d["tokens_done"] / d["tokens_total"] if d["tokens_total"] else 0
        return f"partial: {d['tokens_done']:,} / {d['tokens_total']:,} tokens ({pct:.0f}%), resumable"
    return "not prefilled"


DOC_HEADERS = ["Title", "Pages", "Tokens", "Chunks", "State", "ID"]


EMPTY_LIBRARY = ("**The library is empty.** Drop a PDF, EPUB, TXT, Markdown or TeX file on the box above: "
                 "it is read once (parsed, tokenized, prefilled) and then reopens instantly.")


def library_note(docs: list[dict]) -> str:
    """The line under the documents table: what to do when it is empty, else what is in it."""
    if not docs:
        return EMPTY_LIBRARY
    busy = [d for d in docs if d["state"] != "ready"]
    note = f"{len(docs)} document{'s' * (len(docs) != 1)}"
    if busy:
        note += ", " + ", ".join(f"{md_escape(d['title'])}: {_state_text(d)}" for d in busy[:3])
    return note + "."


def newest_ready(docs: list[dict]) -> str | None:
    """The most recently added ready document (the default choice in the Ask, Summary, Outline and
    Map tabs), or None."""
    ready = [d for d in docs if d["state"] == "ready"]
    return max(ready, key=lambda d: d["created_at"])["doc_id"] if ready else None


def resumable(ctx: UIContext, doc_id: str | None) -> bool:
    """Whether the document's prefill has something to resume for this model: stopped part way, or
    not begun (a ready document has nothing to resume, one being prefilled now is under way)."""
    d = next((d for d in list_documents(ctx) if d["doc_id"] == doc_id), None) if doc_id else None
    return d is not None and d["state"] in ("partial", "pending", "not prefilled")


def documents_table(ctx: UIContext, docs: list[dict] | None = None) -> list[list]:
    docs = list_documents(ctx) if docs is None else docs
    return [[d["title"], d["pages"], d["tokens"], d["chunks"], _state_text(d), d["doc_id"][:12]] for d in docs]


def doc_choices(ctx: UIContext, *, ready_only: bool = False, docs: list[dict] | None = None) -> list[tuple[str, str]]:
    """Dropdown choices (label, doc_id); ready_only: only fully prefilled documents."""
    docs = list_documents(ctx) if docs is None else docs
    out = []
    for d in docs:
        if ready_only and d["state"] != "ready":
            continue
        suffix = "" if d["state"] == "ready" else f" [{d['state']}]"
        out.append((f"{d['title']} — {d['pages']} pp, {d['tokens']:,} tokens{suffix}", d["doc_id"]))
    return out


def check_upload(ctx: UIContext, path: str | Path | None) -> Path:
    """The uploaded file, after the checks the pipeline does not do (presence, size)."""
    if not path:
        raise UIError("choose a file first (PDF, EPUB, TXT, Markdown or TeX)")
    p = Path(path)
    if not p.is_file():
        raise UIError("the uploaded file is gone (uploads are cleaned up after an hour); upload it again")
    size = p.stat().st_size
    if size > ctx.max_file_bytes:
        raise TooLarge(
            f"{p.name} is {human_size(size)}; the limit of this server is {human_size(ctx.max_file_bytes)}"
        )
    return p


def discard_upload(ctx: UIContext, path: str | Path) -> bool:
    """Delete an uploaded file once it is stored, but only inside Gradio's upload cache."""
    try:
        p = Path(path).resolve()
        root = ctx.upload_root.resolve()
        if not p.is_relative_to(root) or p == root:
            return False
        p.unlink(missing_ok=True)
        parent = p.parent
        if parent != root and parent.is_relative_to(root) and not any(parent.iterdir()):
            parent.rmdir()
        return True
    except OSError as e:
        logger.warning("could not remove the upload %s: %s", path, e)
        return False


@dataclass
class IngestUpdate:
    status: str  # Markdown
    finished: bool = False
    doc_id: str | None = None
    result: dict | None = None  # the final result (Contract 2 ingest object + status)


def _board_updates(work: Callable, job: Job, board: StageBoard) -> Generator[IngestUpdate, None, Any]:
    """Run an ingest `work(emit)` in a thread, feeding its stage events to `board` and yielding the
    board as it changes; return the work's result. A user error is shown on the board ("Failed: ...")
    and re-raised; Cancelled is re-raised untouched for the caller to word."""
    result = None
    try:
        for kind, payload in run_threaded(work, job):
            if kind == "events":
                for ev in payload:
                    board.update(ev)
                yield IngestUpdate(board.markdown())
            else:
                result = payload
    except Cancelled:
        raise
    except Exception as e:
        board.fail()
        yield IngestUpdate(board.markdown(f"**Failed:** {md_escape(error_text(e))}"), finished=True)
        raise
    return result


# what _ingest_job returns when Cancel came before the job started
_NOT_STARTED = object()


def _ingest_job(
    ctx: UIContext, session: str, board: StageBoard, starting: str, work: Callable
) -> Generator[IngestUpdate, None, Any]:
    """The job protocol ingest and resume share: register the session's "ingest" job, stop at once
    (board: "Cancelled before it started.", return _NOT_STARTED) if Cancel came first, else show
    `starting` and run `work(emit, cancel)` through _board_updates; the job ends however it stops."""
    job = ctx.begin(session, "ingest")
    try:
        if job.cancel.is_set():
            yield IngestUpdate(board.markdown("Cancelled before it started."), finished=True)
            return _NOT_STARTED
        yield IngestUpdate(board.markdown(starting))
        return (yield from _board_updates(lambda emit: work(emit, job.cancel), job, board))
    finally:
        ctx.end(session, "ingest", job)


def _already_added(ctx: UIContext, doc_id: str, title: str | None, other: str = "") -> IngestUpdate:
    """"Already added", or the document renamed when "Add to library" is pressed with a title other than
    its own: a dropped file is added at once, so a title typed after the drop counted for nothing (walk
    12: the button answered "already in the library"). The same file ingested again with --title does it."""
    doc = ctx.library.document(doc_id)
    new = (title or "").strip()
    if new and new != doc["title"]:
        ctx.library.set_title(doc_id, new)
        return IngestUpdate(f"**Renamed:** {md_escape(doc['title'])} is now **{md_escape(new)}**. Ask about it in "
                            f"the **Ask** tab{other}.", finished=True, doc_id=doc_id)
    return IngestUpdate(f"**Already added:** {md_escape(doc['title'])}. Ask about it in the **Ask** tab{other}.",
                        finished=True, doc_id=doc_id)


def ingest_upload(
    ctx: UIContext,
    path: str | Path | None,
    *,
    title: str | None = None,
    password: str | None = None,
    session: str = "",
) -> Iterator[IngestUpdate]:
    """Ingest an uploaded file (parse, tokenize, store, prefill), yielding staged progress.

    The same file again (same sha256) resumes its prefill. Raises project errors (IngestError,
    StoreError...) after a last update that shows where it stopped."""
    done_id = ctx.ingested.get(str(path)) if path and not Path(path).exists() else None
    if not path and ctx.last_added.get(session) and ctx.library.has_document(ctx.last_added[session]):
        # "Add to library" after the upload was already added (the upload field is empty again): say so,
        # rather than "choose a file first" over the "Ready" it had shown
        yield _already_added(ctx, ctx.last_added[session], title, ", or choose another file to add it")
        return
    if done_id is not None and ctx.library.has_document(done_id):  # the upload event already added (and removed) it
        yield _already_added(ctx, done_id, title)
        return
    p = check_upload(ctx, path)
    board = StageBoard(p.name)

    def work(emit: Callable, cancel: threading.Event) -> pipeline.IngestResult:
        doc_id = None

        def progress(ev: pipeline.Progress) -> None:
            nonlocal doc_id
            if ev.stage == "prefill" and doc_id is None:  # stored: list it as being prefilled
                doc_id = pipeline.sha256_file(p)
                ctx.prefilling.add(doc_id)
            emit(ev)

        try:
            return pipeline.ingest(
                p,
                library=ctx.library,
                engine=ctx.engine,  # a factory: the model loads once the file has parsed
                title=(title or "").strip() or None,
                password=password or None,
                progress=progress,
                cancel=cancel,
            )
        finally:
            ctx.prefilling.discard(doc_id)

    try:
        result = yield from _ingest_job(ctx, session, board, "Starting…", work)
    except Cancelled:
        yield IngestUpdate(
            board.markdown("**Cancelled** before anything was stored; upload the file again to start over."),
            finished=True,
        )
        return
    if result is _NOT_STARTED:
        return
    ctx.ingested[str(path)] = result.doc_id
    ctx.last_added[session] = result.doc_id
    while len(ctx.ingested) > 64:  # only the last uploads can be pressed again
        ctx.ingested.pop(next(iter(ctx.ingested)))
    discard_upload(ctx, p)  # stored: the token ids are in the library, resume does not need the file
    ctx.forget_layout(result.doc_id)
    obj = {**result.to_json(), "status": result.status, "tokens_prefilled": result.tokens_prefilled,
           "warnings": result.warnings}  # fmt: skip
    warn = "".join(f"\n\n⚠ {md_escape(w)}" for w in result.warnings)
    if result.status == "done":
        again = "" if result.created else " (it was already in the library)"
        final = (
            f"**Ready:** {md_escape(result.title)} — {result.pages} pages, {result.tokens:,} tokens, "
            f"{result.chunks:,} chunks, {result.seconds:.1f} s{again}. Ask about it in the **Ask** tab."
        )
    else:
        final = (
            f"**Stopped:** {result.tokens_prefilled:,} of {result.tokens:,} tokens prefilled and kept. "
            "Press **Resume** (or upload the same file again) to continue."
        )
    yield IngestUpdate(board.markdown(final + warn), finished=True, doc_id=result.doc_id, result=obj)


def resume_prefill(ctx: UIContext, doc_id: str | None, *, session: str = "") -> Iterator[IngestUpdate]:
    """Continue the prefill of a stored document from its last checkpoint (no file needed)."""
    if not doc_id:
        raise UIError("pick a document in the list first")
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    doc = lib.document(doc_id)
    board = StageBoard(doc["title"])
    for s in ("hash", "parse", "tokenize", "store"):
        board.state[s] = "skipped"
    board.detail["store"] = "stored earlier"

    def work(emit: Callable, cancel: threading.Event) -> dict:
        ctx.prefilling.add(doc_id)
        try:
            return pipeline.prefill_document(lib, ctx.engine(), doc_id, progress=emit, cancel=cancel)
        finally:
            ctx.prefilling.discard(doc_id)

    row = yield from _ingest_job(ctx, session, board, "Loading the model…", work)
    if row is _NOT_STARTED:
        return
    row = row or {}
    done, total = int(row.get("n_tokens_done", 0)), int(row.get("n_tokens_total", 0))
    if row.get("status") == "done":
        final = f"**Ready:** {md_escape(doc['title'])} — {total:,} tokens prefilled."
    else:
        final = f"**Stopped:** {done:,} of {total:,} tokens prefilled and kept; press **Resume** to continue."
    result = {"doc_id": doc_id, "status": "done" if row.get("status") == "done" else "partial",
              "tokens_prefilled": done, "tokens": total}  # fmt: skip
    yield IngestUpdate(board.markdown(final), finished=True, doc_id=doc_id, result=result)


def delete_document(ctx: UIContext, doc_id: str | None) -> str:
    """Remove a document, its chunks, traces, answers and prefilled states."""
    if not doc_id:
        return "Nothing deleted."
    doc_id, title = pipeline.remove_document(ctx.library, doc_id)
    ctx.forget_layout(doc_id)
    return f"Deleted **{md_escape(title)}** ({doc_id[:12]})."


def passage_md(ctx: UIContext, doc_id: str | None, chunk: int | float | None, heading: str = "Chunk") -> str:
    """One document chunk with its pages, as Markdown."""
    if not doc_id or chunk is None:
        return "Pick a document and a chunk."
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    c = int(chunk)
    rows = lib.chunks(doc_id, [c])
    if not rows:
        n = lib.document(doc_id)["n_chunks"]
        return f"No chunk {c} in this document (it has chunks 0–{n - 1})."
    r = rows[0]
    _, labels = ctx.layout(doc_id)
    return f"**{heading} {c}** · {pages_text(r['page_first'], r['page_last'], labels)}\n\n{quote(r['text'])}"


def passage(ctx: UIContext, doc_id: str, chunk: int) -> dict:
    """API: {"doc_id", "chunk", "pages", "text"} of one chunk."""
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    rows = lib.chunks(doc_id, [int(chunk)])
    if not rows:
        raise UIError(f"no chunk {int(chunk)} in document {doc_id[:12]}")
    r = rows[0]
    return {"doc_id": doc_id, "chunk": int(chunk), "pages": list(range(r["page_first"], r["page_last"] + 1)),
            "text": r["text"]}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the tab
# ---------------------------------------------------------------------------------------------


@dataclass
class LibraryTab:
    """The Library tab's components."""

    upload: gr.File
    title_in: gr.Textbox
    password_in: gr.Textbox
    add_btn: gr.Button
    cancel_btn: gr.Button
    cancel_note: gr.Markdown
    status: gr.Markdown
    docs_table: gr.Dataframe
    lib_note: gr.Markdown
    doc: gr.Dropdown
    resume_btn: gr.Button
    delete_btn: gr.Button
    refresh_btn: gr.Button
    ingest_result: gr.JSON


def layout(ctx: UIContext) -> LibraryTab:
    """Build the tab's components (inside the app's `gr.Tabs`)."""
    with gr.Tab("Library", id="library"):
        with gr.Row():
            with gr.Column(scale=2):
                upload = gr.File(
                    label="Add a document: PDF, EPUB, TXT, Markdown or TeX "
                    f"(up to {human_size(ctx.max_file_bytes)})",
                    file_types=ACCEPTED_SUFFIXES,
                    type="filepath",
                    elem_id="drt-upload",
                )
                with gr.Row():
                    title_in = gr.Textbox(label="Title (optional)", scale=2)
                    password_in = gr.Textbox(label="PDF password (if encrypted)", type="password", scale=1)
                with gr.Row():
                    add_btn = gr.Button("Add to library", variant="primary", elem_id="drt-add")
                    cancel_btn = gr.Button("Cancel", variant="stop", elem_id="drt-cancel")
                cancel_note = gr.Markdown(elem_classes="drt-small")
            with gr.Column(scale=3):
                status = gr.Markdown("Upload a file to add it to the library.", elem_id="drt-status")
        docs_table = gr.Dataframe(
            headers=DOC_HEADERS,
            value=None,
            interactive=False,
            label="Documents (click a row to pick it)",
            elem_id="drt-docs",
            wrap=True,
        )
        lib_note = gr.Markdown(EMPTY_LIBRARY, elem_id="drt-lib-note")
        with gr.Row():
            doc = gr.Dropdown(label="Document", choices=[], scale=3, elem_id="drt-lib-doc")
            # shown for a document with something to resume (wire: offer_resume)
            resume_btn = gr.Button("Resume prefill", scale=1, visible=False, elem_id="drt-resume")
            delete_btn = gr.Button("Delete", variant="stop", scale=1, elem_id="drt-delete")
            refresh_btn = gr.Button("Refresh", scale=1)
        ingest_result = gr.JSON(label="Last ingest (JSON)", visible=False)
    return LibraryTab(upload, title_in, password_in, add_btn, cancel_btn, cancel_note, status, docs_table,
                      lib_note, doc, resume_btn, delete_btn, refresh_btn, ingest_result)


def refresh(ctx: UIContext, n_menus: int, selected: str | None = None) -> tuple:
    """The library's outputs (table, note, the Library's document menu, then the `n_menus` menus of
    ready documents, the Ask tab's first); those menus show `selected` when it is ready, else the
    newest ready document, so a page load or an ingest never leaves them empty."""
    docs = list_documents(ctx)
    table = documents_table(ctx, docs)
    all_docs = doc_choices(ctx, docs=docs)
    ready = doc_choices(ctx, ready_only=True, docs=docs)
    ids = {v for _, v in all_docs}
    ready_ids = {v for _, v in ready}
    default = selected if selected in ready_ids else newest_ready(docs)

    def pick(choices: list, ids_: set, value: str | None) -> Any:
        if value in ids_:
            return gr.update(choices=choices, value=value)
        # no value sent: the menu's change event (which clears the chat) stays quiet
        return gr.update(choices=choices)

    menus = [pick(ready, ready_ids, default) for _ in range(n_menus)]
    if len(ready) > 1:  # Ask: every document at once
        menus[0] = pick([("All documents", ALL_DOCS), *ready], ready_ids | {ALL_DOCS}, default)
    return (table, library_note(docs), pick(all_docs, ids, selected or default), *menus)


def failed(e: BaseException, last: str = "") -> str:
    """The status after a failed ingest or resume: where it stopped and why, in one line."""
    if "**Failed:**" in last:  # the stage board already says why
        return last
    line = in_place(error_text(e))
    return f"{last}\n\n{line}" if last else line


def ingest_events(ctx: UIContext, n_menus: int, file: str | None, title: str, password: str, session: str, *,
                  said_in_place: bool) -> Iterator[tuple]:
    """The ingest outputs (status, upload, password, result, then `refresh`'s) as an upload goes.
    Every outcome ends in a final status: Ready, Stopped, or what went wrong, said in place (the
    browser) or raised as the call's error (the `/ingest` API, for gradio_client)."""
    skip = gr.skip()
    last, listed = "", False
    try:
        for up in ingest_upload(ctx, file, title=title, password=password, session=session):
            last = up.status
            if not up.finished:
                if not listed and "**prefilling**" in up.status:  # stored: list it as being prefilled
                    listed = True
                    yield (up.status, skip, skip, skip, *refresh(ctx, n_menus))
                else:
                    yield (up.status, skip, skip, skip, *[skip] * (3 + n_menus))
            else:
                stored = up.doc_id is not None
                yield (up.status, None if stored else skip, "" if stored else skip, up.result,
                       *refresh(ctx, n_menus, up.doc_id))  # fmt: skip
    except Exception as e:  # the file stays for a password retry ("Add to library"); else it is cleared
        if not said_in_place:
            raise to_gr_error(e) from e
        keep = isinstance(e, (PasswordRequired, WrongPassword))
        yield (failed(e, last), skip if keep else None, skip, skip, *refresh(ctx, n_menus))


def wire(ctx: UIContext, demo: gr.Blocks, tab: LibraryTab, menus: list[gr.Dropdown]) -> None:
    """The tab's events. `menus`: the other tabs' menus of ready documents (the Ask tab's first),
    which every change to the library refreshes."""
    doc_outputs = [tab.docs_table, tab.lib_note, tab.doc, *menus]
    _wire_ingest(ctx, tab, doc_outputs)
    _wire_list(ctx, demo, tab, doc_outputs)


def _wire_ingest(ctx: UIContext, tab: LibraryTab, doc_outputs: list) -> None:
    """Add (the button, a dropped file, the `/ingest` endpoint), Resume, Cancel."""
    n_menus = len(doc_outputs) - 3

    def arm_ingest(request: gr.Request) -> str:
        ctx.arm(session_of(request), "ingest")
        return ""

    def add_document(file: str | None, title: str, password: str, request: gr.Request) -> Iterator[tuple]:
        yield from ingest_events(ctx, n_menus, file, title, password, session_of(request),
                                 said_in_place=True)  # fmt: skip

    def ingest_api(file: str | None, title: str, password: str, request: gr.Request) -> Iterator[tuple]:
        yield from ingest_events(ctx, n_menus, file, title, password, session_of(request),
                                 said_in_place=False)  # fmt: skip

    ingest_outputs = [tab.status, tab.upload, tab.password_in, tab.ingest_result, *doc_outputs]
    ingest_inputs = [tab.upload, tab.title_in, tab.password_in]
    tab.add_btn.click(arm_ingest, None, tab.cancel_note, queue=False, **PRIVATE).then(
        add_document, ingest_inputs, ingest_outputs, show_progress="minimal", **MODEL, **PRIVATE
    )
    # the `/ingest` endpoint (gradio_client): the same pipeline; an error is the call's error
    api_ingest = gr.Button(visible="hidden")  # rendered (so its endpoint exists), never shown
    api_ingest.click(ingest_api, ingest_inputs, ingest_outputs, api_name="ingest", **MODEL)
    tab.upload.upload(arm_ingest, None, tab.cancel_note, queue=False, **PRIVATE).then(
        add_document, ingest_inputs, ingest_outputs, show_progress="minimal", **MODEL, **PRIVATE
    )

    def resume(doc_id: str | None, request: gr.Request) -> Iterator[tuple]:
        skip = gr.skip()
        last = ""
        try:
            for up in resume_prefill(ctx, doc_id, session=session_of(request)):
                last = up.status
                if not up.finished:
                    yield (up.status, *[skip] * len(doc_outputs))
                else:
                    yield (up.status, *refresh(ctx, n_menus, up.doc_id))
        except Exception as e:
            yield (failed(e, last), *refresh(ctx, n_menus))

    tab.resume_btn.click(arm_ingest, None, tab.cancel_note, queue=False, **PRIVATE).then(
        resume, [tab.doc], [tab.status, *doc_outputs], show_progress="minimal", **MODEL, **PRIVATE
    )

    def offer_resume(doc_id: str | None) -> Any:
        return gr.update(visible=resumable(ctx, doc_id))

    # Resume is offered only where there is something to resume: on every pick of a document, and
    # on every change to the list (a prefill stopped or finished leaves the picked document as it was)
    for changed in (tab.doc.change, tab.docs_table.change):
        changed(offer_resume, [tab.doc], [tab.resume_btn], show_progress="hidden", **PRIVATE)

    def cancel(request: gr.Request) -> str:
        return cancel_job(ctx, session_of(request), "ingest")

    tab.cancel_btn.click(cancel, None, tab.cancel_note, queue=False, **PRIVATE)


def _wire_list(ctx: UIContext, demo: gr.Blocks, tab: LibraryTab, doc_outputs: list) -> None:
    """Delete, Refresh (and the page load), a click on a row."""
    n_menus = len(doc_outputs) - 3

    def delete(doc_id: str | None) -> tuple:
        try:
            msg = delete_document(ctx, doc_id)
        except Exception as e:
            msg = in_place(error_text(e))
        return (msg, *refresh(ctx, n_menus))

    tab.delete_btn.click(
        delete, [tab.doc], [tab.status, *doc_outputs], **MODEL, **PRIVATE,
        js="(d) => (d && confirm('Delete this document and its prefilled states?')) ? d : null",
    )  # fmt: skip

    @user_facing
    def refresh_all(selected: str | None = None) -> tuple:
        return refresh(ctx, n_menus, selected)

    tab.refresh_btn.click(refresh_all, [tab.doc], doc_outputs, **PRIVATE)
    demo.load(refresh_all, None, doc_outputs, **PRIVATE)

    @user_facing
    def pick_row(evt: gr.SelectData) -> Any:
        row = getattr(evt, "row_value", None) or []
        if not row:
            return gr.skip()
        return ctx.library.resolve(str(row[-1]))

    tab.docs_table.select(pick_row, None, tab.doc, **PRIVATE)


def api(ctx: UIContext) -> None:
    """The API-only endpoints /documents and /passage (gradio_client)."""

    def documents() -> list[dict]:
        """Every document in the library with its state for this model."""
        return user_facing(list_documents)(ctx)

    gr.api(documents, api_name="documents")

    def api_passage(doc_id: str, chunk: int) -> dict:
        """One chunk of a document with its pages."""
        return user_facing(passage)(ctx, doc_id, chunk)

    gr.api(api_passage, api_name="passage")
