"""The Ask tab: a streamed chat about one document (or all of them), the retrieval heatmap of the
picked answer, its evidence, a clicked cell's passage and page, Mask and regenerate, the export.

Handlers first (plain functions, testable without a browser), then the tab's layout (`layout`),
its events (`wire`) and its API endpoint (`api`: /ask). Answers come from `qa.ask`, the same code
as `drt-reader ask`.
"""

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import gradio as gr

from ingest.errors import Cancelled, IngestError, NotPrefilled
from qa.evidence import snippet

from .. import plots
from ..context import (
    ALL_DOCS,
    MAX_NEW_TOKENS,
    MODEL,
    PRIVATE,
    UIContext,
    UIError,
    chunk_number,
    error_text,
    in_place,
    not_prefilled_message,
    ready,
    session_of,
    user_facing,
)
from ..jobs import cancel_job, run_threaded
from ..render import (answer_md, effect_text, evidence_md, matter_text, md_escape, pages_runs, pages_text,
                      weight_text)
from .library import list_documents, passage_md

logger = logging.getLogger(__name__)


def before_page_of(value: Any) -> int | None:
    """A "before page" field (the Ask tab's spoiler-safe reading, the Summary tab's story so far):
    None when empty or 0; a UIError for what is not a page number. Whether the document has that
    page is qa's to say (qa.views.BeforePage)."""
    if value is None or str(value).strip() == "":
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise UIError(f"before page: {str(value)[:40]!r} is not a page number") from None
    if not f.is_integer():
        raise UIError(f"before page: {f:g} is not a page number")
    return int(f) if f > 0 else None


def ask_stream(
    ctx: UIContext, doc_id: str | None, question: str, *, max_new_tokens: int = 64, session: str = "",
    before_page: int | None = None,
) -> Iterator[dict]:
    """Answer a question about a document, streaming: {"answer": text so far, "done": False} ...
    then {"answer", "evidence", "trace", "done": True, "stopped", "doc_id", "question"}.
    `before_page`: spoiler-safe reading (qa.views.BeforePage)."""
    doc_id = ready(ctx, doc_id)
    question = " ".join(str(question or "").split())
    if not question:
        raise UIError("type a question first")
    n_new = max(1, min(int(max_new_tokens or 64), MAX_NEW_TOKENS))
    from qa.ask import ask

    job = ctx.begin(session, "ask")
    text = ""
    result: dict | None = None
    try:
        if job.cancel.is_set():
            yield {"answer": "", "evidence": [], "trace": {"chunks": []}, "done": True, "stopped": True,
                   "doc_id": doc_id, "question": question}  # fmt: skip
            return
        engine = ctx.engine()

        def work(emit: Callable) -> dict:
            return ask(ctx.library, engine, doc_id, question, max_new_tokens=n_new, on_delta=emit, cancel=job.cancel,
                       before_page=before_page, on_answer=lambda r: emit(("answer", r)))

        try:
            for kind, payload in run_threaded(work, job, min_interval=0.1):
                if kind == "events":
                    text += "".join(p for p in payload if isinstance(p, str))
                    early = [p[1] for p in payload if isinstance(p, tuple)]
                    yield {"answer": text, "done": False, **({"early": early[-1]} if early else {})}
                else:
                    result = payload
        except NotPrefilled as e:
            raise UIError(not_prefilled_message(ctx, doc_id)) from e
        except Cancelled:
            yield {"answer": text.strip(), "evidence": [], "trace": {"chunks": []}, "done": True,
                   "stopped": True, "doc_id": doc_id, "question": question}  # fmt: skip
            return
    finally:
        ctx.end(session, "ask", job)
    assert result is not None
    yield {**result, "done": True, "stopped": False, "doc_id": doc_id, "question": question}


