"""The Outline tab: the document's parts; for papers every definition, lemma, proposition and
theorem with the later chunks that used it; for books the people and places with the sentence that
introduces each; and what one chunk relied on.

Handlers first (plain functions, testable without a browser), then the tab's layout (`layout`),
its events (`wire`) and its API endpoint (`api`: /outline). The outline comes from `qa.outline`,
the same code as `drt-reader outline`.
"""

from dataclasses import dataclass
from typing import Any

import gradio as gr

from .. import plots
from ..context import MODEL, PRIVATE, UIContext, UIError, chunk_number, error_text, in_place, user_facing
from ..render import cut_title, md_escape, quote, weight_text
from .library import passage_md
from .map import doc_map


def outline_doc(ctx: UIContext, doc_id: str | None) -> dict:
    """API: the document's outline (qa.outline.build): parts, statements and their users,
    people and places with where they are introduced, the strongest long links."""
    from qa.outline import build

    dep = doc_map(ctx, doc_id)
    return build(ctx.library, ctx.library.resolve(doc_id), dep)  # type: ignore[arg-type]


def outline_view(ctx: UIContext, doc_id: str | None, o: dict | None = None) -> str:
    """The Outline tab's Markdown (of the outline `o` when given)."""
    from qa.outline import page_ranges

    o = o if o is not None else outline_doc(ctx, doc_id)
    _, labels = ctx.layout(o["doc_id"])
    source = next((p["source"] for p in o["parts"] if p["number"]), o["parts"][0]["source"] if o["parts"] else "-")
    out = [f"**{len(o['parts'])} parts** ({source}): "  # where they come from, not the front matter's source
           + "; ".join(f"{p['number']}. {md_escape(cut_title(p['title']))} "
                       f"(p. {plots.page_label(p['page_first'], labels)})" for p in o["parts"][:40])
           + (" …" if len(o["parts"]) > 40 else "")]
    if o["statements"]:
        out.append(f"\n### Statements ({len(o['statements'])})\n\n*Used by: the later chunks that retrieved the "
                   "statement while the document was read (strongest first). Type one in “What did a chunk rely "
                   "on?” below to see what it retrieved.*\n")
        out.append("| statement | page | chunk | used by |\n|---|---|---|---|")
        for st in o["statements"]:
            used = ", ".join(str(u["chunk"]) for u in st["used_by"][:6]) or "—"
            if len(st["used_by"]) > 6:
                used += f" (+{len(st['used_by']) - 6})"
            name = f"{st['kind']} {st['label'] or st['number']}" + (f" ({st['title']})" if st.get("title") else "") \
                + (" (restated)" if st.get("restates") is not None else "")
            page = plots.page_label(st["page"], labels)  # as the parts' pages: "7 (3)"
            out.append(f"| {md_escape(name)} | {md_escape(page)} | {st['chunks'][0]} | {used} |")
    for kind, head in (("person", "People"), ("place", "Places"), ("name", "Other names")):
        got = [n for n in o["names"] if n["kind"] == kind]
        if not got:
            continue
        out.append(f"\n### {head}\n\n*By how often they are named, each once under the forms the book "
                   "uses, with the sentence that introduces each (its first mention) and the pages where it "
                   "recurs.*\n")
        for n in got:
            intro = n["introduced"]
            aka = f"; also {md_escape(', '.join(n['aliases'][:5]))}" if n.get("aliases") else ""
            out.append(f"- **{md_escape(n['name'])}** ({n['mentions']} mentions{aka}): introduced on "
                       f"p. {plots.page_label(intro['page'], labels)}, chunk {intro['chunk']}  \n"
                       f"  {quote(intro['text'], 300)[2:]}  \n  pages {page_ranges(n['pages'])}")
    if not o["statements"] and not o["names"]:
        out.append("\nNo statements (definitions, lemmas, theorems) and no frequent names found.")
    return "\n".join(out)


