"""The Gradio 6 app: layout and wiring only; the work is in `ui.handlers`, the drawings in `ui.plots`.

    ctx = UIContext(home, model, max_file_bytes="50mb")
    demo = build_app(ctx)
    demo.launch(**launch_kwargs(ctx, host="127.0.0.1", port=7860))

Tabs: Library (upload with staged progress, Cancel, Resume, Delete), Ask (streamed chat, retrieval
heatmap, evidence with each passage's causal effect, Mask and regenerate: the answer before and
after barring chunks from retrieval, side by side), Summary (extractive / abstractive), Document map (dependency map from prefill).

Safe defaults (docs/reliability.md §1): bound to 127.0.0.1, `max_file_size`, the queue's direct
REST routes closed (`api_open=False`), monitoring off, analytics off, upload cache cleaned
(`delete_cache`, and each upload is deleted once stored), the data directory and the model
blocked from the file route, no share link, no SSR, no MCP server. Every event that runs the model
shares one worker (`concurrency_id="model"`, limit 1): users queue.

API (gradio_client), named endpoints: /ingest (upload a file), /documents, /ask (streams
{"answer", "done"} then {"answer", "evidence", "trace", "done": true}), /summarize, /trace,
/passage. UI-only events are private.
"""

import os
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from ingest.errors import PasswordRequired, WrongPassword  # noqa: E402

from . import handlers as h  # noqa: E402
from . import plots  # noqa: E402

MODEL = {"concurrency_id": "model", "concurrency_limit": 1}
PRIVATE = {"api_visibility": "private"}

APP_CSS = """
#drt-status { min-height: 9em; }
#drt-status p { margin: 0.1em 0; }
.drt-small { font-size: 0.9em; color: var(--body-text-color-subdued); }
"""

INTRO = (
    "**drt-reader** reads long documents with a retrieval transformer and shows what it retrieved: "
    "every answer comes with the document chunks the model actually looked at, on a page axis."
)


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or ""