def quote_rows(ctx: UIContext, record: dict) -> list[dict]:
    """The quoted answer's sentences as the model read them: one heatmap row per whole sentence of the
    quote (qa.reader.sentence_spans), what the model retrieved while it read that sentence at prefill
    (qa.summary.sentence_rows over the stored dependency map, as a summary's rows), each with its
    "text"; [] for an abstention, an answer without a quote, or when no dependency map is stored.
    Kept in the record once made."""
    if "quote_rows" in record:
        return record["quote_rows"]
    rows: list[dict] = []
    q = record.get("quote")
    fp = ctx.fingerprint() if q and not record.get("abstained") and q.get("char_start") is not None else None
    if fp is not None:
        from qa.reader import sentence_spans
        from qa.summary import sentence_rows

        doc_id, a, b = record["doc_id"], int(q["char_start"]), int(q["char_end"])
        dep = ctx.library.latest_trace(doc_id, fp, "dependency_map")
        around = list(range(max(0, int(q["chunk"]) - 3), int(q["chunk"]) + 4))
        near = [r for r in ctx.library.chunks(doc_id, around) if r["char_end"] > a and r["char_start"] < b]
        if dep is not None and near:
            base = near[0]["char_start"]
            text = "".join(r["text"] for r in near)[a - base: b - base]
            spans = [(x + a, y + a) for x, y in sentence_spans(text) if text[x:y].strip()] or [(a, b)]
            chunks = [[r["idx"] for r in near if r["char_end"] > x and r["char_start"] < y] for x, y in spans]
            n_doc = int((record.get("trace") or {}).get("n_doc_chunks") or len(ctx.layout(doc_id)[0]))
            rows = [dict(r, gen_chunk=-1, text=" ".join(text[x - a: y - a].split()))
                    for r, (x, y) in zip(sentence_rows(dep["data"], chunks, n_doc), spans)]
    record["quote_rows"] = rows
    return rows


def answer_rows(ctx: UIContext, record: dict) -> tuple[list[dict], list[str]]:
    """The rows of an answer's heatmap and their labels: the generated chunks' retrieval (the
    question's selection: "gen 1", ...), then the quoted sentences as the model read them ("quote 1", ...)."""
    gen = list((record.get("trace") or {}).get("chunks") or [])
    quoted = quote_rows(ctx, record) if gen else []
    names = [f"gen {i + 1}" for i in range(len(gen))] + [f"quote {k + 1}" for k in range(len(quoted))]
    return gen + quoted, names


def answer_heatmap(ctx: UIContext, record: dict | None) -> str:
    """The retrieval heatmap of one answer record (an ask result with its doc_id): a row per
    generated chunk, then a row per sentence of the quote (`quote_rows`)."""
    if not record:
        return plots.note("Ask a question: the retrieval heatmap of the answer appears here.")
    chunk_pages, labels = ctx.layout(record["doc_id"])
    rows, names = answer_rows(ctx, record)
    if len(rows) == len((record.get("trace") or {}).get("chunks") or []):
        return plots.retrieval_heatmap_svg(record.get("trace"), chunk_pages, labels)
    n_gen = len(rows) - len(record["quote_rows"])
    titles = [f"generated chunk {r.get('gen_chunk', i)}" for i, r in enumerate(rows[:n_gen])]
    titles += [f"quoted sentence {k + 1}, as the model read it: {snippet(r['text'], 200)}"
               for k, r in enumerate(rows[n_gen:])]
    return plots.retrieval_heatmap_svg(
        dict(record["trace"], chunks=rows), chunk_pages, labels, row_labels=names, row_titles=titles,
        title="Retrieval: the answer's generated chunks, then each quoted sentence as the model read it",
    )  # fmt: skip


def chat_user(ctx: UIContext, doc_id: str | None, question: str, history: list | None, session: str = ""):
    """First step of a chat turn (instant, unqueued): echo the question, arm the job so Stop
    works while it waits. Returns (textbox value, history, pending question); a user error (no
    document, no question) is said in the chat and leaves the pending question empty."""
    q = " ".join(str(question or "").split())
    try:
        if doc_id != ALL_DOCS:
            ready(ctx, doc_id)
        elif not list_documents(ctx):
            raise UIError("the library is empty: add a document in the Library tab first")
        if not q:
            raise UIError("type a question first")
    except Exception as e:  # said in the chat, in place: the question stays in the box, nothing is queued
        note = {"role": "assistant", "content": in_place(error_text(e))}
        return question, list(history or []) + [note], ""
    ctx.arm(session, "ask")
    return "", list(history or []) + [{"role": "user", "content": q}], q


# what the chat keeps of each answer (the answer picker, the heatmap, Mask and regenerate, export read it)
RECORD_KEYS = ("doc_id", "question", "answer", "evidence", "trace", "quote", "abstained", "passages", "short_answer",
               "before_page", "question_id")