def outline_picture(ctx: UIContext, doc_id: str | None, o: dict | None = None) -> str:
    """The outline's picture (qa.pictures, as `drt-reader outline --plot`): who appears where in a
    book, the statements and what each relies on in a paper; "" when there is nothing to draw."""
    from qa.pictures import picture

    o = o if o is not None else outline_doc(ctx, doc_id)
    svg = picture(o)
    return f'<div style="overflow-x:auto">{svg}</div>' if svg else ""


def relied_on_view(ctx: UIContext, doc_id: str | None, chunk: Any) -> str:
    """What chunk `chunk` retrieved while it was read, with the statement each retrieved chunk is part of."""
    from qa.outline import document_statements, relied_on

    c = chunk_number(chunk)
    if not doc_id or c is None:
        return "Pick a document and type a chunk number."
    doc_id = ctx.library.resolve(doc_id)
    n = ctx.library.document(doc_id)["n_chunks"]
    if not 0 <= c < n:
        raise UIError(f"chunk {c} is not in this document (0 to {n - 1})")
    rows = relied_on(document_statements(ctx.library, doc_id), doc_map(ctx, doc_id), c)
    parts = [passage_md(ctx, doc_id, c, heading="Chunk")]
    if not rows:
        parts.append("It retrieved nothing (the first chunks of a document have nothing to retrieve).")
    for r in sorted(rows, key=lambda r: -r["weight"]):
        what = f" — {r['statement']}" if r["statement"] else ""
        heading = f"Relied on (weight {weight_text(r['weight'])}{what}): chunk"
        parts.append(passage_md(ctx, doc_id, r["chunk"], heading=heading))
    return "\n\n---\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the tab
# ---------------------------------------------------------------------------------------------


@dataclass
class OutlineTab:
    """The Outline tab's components."""

    doc: gr.Dropdown
    button: gr.Button
    outline_md: gr.Markdown
    picture: gr.HTML
    chunk: gr.Textbox
    chunk_btn: gr.Button
    relied_md: gr.Markdown


def layout() -> OutlineTab:
    """Build the tab's components (inside the app's `gr.Tabs`)."""
    with gr.Tab("Outline", id="outline"):
        gr.Markdown(
            "The document's parts; in papers, every definition, lemma, proposition and theorem with "
            "the later passages that retrieved it while the document was read; in books, the people "
            "and places with the sentence that introduces each.",
            elem_classes="drt-small",
        )
        with gr.Row():
            doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-out-doc")
            button = gr.Button("Show outline", variant="primary", scale=1, elem_id="drt-show-outline")
        outline_md = gr.Markdown(elem_id="drt-outline")
        picture = gr.HTML(elem_id="drt-outline-picture")
        with gr.Row():
            chunk = gr.Textbox(label="What did a chunk rely on? (chunk number)", placeholder="e.g. 12", max_lines=1,
                               scale=3, elem_id="drt-out-chunk")
            chunk_btn = gr.Button("Show", scale=1, elem_id="drt-out-chunk-btn")
        relied_md = gr.Markdown(elem_id="drt-relied")
    return OutlineTab(doc, button, outline_md, picture, chunk, chunk_btn, relied_md)


def wire(ctx: UIContext, tab: OutlineTab) -> None:
    """The tab's events: Show outline, what a chunk relied on."""

    def show_outline(doc_id) -> tuple[str, str]:
        try:
            o = outline_doc(ctx, doc_id)
            return outline_view(ctx, doc_id, o), outline_picture(ctx, doc_id, o)
        except Exception as e:
            return in_place(error_text(e)), ""

    tab.button.click(show_outline, [tab.doc], [tab.outline_md, tab.picture], **MODEL, **PRIVATE)

    def show_relied(doc_id, chunk) -> str:
        try:
            return relied_on_view(ctx, doc_id, chunk)
        except Exception as e:
            return in_place(error_text(e))

    tab.chunk_btn.click(show_relied, [tab.doc, tab.chunk], [tab.relied_md], **MODEL, **PRIVATE)


def api(ctx: UIContext) -> None:
    """The API-only endpoint /outline (gradio_client)."""

    def outline(doc_id: str) -> dict:
        """The document's outline: parts, statements and what used them, people and places."""
        return user_facing(outline_doc)(ctx, doc_id)

    gr.api(outline, api_name="outline", **MODEL)