def build_app(ctx: h.UIContext) -> gr.Blocks:
    """The app for one library and one model (see the module docstring)."""
    with gr.Blocks(title="drt-reader", analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        gr.Markdown(INTRO)
        answers = gr.State([])
        pending_q = gr.State("")

        with gr.Tabs():
            # -- Library ---------------------------------------------------------------------
            with gr.Tab("Library", id="library"):
                with gr.Row():
                    with gr.Column(scale=2):
                        upload = gr.File(
                            label="Add a document: PDF, EPUB, TXT, Markdown or TeX "
                            f"(up to {h.human_size(ctx.max_file_bytes)})",
                            file_types=h.ACCEPTED_SUFFIXES,
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
                    headers=h.DOC_HEADERS,
                    value=None,
                    interactive=False,
                    label="Documents (click a row to pick it)",
                    elem_id="drt-docs",
                    wrap=True,
                )
                lib_note = gr.Markdown(h.EMPTY_LIBRARY, elem_id="drt-lib-note")
                with gr.Row():
                    lib_doc = gr.Dropdown(label="Document", choices=[], scale=3, elem_id="drt-lib-doc")
                    resume_btn = gr.Button("Resume prefill", scale=1, elem_id="drt-resume")
                    delete_btn = gr.Button("Delete", variant="stop", scale=1, elem_id="drt-delete")
                    refresh_btn = gr.Button("Refresh", scale=1)
                ingest_result = gr.JSON(label="Last ingest (JSON)", visible=False)

            # -- Ask -------------------------------------------------------------------------
            with gr.Tab("Ask", id="ask"):
                with gr.Row():
                    ask_doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-ask-doc")
                    max_tokens = gr.Slider(8, h.MAX_NEW_TOKENS, value=64, step=8, label="Longest answer (tokens)")
                    before_in = gr.Number(label="Read only before page (spoiler-safe; 0 = all)", precision=0,
                                          minimum=0, value=None, scale=1, elem_id="drt-before-page")
                chat = gr.Chatbot(
                    label="Chat about the document", height=360, buttons=["copy", "copy_all"],
                    feedback_options=None, elem_id="drt-chat",
                )  # fmt: skip
                with gr.Row():
                    question = gr.Textbox(
                        placeholder="Ask a question about the document…", show_label=False, scale=5,
                        elem_id="drt-question",
                    )  # fmt: skip
                    send_btn = gr.Button("Ask", variant="primary", scale=1, elem_id="drt-send")
                    stop_btn = gr.Button("Stop", variant="stop", scale=1)
                gr.Markdown(
                    "**What the model retrieved.** One row per generated chunk, one column per document "
                    "chunk along the pages; colour = relevance score, outlined = retrieved (top-k). "
                    "Click a cell to read the passage.",
                    elem_classes="drt-small",
                )
                answer_pick = gr.Dropdown(label="Answer", choices=[], elem_id="drt-answer-pick")
                heatmap = gr.HTML(
                    plots.note("Ask a question: the retrieval heatmap of the answer appears here."),
                    css_template=plots.CSS, js_on_load=plots.CLICK_JS, elem_id="drt-heatmap",
                )  # fmt: skip
                with gr.Row():
                    pick_chunk = gr.Number(label="…or type a chunk number", precision=0, minimum=0, scale=1)
                    pick_btn = gr.Button("Show passage", scale=1)
                    mask_in = gr.Textbox(label="Chunk(s) to mask", placeholder="e.g. 12 or 12,40", scale=1,
                                         elem_id="drt-mask-in")  # fmt: skip
                    mask_btn = gr.Button("Mask and regenerate", scale=1, elem_id="drt-mask")
                picked = gr.Markdown(elem_id="drt-picked")
                with gr.Accordion("The page, the passage highlighted", open=True):
                    page_caption = gr.Markdown(elem_id="drt-page-caption")
                    page_img = gr.Image(show_label=False, interactive=False, type="pil", elem_id="drt-page")
                with gr.Row():  # the answer before and after masking, side by side
                    mask_before = gr.Markdown(elem_id="drt-mask-before")
                    mask_after = gr.Markdown(elem_id="drt-mask-after")
                mask_evidence = gr.Markdown(elem_id="drt-mask-evidence")
                with gr.Accordion("Evidence", open=True):
                    evidence = gr.Markdown(elem_id="drt-evidence")
                with gr.Row():
                    export_btn = gr.Button("Export the conversation (Markdown)", scale=1, elem_id="drt-export")
                    export_file = gr.File(label="Markdown", interactive=False, scale=2, elem_id="drt-export-file")
                with gr.Accordion("Raw result (answer, evidence, trace as JSON)", open=False):
                    ask_json = gr.JSON()

            # -- Summary ---------------------------------------------------------------------
            with gr.Tab("Summary", id="summary"):
                with gr.Row():
                    sum_doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-sum-doc")
                    sum_mode = gr.Radio(
                        choices=[(label, key) for key, label in h.SUMMARY_MODES.items()],
                        value="extractive", label="Mode", scale=3,
                    )  # fmt: skip
                    sum_btn = gr.Button("Summarize", variant="primary", scale=1, elem_id="drt-summarize")
                with gr.Row():
                    sum_part = gr.Dropdown(label="Chapter or section", choices=[("Whole document", h.WHOLE_DOCUMENT)],
                                           value=h.WHOLE_DOCUMENT, scale=3, elem_id="drt-sum-part")
                    sum_pages = gr.Textbox(label="…or pages", placeholder="e.g. 12-30", scale=1, elem_id="drt-sum-pages")
                summary_md = gr.Markdown(elem_id="drt-summary")
                sum_heat = gr.HTML(
                    plots.note("The chunks the summary rests on appear here."),
                    css_template=plots.CSS, js_on_load=plots.CLICK_JS, elem_id="drt-sum-heatmap",
                )  # fmt: skip
                sum_picked = gr.Markdown()
                with gr.Accordion("Evidence", open=False):
                    sum_evidence = gr.Markdown()
                sum_json = gr.JSON(visible=False)

            # -- Outline ---------------------------------------------------------------------
            with gr.Tab("Outline", id="outline"):
                gr.Markdown(
                    "The document's parts; in papers, every definition, lemma, proposition and theorem with "
                    "the later passages that retrieved it while the document was read; in books, the people "
                    "and places with the sentence that introduces each.",
                    elem_classes="drt-small",
                )
                with gr.Row():
                    out_doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-out-doc")
                    out_btn = gr.Button("Show outline", variant="primary", scale=1, elem_id="drt-show-outline")
                outline_md = gr.Markdown(elem_id="drt-outline")
                with gr.Row():
                    out_chunk = gr.Number(label="What did a chunk rely on? (chunk number)", precision=0, minimum=0,
                                          scale=3, elem_id="drt-out-chunk")
                    out_chunk_btn = gr.Button("Show", scale=1, elem_id="drt-out-chunk-btn")
                relied_md = gr.Markdown(elem_id="drt-relied")

            # -- Document map ----------------------------------------------------------------
            with gr.Tab("Document map", id="map"):
                gr.Markdown(
                    "While the document was read (prefill), every chunk retrieved a few earlier chunks. "
                    "x: the querying chunk, y: the chunk it retrieved, both on page axes; size and colour "
                    "= fusion weight. A proof that leans on a definition shows as a dot far below the "
                    "diagonal.",
                    elem_classes="drt-small",
                )
                with gr.Row():
                    map_doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-map-doc")
                    map_btn = gr.Button("Show map", variant="primary", scale=1, elem_id="drt-show-map")
                with gr.Row():
                    with gr.Column(scale=3):
                        depmap = gr.HTML(
                            plots.note("Pick a document and press Show map."),
                            css_template=plots.CSS, js_on_load=plots.CLICK_JS, elem_id="drt-depmap",
                        )  # fmt: skip
                    with gr.Column(scale=2):
                        map_info = gr.Markdown()
                        with gr.Row():
                            map_src = gr.Number(label="Querying chunk", precision=0, minimum=0)
                            map_dst = gr.Number(label="Retrieved chunk (optional)", precision=0, minimum=0)
                        map_pick_btn = gr.Button("Show passages")
                        map_picked = gr.Markdown(elem_id="drt-map-picked")

        # -- wiring: library -----------------------------------------------------------------
        doc_outputs = [docs_table, lib_note, lib_doc, ask_doc, sum_doc, map_doc, out_doc]

        def refresh(selected: str | None = None) -> tuple:
            """The library's outputs; the ready-document menus show `selected` when it is ready, else
            the newest ready document, so a page load or an ingest never leaves them empty."""
            docs = h.list_documents(ctx)
            table = h.documents_table(ctx, docs)
            all_docs = h.doc_choices(ctx, docs=docs)
            ready = h.doc_choices(ctx, ready_only=True, docs=docs)
            ids = {v for _, v in all_docs}
            ready_ids = {v for _, v in ready}
            default = selected if selected in ready_ids else h.newest_ready(docs)

            def pick(choices: list, ids_: set, value: str | None) -> Any:
                if value in ids_:
                    return gr.update(choices=choices, value=value)
                return gr.update(choices=choices)  # no value sent: the menu's change event (clears the chat) stays quiet

            menus = [pick(ready, ready_ids, default) for _ in range(4)]
            if len(ready) > 1:  # Ask: every document at once
                menus[0] = pick([("All documents", h.ALL_DOCS), *ready], ready_ids | {h.ALL_DOCS}, default)
            return (table, h.library_note(docs), pick(all_docs, ids, selected or default), *menus)

        def failed(e: BaseException, last: str = "") -> str:
            """The status after a failed ingest or resume: where it stopped and why, in one line."""
            if "**Failed:**" in last:  # the stage board already says why
                return last
            line = h.in_place(h.error_text(e))
            return f"{last}\n\n{line}" if last else line

        def arm_ingest(request: gr.Request) -> str:
            ctx.arm(_session(request), "ingest")
            return ""

        def ingest_events(file: str | None, title: str, password: str, request: gr.Request, *,
                          in_place: bool) -> Iterator[tuple]:
            """Every outcome ends in a final status: Ready, Stopped, or what went wrong, said in place
            (the browser) or raised as the call's error (the `/ingest` API, for gradio_client)."""
            skip = gr.skip()
            last, listed = "", False
            try:
                for up in h.ingest_upload(ctx, file, title=title, password=password, session=_session(request)):
                    last = up.status
                    if not up.finished:
                        if not listed and "**prefilling**" in up.status:  # stored: list it as being prefilled
                            listed = True
                            yield (up.status, skip, skip, skip, *refresh())
                        else:
                            yield (up.status, skip, skip, skip, *[skip] * len(doc_outputs))
                    else:
                        stored = up.doc_id is not None
                        yield (up.status, None if stored else skip, "" if stored else skip, up.result,
                               *refresh(up.doc_id))  # fmt: skip
            except Exception as e:  # the file stays for a password retry ("Add to library"); else it is cleared
                if not in_place:
                    raise h.to_gr_error(e) from e
                keep = isinstance(e, (PasswordRequired, WrongPassword))
                yield (failed(e, last), skip if keep else None, skip, skip, *refresh())

        def add_document(file: str | None, title: str, password: str, request: gr.Request) -> Iterator[tuple]:
            yield from ingest_events(file, title, password, request, in_place=True)

        def ingest_api(file: str | None, title: str, password: str, request: gr.Request) -> Iterator[tuple]:
            yield from ingest_events(file, title, password, request, in_place=False)

        ingest_outputs = [status, upload, password_in, ingest_result, *doc_outputs]
        ingest_inputs = [upload, title_in, password_in]
        add_btn.click(arm_ingest, None, cancel_note, queue=False, **PRIVATE).then(
            add_document, ingest_inputs, ingest_outputs, show_progress="minimal", **MODEL, **PRIVATE
        )
        # the `/ingest` endpoint (gradio_client): the same pipeline; an error is the call's error
        api_ingest = gr.Button(visible="hidden")  # rendered (so its endpoint exists), never shown
        api_ingest.click(ingest_api, ingest_inputs, ingest_outputs, api_name="ingest", **MODEL)
        upload.upload(arm_ingest, None, cancel_note, queue=False, **PRIVATE).then(
            add_document, ingest_inputs, ingest_outputs, show_progress="minimal", **MODEL, **PRIVATE
        )

        def resume(doc_id: str | None, request: gr.Request) -> Iterator[tuple]:
            skip = gr.skip()
            last = ""
            try:
                for up in h.resume_prefill(ctx, doc_id, session=_session(request)):
                    last = up.status
                    if not up.finished:
                        yield (up.status, *[skip] * len(doc_outputs))
                    else:
                        yield (up.status, *refresh(up.doc_id))
            except Exception as e:
                yield (failed(e, last), *refresh())

        resume_btn.click(arm_ingest, None, cancel_note, queue=False, **PRIVATE).then(
            resume, [lib_doc], [status, *doc_outputs], show_progress="minimal", **MODEL, **PRIVATE
        )

        def cancel(request: gr.Request) -> str:
            return h.cancel_job(ctx, _session(request), "ingest")

        cancel_btn.click(cancel, None, cancel_note, queue=False, **PRIVATE)

        def delete(doc_id: str | None) -> tuple:
            try:
                msg = h.delete_document(ctx, doc_id)
            except Exception as e:
                msg = h.in_place(h.error_text(e))
            return (msg, *refresh())

        delete_btn.click(
            delete, [lib_doc], [status, *doc_outputs], **MODEL, **PRIVATE,
            js="(d) => (d && confirm('Delete this document and its prefilled states?')) ? d : null",
        )  # fmt: skip

        @h.user_facing
        def refresh_all(selected: str | None = None) -> tuple:
            return refresh(selected)

        refresh_btn.click(refresh_all, [lib_doc], doc_outputs, **PRIVATE)
        demo.load(refresh_all, None, doc_outputs, **PRIVATE)

        @h.user_facing
        def pick_row(evt: gr.SelectData) -> Any:
            row = getattr(evt, "row_value", None) or []
            if not row:
                return gr.skip()
            return ctx.library.resolve(str(row[-1]))

        docs_table.select(pick_row, None, lib_doc, **PRIVATE)

        # -- wiring: ask ---------------------------------------------------------------------
        @h.user_facing
        def user_turn(doc_id: str | None, q: str, history: list, request: gr.Request) -> tuple:
            return h.chat_user(ctx, doc_id, q, history, session=_session(request))

        def bot_turn(doc_id, q, history, answers_, n_tokens, before, request: gr.Request) -> Iterator[tuple]:
            skip = gr.skip()
            if not q:  # user_turn already said what is missing
                yield (skip,) * 6
                return
            try:
                yield from h.chat_bot(ctx, doc_id, q, history, answers_, int(n_tokens), session=_session(request),
                                      before_page=h.before_page_of(before))
            except Exception as e:  # said in the chat, in place
                yield (list(history or []) + [{"role": "assistant", "content": h.in_place(h.error_text(e))}],
                       skip, skip, skip, skip, skip)

        bot_outputs = [chat, answers, answer_pick, heatmap, evidence, ask_json]
        for trigger in (send_btn.click, question.submit):
            trigger(user_turn, [ask_doc, question, chat], [question, chat, pending_q], queue=False, **PRIVATE).success(
                bot_turn, [ask_doc, pending_q, chat, answers, max_tokens, before_in], bot_outputs, show_progress="hidden",
                **MODEL, **PRIVATE,
            )  # fmt: skip

        def stop(request: gr.Request) -> None:
            h.cancel_job(ctx, _session(request), "ask")

        stop_btn.click(stop, None, None, queue=False, **PRIVATE)

        @h.user_facing
        def show(answers_, index) -> tuple:
            return h.show_answer(ctx, answers_, index)

        answer_pick.change(show, [answers, answer_pick], [heatmap, evidence, ask_json], **PRIVATE)

        @h.user_facing
        def cell(answers_, index, evt: gr.EventData) -> tuple:
            data = getattr(evt, "_data", None) or {}
            c = data.get("chunk")
            return h.heatmap_pick(ctx, answers_, index, c, data.get("gen")), c, gr.skip() if c is None else str(c)

        heatmap.cell_click(cell, [answers, answer_pick], [picked, pick_chunk, mask_in], **PRIVATE)

        def show_page(doc_id, answers_, index, chunk) -> tuple:
            try:  # the picked answer's document (with "All documents", each answer has its own)
                if answers_ and index is not None and 0 <= int(index) < len(answers_):
                    doc_id = answers_[int(index)]["doc_id"]
                if doc_id == h.ALL_DOCS:
                    return "Ask a question first.", None
                return h.page_view(ctx, doc_id, chunk)[::-1]
            except Exception as e:
                return h.in_place(h.error_text(e)), None

        pick_chunk.change(show_page, [ask_doc, answers, answer_pick, pick_chunk], [page_caption, page_img], **PRIVATE)

        def export(doc_id) -> tuple:
            try:
                return h.export_conversation(ctx, doc_id), ""
            except Exception as e:
                return None, h.in_place(h.error_text(e))

        export_btn.click(export, [ask_doc], [export_file, page_caption], **PRIVATE)

        @h.user_facing
        def pick(answers_, index, chunk) -> str:
            return h.heatmap_pick(ctx, answers_, index, chunk)

        pick_btn.click(pick, [answers, answer_pick, pick_chunk], picked, **PRIVATE)

        @h.user_facing
        def mask_regenerate(answers_, index, chunks, n_tokens) -> tuple:
            return h.mask_regenerate(ctx, answers_, index, chunks, int(n_tokens))

        mask_btn.click(mask_regenerate, [answers, answer_pick, mask_in, max_tokens],
                       [mask_before, mask_after, mask_evidence, ask_json], **MODEL, **PRIVATE)  # fmt: skip
        ask_doc.change(lambda: ([], [], gr.update(choices=[], value=None)), None, [chat, answers, answer_pick],
                       **PRIVATE)  # fmt: skip

        # -- wiring: summary -----------------------------------------------------------------
        def summary(doc_id, mode, part, pages) -> tuple:
            try:
                return h.summary_view(ctx, doc_id, mode, chapter=part, pages=pages)
            except Exception as e:
                return h.in_place(h.error_text(e)), gr.skip(), gr.skip(), gr.skip()

        sum_btn.click(summary, [sum_doc, sum_mode, sum_part, sum_pages], [summary_md, sum_evidence, sum_heat, sum_json],
                      **MODEL, **PRIVATE)  # fmt: skip

        @h.user_facing
        def summary_parts(doc_id) -> Any:
            return gr.update(choices=h.summary_parts(ctx, doc_id), value=h.WHOLE_DOCUMENT)

        sum_doc.change(summary_parts, [sum_doc], [sum_part], **PRIVATE)

        # -- wiring: outline -----------------------------------------------------------------
        def show_outline(doc_id) -> str:
            try:
                return h.outline_view(ctx, doc_id)
            except Exception as e:
                return h.in_place(h.error_text(e))

        out_btn.click(show_outline, [out_doc], [outline_md], **MODEL, **PRIVATE)

        def show_relied(doc_id, chunk) -> str:
            try:
                return h.relied_on_view(ctx, doc_id, chunk)
            except Exception as e:
                return h.in_place(h.error_text(e))

        out_chunk_btn.click(show_relied, [out_doc, out_chunk], [relied_md], **MODEL, **PRIVATE)

        @h.user_facing
        def sum_cell(doc_id, evt: gr.EventData) -> str:
            data = getattr(evt, "_data", None) or {}
            return h.passage_md(ctx, doc_id, data.get("chunk"))

        sum_heat.cell_click(sum_cell, [sum_doc], sum_picked, **PRIVATE)

        # -- wiring: document map ------------------------------------------------------------
        def show_map(doc_id) -> tuple:
            try:
                return h.doc_map_view(ctx, doc_id)
            except Exception as e:
                return gr.skip(), h.in_place(h.error_text(e))

        map_btn.click(show_map, [map_doc], [depmap, map_info], **MODEL, **PRIVATE)

        @h.user_facing
        def link(doc_id, evt: gr.EventData) -> tuple:
            data = getattr(evt, "_data", None) or {}
            s, d = data.get("src"), data.get("dst")
            return h.doc_map_pick(ctx, doc_id, s, d), s, d

        depmap.link_click(link, [map_doc], [map_picked, map_src, map_dst], **MODEL, **PRIVATE)

        @h.user_facing
        def map_pick(doc_id, s, d) -> str:
            return h.doc_map_pick(ctx, doc_id, s, d)

        map_pick_btn.click(map_pick, [map_doc, map_src, map_dst], map_picked, **MODEL, **PRIVATE)

        # -- API-only endpoints (gradio_client) ----------------------------------------------
        def documents() -> list[dict]:
            """Every document in the library with its state for this model."""
            return h.user_facing(h.list_documents)(ctx)

        def ask(doc_id: str, question: str, max_new_tokens: int = 64, request: gr.Request = None) -> Iterator[dict]:
            """Ask a question about a prefilled document; streams {"answer", "done": false} updates,
            then {"answer", "evidence", "trace", "done": true}."""
            yield from h.user_facing(h.ask_stream)(
                ctx, doc_id, question, max_new_tokens=max_new_tokens, session=_session(request)
            )

        def summarize(doc_id: str, mode: str = "extractive", max_new_tokens: int = 128, chapter: int = 0,
                      pages: str = "") -> dict:
            """Summarize a prefilled document (0 = all of it), or part `chapter`, or `pages` ("12-30"):
            {"summary", "evidence", "trace", "mode"}."""
            return h.user_facing(h.summarize_doc)(ctx, doc_id, mode, max_new_tokens, chapter=chapter, pages=pages)

        def trace(doc_id: str) -> dict:
            """The document's dependency map: for each chunk, what it retrieved and the weights."""
            dep = h.user_facing(h.doc_map)(ctx, doc_id)
            return {"doc_id": ctx.library.resolve(doc_id), "chunks": dep}

        def passage(doc_id: str, chunk: int) -> dict:
            """One chunk of a document with its pages."""
            return h.user_facing(h.passage)(ctx, doc_id, chunk)

        gr.api(documents, api_name="documents")
        gr.api(ask, api_name="ask", **MODEL)
        gr.api(summarize, api_name="summarize", **MODEL)
        gr.api(trace, api_name="trace", **MODEL)

        def outline(doc_id: str) -> dict:
            """The document's outline: parts, statements and what used them, people and places."""
            return h.user_facing(h.outline_doc)(ctx, doc_id)

        gr.api(outline, api_name="outline", **MODEL)
        gr.api(passage, api_name="passage")
    return demo


def queue_app(demo: gr.Blocks) -> gr.Blocks:
    """The queue: its direct REST routes closed, one job per event by default, a bounded queue."""
    return demo.queue(api_open=False, default_concurrency_limit=1, max_size=32)


def launch_kwargs(
    ctx: h.UIContext, *, host: str = "127.0.0.1", port: int | None = 7860, prevent_thread_lock: bool = False
) -> dict:
    """The hardened `launch()` settings (docs/reliability.md §1)."""
    blocked = [str(ctx.home.resolve())]
    model = Path(ctx.model)
    if model.exists():
        blocked.append(str(model.resolve()))
    return dict(
        server_name=host,
        server_port=port,
        app_kwargs=_host_check(host),
        share=False,
        max_file_size=ctx.max_file_bytes,
        allowed_paths=[],
        blocked_paths=blocked,
        enable_monitoring=False,
        show_error=False,
        strict_cors=True,
        ssr_mode=False,
        mcp_server=False,
        inbrowser=False,
        quiet=True,
        prevent_thread_lock=prevent_thread_lock,
        css=APP_CSS,
        # system fonts: the default theme would fetch its fonts from Google (no network needed)
        theme=gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]),
    )


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _hostname(netloc: str) -> str | None:
    try:
        return urlsplit("//" + netloc).hostname
    except ValueError:
        return None