def _answer_choices(answers: list[dict]) -> list[tuple[str, int]]:
    out = []
    for i, a in enumerate(answers):
        q = a.get("question", "")
        before = f" (before p. {a['before_page']})" if a.get("before_page") else ""
        out.append((f"#{i + 1}: {q[:60]}{'…' if len(q) > 60 else ''}{before}", i))
    return out


def _evidence_note(evidence: list[dict], labels: dict[int, str]) -> dict:
    """A collapsed chat message under an answer, listing what it retrieved."""
    if not evidence:
        body, pages = "No document chunk was retrieved.", ""
    else:
        lines = [
            f"- {pages_text(e['pages'][0], e['pages'][-1], labels)}, chunk {e['chunk']}, weight "
            f"{weight_text(e['weight'])}{effect_text(e).replace(' · ', ', ')}: {md_escape(snippet(e['text'], 140))}"
            for e in evidence
        ]
        body = "\n".join(lines)
        pages = f" ({pages_runs([p for e in evidence for p in e['pages']], labels)})"
    return {"role": "assistant", "content": body,
            "metadata": {"title": f"Retrieved by the model: {len(evidence)} passage{'s' * (len(evidence) != 1)}{pages}",
                         "status": "done"}}  # (not "Evidence": a quote may come from the question's own pool)


def chat_bot(
    ctx: UIContext,
    doc_id: str | None,
    question: str | None,
    history: list | None,
    answers: list | None,
    max_new_tokens: int = 64,
    session: str = "",
    before_page: int | None = None,
) -> Iterator[tuple]:
    """Second step of a chat turn: stream the answer into the chat, then show its heatmap and
    evidence. Yields (history, answers, answer picker update, heatmap HTML, evidence Markdown,
    result JSON). `doc_id` ALL_DOCS asks every ready document (chat_all)."""
    history = list(history or [])
    answers = list(answers or [])
    skip = gr.skip()
    if not question:
        yield history, answers, skip, skip, skip, skip
        return
    if doc_id == ALL_DOCS:
        yield from chat_all(ctx, question, history, answers, max_new_tokens, before_page)
        return
    final: dict | None = None
    for ev in ask_stream(ctx, doc_id, question, max_new_tokens=max_new_tokens, session=session,
                         before_page=before_page):
        if ev["done"]:
            final = ev
        elif "early" in ev:  # the answer, before its causal effects: show it (and let it be picked) now
            early = {**ev["early"], "doc_id": ctx.library.resolve(doc_id), "question": question,
                     "before_page": before_page}
            _, labels = ctx.layout(early["doc_id"])
            note = "\n\n*Measuring each passage's causal effect on this answer…*"
            shown_now = answers + [{k: early.get(k) for k in RECORD_KEYS}]
            yield (history + [{"role": "assistant", "content": answer_md(early, labels) + note}], shown_now,
                   gr.update(choices=_answer_choices(shown_now), value=len(shown_now) - 1),
                   answer_heatmap(ctx, early), evidence_md(early["evidence"], labels) + note, skip)
        else:  # the answer is a quote chosen at the end: show progress, not the raw generation
            yield (history + [{"role": "assistant", "content": "*reading the passages the model retrieved…* ▌"}],
                   answers, skip, skip, skip, skip)
    assert final is not None
    _, labels = ctx.layout(final["doc_id"])
    text = final["answer"].strip()
    if final.get("stopped"):
        shown = (md_escape(text) + " " if text else "") + "*(stopped)*"
        yield history + [{"role": "assistant", "content": shown}], answers, skip, skip, skip, skip
        return
    shown = answer_md(final, labels)
    history = history + [{"role": "assistant", "content": shown}, _evidence_note(final["evidence"], labels)]
    record = {k: final.get(k) for k in RECORD_KEYS}
    answers.append(record)
    picker = gr.update(choices=_answer_choices(answers), value=len(answers) - 1)
    result = {k: final[k] for k in ("answer", "evidence", "trace")}
    yield history, answers, picker, answer_heatmap(ctx, record), answer_evidence_md(ctx, record, labels), result