class LoopbackOnly:
    """ASGI middleware of an app served on a loopback address (there is no login):
    - the Host header must name a loopback address, else 400: a web page whose domain is re-pointed
      at 127.0.0.1 (DNS rebinding) would otherwise be the app's own origin and read the library;
    - a request that carries an Origin header must come from a loopback origin, else 403: a page
      elsewhere can send a plain multipart POST (no CORS preflight) that would drop files into the
      upload cache; CORS only stops it from reading the answer. `null` origins are refused too."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = _hostname(headers.get(b"host", b"").decode("latin-1"))
            origin = headers.get(b"origin")
            why = None
            if host not in LOOPBACK_HOSTS:
                why = (400, "invalid host header")
            elif origin is not None:
                o = origin.decode("latin-1")
                if o == "null" or _hostname(urlsplit(o).netloc) not in LOOPBACK_HOSTS:
                    why = (403, "cross-origin request refused")
            if why is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                from starlette.responses import PlainTextResponse

                await PlainTextResponse(why[1], status_code=why[0])(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _host_check(host: str) -> dict:
    """`app_kwargs` for launch(): LoopbackOnly when served on a loopback address. On another
    address the authenticating proxy in front decides which names and origins are served."""
    if host not in LOOPBACK_HOSTS:
        return {}
    from starlette.middleware import Middleware

    return {"middleware": [Middleware(LoopbackOnly)]}


def launch(ctx: h.UIContext, *, host: str = "127.0.0.1", port: int | None = 7860, prevent_thread_lock: bool = False):
    """Build, queue and launch the app; returns (demo, local_url)."""
    demo = queue_app(build_app(ctx))
    _, url, _ = demo.launch(**launch_kwargs(ctx, host=host, port=port, prevent_thread_lock=prevent_thread_lock))
    return demo, url