def chat_all(ctx: UIContext, question: str, history: list, answers: list, max_new_tokens: int,
             before_page: int | None) -> Iterator[tuple]:
    """"All documents": every ready document's model retrieves on its own (qa.ask.ask_all); one
    chat message with the answers grouped by document, the surest first; each answer is also added
    to the answer picker (its heatmap and evidence)."""
    from qa.ask import ask_all

    skip = gr.skip()
    yield history + [{"role": "assistant", "content": "*asking every document…* ▌"}], answers, skip, skip, skip, skip
    out = ask_all(ctx.library, ctx.engine(), question, max_new_tokens=max(1, min(int(max_new_tokens), MAX_NEW_TOKENS)),
                  before_page=before_page)
    parts = []
    for d in out["documents"]:
        _, labels = ctx.layout(d["doc_id"])
        parts.append(f"**{md_escape(d['title'])}**\n\n{answer_md(d, labels)}")
        answers.append({**{k: d.get(k) for k in RECORD_KEYS}, "question": question})
    history = history + [{"role": "assistant", "content": "\n\n---\n\n".join(parts)}]
    picker = gr.update(choices=_answer_choices(answers), value=len(answers) - len(out["documents"]))
    first = answers[len(answers) - len(out["documents"])]
    _, labels = ctx.layout(first["doc_id"])
    yield (history, answers, picker, answer_heatmap(ctx, first), answer_evidence_md(ctx, first, labels),
           {"question": out["question"], "documents": [{k: d[k] for k in ("doc_id", "title", "answer", "evidence")}
                                                       for d in out["documents"]]})


def answer_evidence_md(ctx: UIContext, record: dict, labels: dict[int, str] | None = None) -> str:
    """Evidence of an answer: the quoted passage first (its chunk, the quote in bold), then the
    chunks the model retrieved by fusion weight."""
    body = evidence_md(record.get("evidence") or [], labels)
    q = record.get("quote")
    if not q:
        return body
    best = next((p for p in record.get("passages") or [] if p["chunk"] == q["chunk"]), None)
    if best is not None:  # the passage the quote was read from (its window), the quote in bold
        flat, quoted = " ".join(best["text"].split()), " ".join(q["text"].split())
        i = flat.find(quoted)
        shown = (md_escape(flat[:i]) + "**" + md_escape(quoted) + "**" + md_escape(flat[i + len(quoted):])
                 if i >= 0 else "**" + md_escape(quoted) + "**")
        pages = best.get("pages") or [0]
        return (f"**Quoted passage** · {pages_text(pages[0], pages[-1], labels)}{matter_text(q)} · "
                f"chunk {int(q['chunk'])}\n\n> {shown}\n\n" + body)
    rows = ctx.library.chunks(record["doc_id"], [int(q["chunk"])])
    if not rows:
        return body
    r = rows[0]
    flat = " ".join(r["text"].split())
    quoted = " ".join(q["text"].split())
    i = flat.find(quoted[:60])
    shown = (md_escape(flat[:i]) + "**" + md_escape(flat[i:i + len(quoted)]) + "**" + md_escape(flat[i + len(quoted):])
             if i >= 0 else md_escape(flat))
    head = (f"**Quoted passage** · {pages_text(r['page_first'], r['page_last'], labels)}{matter_text(q)} · "
            f"chunk {int(q['chunk'])}"
            f"\n\n> {shown}")
    return head + "\n\n" + body


def show_answer(ctx: UIContext, answers: list | None, index: int | None) -> tuple[str, str, dict | None]:
    """(heatmap, evidence, result) of one earlier answer of the chat."""
    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        return answer_heatmap(ctx, None), "", None
    rec = answers[int(index)]
    _, labels = ctx.layout(rec["doc_id"])
    return (answer_heatmap(ctx, rec), answer_evidence_md(ctx, rec, labels),
            {k: rec[k] for k in ("answer", "evidence", "trace")})  # fmt: skip


def heatmap_pick(ctx: UIContext, answers: list | None, index: int | None, chunk: Any, gen: Any = None,
                 row: Any = None) -> str:
    """The passage behind a heatmap cell (or a chunk number typed in), with what that row (`row`,
    else the rows of generated chunk `gen`, else every row) gave it."""
    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        return "Ask a question first."
    rec = answers[int(index)]
    c = chunk_number(chunk)
    if c is None:
        return "Pick a chunk."
    notes = []
    rows, names = answer_rows(ctx, rec)
    for i, (r, name) in enumerate(zip(rows, names)):
        if row is not None and int(row) >= 0:
            if i != int(row):
                continue
        elif gen is not None and int(gen) >= 0 and int(r.get("gen_chunk", -1)) != int(gen):
            continue
        s = r.get("scores")
        bits = []
        if s is not None and c < len(s) and s[c] is not None:
            bits.append(f"relevance {float(s[c]):.3f}")
        if c in (r.get("topk") or []):
            w = r["weights"][r["topk"].index(c)]
            how = ("in the model's top-k" if "text" not in r
                   else "retrieved while the model read this quoted sentence")
            bits.append(f"{how}, fusion weight {plots.weight_text(float(w))}")
        if bits:
            notes.append(f"{name}: " + ", ".join(bits))
    text = passage_md(ctx, rec["doc_id"], c)
    return text + ("\n\n" + " · ".join(notes) if notes else "")


def page_view(ctx: UIContext, doc_id: str | None, chunk: Any) -> tuple[Any, str]:
    """(image, caption) of the page(s) a chunk lies on, the chunk highlighted: a PDF or EPUB page as
    printed (ingest.page.render_page, one image per page when the chunk runs over a page break), a
    text document's page typeset; (None, the passage in its context) when no page can be drawn."""
    from ingest.page import passage_context, render_page

    c = chunk_number(chunk)
    if not doc_id or c is None:
        return None, ""
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    n = lib.document(doc_id)["n_chunks"]
    if not 0 <= c < n:
        raise UIError(f"chunk {c} is not in this document (0 to {n - 1})")
    row = lib.chunks(doc_id, [c])[0]
    _, labels = ctx.layout(doc_id)
    pages = list(range(row["page_first"], row["page_last"] + 1))
    try:
        pngs = [render_page(lib, doc_id, pg, highlight=c) for pg in pages]
    except IngestError as e:  # no kept file (added before files were kept): the passage in its context
        ctxt = passage_context(lib, doc_id, c)
        return None, (f"*{md_escape(str(e))}.* In its context ({pages_text(pages[0], pages[-1], labels)}):\n\n> "
                      f"{md_escape(' '.join(ctxt['before'].split()))} **{md_escape(' '.join(ctxt['text'].split()))}** "
                      f"{md_escape(' '.join(ctxt['after'].split()))}")
    return _stack_png(pngs), (f"Chunk {c} highlighted on {pages_text(pages[0], pages[-1], labels)}"
                             + (" (it runs over the page break)" if len(pages) > 1 else ""))


def _stack_png(pngs: list[bytes]) -> Any:
    """PNG pages one above the other, as a PIL image (what gr.Image shows)."""
    import io

    from PIL import Image

    imgs = [Image.open(io.BytesIO(b)).convert("RGB") for b in pngs]
    if len(imgs) == 1:
        return imgs[0]
    out = Image.new("RGB", (max(i.width for i in imgs), sum(i.height for i in imgs) + 8 * (len(imgs) - 1)), "white")
    y = 0
    for im in imgs:
        out.paste(im, (0, y))
        y += im.height + 8
    return out


def conversation_questions(answers: list | None, doc_id: str) -> list[int]:
    """The library's ids of this chat's questions about `doc_id`: its answers' and their masked
    re-answers' (Mask and regenerate), in the order asked."""
    ids = [i for a in answers or [] if a.get("doc_id") == doc_id
           for i in (a.get("question_id"), *a.get("masked_questions", ())) if i is not None]
    return sorted(ids)


def export_conversation(ctx: UIContext, doc_id: str | None, answers: list | None = None) -> str:
    """The document's questions and latest summary as a Markdown file (qa.export); its path.
    `answers` (the chat's records): only this conversation's questions (`conversation_questions`);
    None: every question asked of the document, in any session."""
    from qa.export import export_file

    if doc_id == ALL_DOCS:
        raise UIError("pick one document to export its conversation")
    doc_id = ready(ctx, doc_id)
    questions = None if answers is None else conversation_questions(answers, doc_id)
    if questions == []:
        raise UIError("this conversation has no question about this document yet: ask one first")
    return str(export_file(ctx.library, doc_id, ctx.upload_root / "exports", model_fp=ctx.fingerprint(),
                           questions=questions))


def mask_regenerate(
    ctx: UIContext, answers: list | None, index: int | None, chunks: Any, max_new_tokens: int = 64
) -> tuple[str, str, str, dict | None, list]:
    """Mask and regenerate: ask the picked answer's question again, of the pages it read (spoiler-safe:
    before the same page), with `chunks` ("12" or "12,40", or a number) barred from retrieval
    (qa.ask.ask's `mask`). Returns (the unmasked answer,
    the new answer, the new evidence with each passage's weight and causal effect, the new result
    JSON, the chat's records with the re-answer's question noted in the picked one's
    "masked_questions", for the conversation's export): Markdown for the two answers side by side."""
    from qa.ask import ask, parse_mask

    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        raise UIError("ask a question first, then pick the chunk to mask")
    if chunks is None or str(chunks).strip() == "":
        raise UIError("type the chunk number to mask (click a heatmap cell to fill it in), e.g. 12 or 12,40")
    if isinstance(chunks, float) and chunks.is_integer():
        chunks = int(chunks)
    mask = parse_mask(str(chunks))
    rec = answers[int(index)]
    doc_id = ready(ctx, rec["doc_id"])
    n_new = max(1, min(int(max_new_tokens or 64), MAX_NEW_TOKENS))
    try:
        out = ask(ctx.library, ctx.engine(), doc_id, rec["question"], max_new_tokens=n_new, mask=mask,
                  before_page=rec.get("before_page"))
    except NotPrefilled as e:
        raise UIError(not_prefilled_message(ctx, doc_id)) from e
    _, labels = ctx.layout(doc_id)
    masked = ", ".join(str(c) for c in out["masked"])
    before = out["unmasked"]
    before_md = "**Before** (nothing masked)\n\n" + answer_md(before, labels)
    after_md = f"**After** (chunk{'s' if len(out['masked']) > 1 else ''} {masked} masked)\n\n" + answer_md(out, labels)
    ev = evidence_md(out["evidence"], labels, title=f"Evidence with chunk {masked} masked")
    noted = dict(rec, masked_questions=[*rec.get("masked_questions", ()), out["question_id"]])
    answers = [noted if i == int(index) else a for i, a in enumerate(answers)]
    return before_md, after_md, ev, {k: out[k] for k in ("answer", "evidence", "trace")}, answers


# ---------------------------------------------------------------------------------------------
# the tab
# ---------------------------------------------------------------------------------------------


@dataclass
class AskTab:
    """The Ask tab's components; `answers` holds the chat's answer records, `pending_q` the question
    between the instant user turn and the queued bot turn."""

    answers: gr.State
    pending_q: gr.State
    doc: gr.Dropdown
    max_tokens: gr.Slider
    before_in: gr.Number
    chat: gr.Chatbot
    question: gr.Textbox
    send_btn: gr.Button
    stop_btn: gr.Button
    answer_pick: gr.Dropdown
    heatmap: gr.HTML
    pick_chunk: gr.Textbox
    pick_btn: gr.Button
    mask_in: gr.Textbox
    mask_btn: gr.Button
    picked: gr.Markdown
    page_caption: gr.Markdown
    page_img: gr.Image
    mask_before: gr.Markdown
    mask_after: gr.Markdown
    mask_evidence: gr.Markdown
    evidence: gr.Markdown
    export_chat_btn: gr.Button
    export_btn: gr.Button
    export_file: gr.File
    ask_json: gr.JSON


def layout(answers: gr.State, pending_q: gr.State) -> AskTab:
    """Build the tab's components (inside the app's `gr.Tabs`) around the chat's states."""
    with gr.Tab("Ask", id="ask"):
        with gr.Row():
            doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-ask-doc")
            max_tokens = gr.Slider(8, MAX_NEW_TOKENS, value=64, step=8, label="Longest answer (tokens)")
            before_in = gr.Number(label="Read only before page (spoiler-safe; 0 = all)", precision=0,
                                  minimum=0, value=None, scale=1, elem_id="drt-before-page")
        chat = gr.Chatbot(
            label="Chat about the document", height=480, buttons=["copy", "copy_all"], autoscroll=False,
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
            "chunk along the pages; colour = relevance score, outlined = the model's top-k (each fused with "
            "its weight, which can be near 0). For a quoted answer, then one row per quoted sentence: what the "
            "model retrieved while it read that sentence (colour = fusion weight). Click a cell to read the passage.",
            elem_classes="drt-small",
        )
        answer_pick = gr.Dropdown(label="Answer", choices=[], elem_id="drt-answer-pick")
        heatmap = gr.HTML(
            plots.note("Ask a question: the retrieval heatmap of the answer appears here."),
            css_template=plots.CSS, js_on_load=plots.CLICK_JS, elem_id="drt-heatmap",
        )  # fmt: skip
        with gr.Row():
            pick_chunk = gr.Textbox(label="…or type a chunk number", placeholder="e.g. 12", max_lines=1, scale=1,
                                    elem_id="drt-pick-chunk")  # fmt: skip
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
        with gr.Row():  # this chat's questions, or every question asked of this document, in any session
            with gr.Column(scale=1):
                export_chat_btn = gr.Button("Export this conversation (Markdown)", elem_id="drt-export-chat")
                export_btn = gr.Button("Export all questions on this document (Markdown)", elem_id="drt-export")
            export_file = gr.File(label="Markdown", interactive=False, scale=2, elem_id="drt-export-file")
        with gr.Accordion("Raw result (answer, evidence, trace as JSON)", open=False):
            ask_json = gr.JSON()
    return AskTab(answers, pending_q, doc, max_tokens, before_in, chat, question, send_btn, stop_btn,
                  answer_pick, heatmap, pick_chunk, pick_btn, mask_in, mask_btn, picked, page_caption,
                  page_img, mask_before, mask_after, mask_evidence, evidence, export_chat_btn, export_btn,
                  export_file, ask_json)


# The chat does not follow a long answer to its end (autoscroll off): once the question is asked and
# again once it is answered, the last question is put at the chat's top, so that the answer's start
# (the quote) shows under it rather than its closing lines, and the chat's buttons cover no message.
SHOW_LAST_QUESTION_JS = """() => { setTimeout(() => {
  const wrap = document.querySelector('#drt-chat .bubble-wrap');
  const rows = wrap ? wrap.querySelectorAll('.message-row.user-row') : [];
  if (!rows.length) return;
  const row = rows[rows.length - 1];
  const top = row.getBoundingClientRect().top - wrap.getBoundingClientRect().top + wrap.scrollTop;
  wrap.scrollTo({top: Math.max(0, top - 44)});
}, 60); }"""


def wire(ctx: UIContext, tab: AskTab) -> None:
    """The tab's events."""
    _wire_chat(ctx, tab)
    _wire_answer(ctx, tab)


def _wire_chat(ctx: UIContext, tab: AskTab) -> None:
    """A chat turn (Ask, Enter): the question at once, then the answer through the model's queue; Stop."""

    @user_facing
    def user_turn(doc_id: str | None, q: str, history: list, request: gr.Request) -> tuple:
        return chat_user(ctx, doc_id, q, history, session=session_of(request))

    def bot_turn(doc_id, q, history, answers_, n_tokens, before, request: gr.Request) -> Iterator[tuple]:
        skip = gr.skip()
        if not q:  # user_turn already said what is missing
            yield (skip,) * 6
            return
        try:
            yield from chat_bot(ctx, doc_id, q, history, answers_, int(n_tokens), session=session_of(request),
                                before_page=before_page_of(before))
        except Exception as e:  # said in the chat, in place
            yield (list(history or []) + [{"role": "assistant", "content": in_place(error_text(e))}],
                   skip, skip, skip, skip, skip)

    bot_outputs = [tab.chat, tab.answers, tab.answer_pick, tab.heatmap, tab.evidence, tab.ask_json]
    user_inputs, user_outputs = [tab.doc, tab.question, tab.chat], [tab.question, tab.chat, tab.pending_q]
    bot_inputs = [tab.doc, tab.pending_q, tab.chat, tab.answers, tab.max_tokens, tab.before_in]
    for trigger in (tab.send_btn.click, tab.question.submit):
        trigger(user_turn, user_inputs, user_outputs, queue=False, **PRIVATE).success(
            None, None, None, js=SHOW_LAST_QUESTION_JS, queue=False,
        ).success(
            bot_turn, bot_inputs, bot_outputs, show_progress="hidden", **MODEL, **PRIVATE,
        ).then(None, None, None, js=SHOW_LAST_QUESTION_JS, queue=False)  # fmt: skip

    def stop(request: gr.Request) -> None:
        cancel_job(ctx, session_of(request), "ask")

    tab.stop_btn.click(stop, None, None, queue=False, **PRIVATE)


def _wire_answer(ctx: UIContext, tab: AskTab) -> None:
    """The picked answer: its heatmap and evidence, a cell's passage and page, the export, masking."""

    @user_facing
    def show(answers_, index) -> tuple:
        return show_answer(ctx, answers_, index)

    picked_answer = [tab.answers, tab.answer_pick]
    tab.answer_pick.change(show, picked_answer, [tab.heatmap, tab.evidence, tab.ask_json], **PRIVATE)

    @user_facing
    def cell(answers_, index, evt: gr.EventData) -> tuple:
        data = getattr(evt, "_data", None) or {}
        c = data.get("chunk")
        return (heatmap_pick(ctx, answers_, index, c, data.get("gen"), data.get("row")), c,
                gr.skip() if c is None else str(c))

    tab.heatmap.cell_click(cell, picked_answer, [tab.picked, tab.pick_chunk, tab.mask_in], **PRIVATE)

    def show_page(doc_id, answers_, index, chunk) -> tuple:
        try:  # the picked answer's document (with "All documents", each answer has its own)
            if answers_ and index is not None and 0 <= int(index) < len(answers_):
                doc_id = answers_[int(index)]["doc_id"]
            if doc_id == ALL_DOCS:
                return "Ask a question first.", None
            return page_view(ctx, doc_id, chunk)[::-1]
        except Exception as e:
            return in_place(error_text(e)), None

    page_outputs = [tab.page_caption, tab.page_img]
    tab.pick_chunk.change(show_page, [tab.doc, *picked_answer, tab.pick_chunk], page_outputs, **PRIVATE)

    def export(doc_id, answers_=None) -> tuple:
        try:
            return export_conversation(ctx, doc_id, answers_), ""
        except Exception as e:
            return None, in_place(error_text(e))

    tab.export_chat_btn.click(export, [tab.doc, tab.answers], [tab.export_file, tab.page_caption], **PRIVATE)
    tab.export_btn.click(export, [tab.doc], [tab.export_file, tab.page_caption], **PRIVATE)

    @user_facing
    def pick(answers_, index, chunk) -> str:
        return heatmap_pick(ctx, answers_, index, chunk)

    tab.pick_btn.click(pick, [*picked_answer, tab.pick_chunk], tab.picked, **PRIVATE)

    @user_facing
    def mask_and_regenerate(answers_, index, chunks, n_tokens) -> tuple:
        return mask_regenerate(ctx, answers_, index, chunks, int(n_tokens))

    tab.mask_btn.click(mask_and_regenerate, [*picked_answer, tab.mask_in, tab.max_tokens],
                       [tab.mask_before, tab.mask_after, tab.mask_evidence, tab.ask_json, tab.answers],
                       **MODEL, **PRIVATE)  # fmt: skip
    def warm(doc_id: str | None) -> None:  # (no output: the event has none)
        warm_document(ctx, doc_id)

    # another document: a new chat, and its first question's statistics built meanwhile
    tab.doc.change(lambda: ([], [], gr.update(choices=[], value=None)), None, [tab.chat, *picked_answer],
                   **PRIVATE).then(warm, [tab.doc], None, show_progress="hidden", **MODEL, **PRIVATE)  # fmt: skip


def warm_document(ctx: UIContext, doc_id: str | None) -> bool:
    """The picked document's first question made as fast as the next (qa.ask.warm: its state, BM25
    index, reader statistics and words, in the model's queue). A document that is not ready, or
    "All documents", is left alone: the question says what is wrong. Whether it was warmed."""
    if not doc_id or doc_id == ALL_DOCS:
        return False
    try:
        from qa.ask import warm

        warm(ctx.library, ctx.engine(), doc_id)
        return True
    except Exception as e:  # a convenience: the question reports any real problem
        logger.info("could not warm %s: %s", doc_id, e)
        return False


def api(ctx: UIContext) -> None:
    """The API-only endpoint /ask (gradio_client)."""

    def ask(doc_id: str, question: str, max_new_tokens: int = 64,
            request: gr.Request = None) -> Iterator[dict]:  # fmt: skip
        """Ask a question about a prefilled document; streams {"answer", "done": false} updates,
        then {"answer", "evidence", "trace", "done": true}."""
        yield from user_facing(ask_stream)(
            ctx, doc_id, question, max_new_tokens=max_new_tokens, session=session_of(request)
        )

    gr.api(ask, api_name="ask", **MODEL)
