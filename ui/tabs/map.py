"""The Document map tab: the causal dependency map recorded at prefill (x: the querying chunk,
y: the chunk it retrieved, on page axes), the strongest long links named by what they join, and
both passages of a clicked link.

Handlers first (plain functions, testable without a browser), then the tab's layout (`layout`),
its events (`wire`) and its API endpoint (`api`: /trace). The map comes from
`qa.summary.dependency_map`, the same code as `drt-reader trace`.
"""

from dataclasses import dataclass
from typing import Any

import gradio as gr

from ingest.errors import NotPrefilled

from .. import plots
from ..context import (
    MODEL,
    PRIVATE,
    UIContext,
    UIError,
    chunk_number,
    error_text,
    in_place,
    not_prefilled_message,
    ready,
    user_facing,
)
from ..render import md_escape, weight_text
from .library import passage_md


def doc_map(ctx: UIContext, doc_id: str | None) -> list[dict]:
    """API: the document's dependency map (what each chunk retrieved at prefill)."""
    from qa.summary import dependency_map

    doc_id = ready(ctx, doc_id)
    try:
        return dependency_map(ctx.library, ctx.engine(), doc_id)
    except NotPrefilled as e:
        raise UIError(not_prefilled_message(ctx, doc_id)) from e


def doc_map_view(ctx: UIContext, doc_id: str | None) -> tuple[str, str]:
    """(map SVG, Markdown list of the strongest long-range links named by what they join) for the
    Document map tab; licence, contents and index pages are left out of both."""
    from ingest.boilerplate import chunk_matter
    from qa.outline import document_statements, named_links

    dep = doc_map(ctx, doc_id)
    doc_id = ctx.library.resolve(doc_id)  # type: ignore[arg-type]
    chunk_pages, labels = ctx.layout(doc_id)
    chunks = ctx.library.chunks(doc_id)
    skip = set(chunk_matter(ctx.library, doc_id, chunks))
    shown = [{**r, "retrieved": [j for j in r["retrieved"] if int(j) not in skip],
              "weights": [w for j, w in zip(r["retrieved"], r["weights"]) if int(j) not in skip]}
             for r in dep if int(r.get("chunk", -1)) not in skip]
    svg = plots.dependency_map_svg(shown, chunk_pages, labels)
    links = plots.dependency_links(shown, len(chunk_pages))
    if not links:
        return svg, "No links to show."
    n_pages = ctx.library.document(doc_id)["n_pages"]
    lines = [f"{len(chunk_pages):,} chunks on {n_pages} pages, {len(links):,} retrieval links"
             + (f" ({len(skip)} chunks on licence, contents or index pages left out)" if skip else "")
             + ". Click a dot (or type two chunk numbers) to read both passages."]
    strong = named_links(dep, skip, document_statements(ctx.library, doc_id, chunks), chunks, labels)
    if strong:
        lines.append("\nStrongest long links (a chunk retrieving one more than 8 chunks back):")
        for ln in strong[:8]:
            lines.append(f"- chunk {ln['source']} ({md_escape(ln['source_is'])}) → chunk {ln['target']} "
                         f"({md_escape(ln['target_is'])}), weight {ln['weight']:.2f}")
    return svg, "\n".join(lines)


def doc_map_pick(ctx: UIContext, doc_id: str | None, src: Any, dst: Any = None) -> str:
    """Both passages of a link (querying chunk src, retrieved chunk dst); without dst, src and
    the chunks it retrieved."""
    s, d = chunk_number(src), chunk_number(dst)
    if not doc_id or s is None:
        return "Pick a document and a chunk."
    doc_id = ctx.library.resolve(doc_id)
    parts = [passage_md(ctx, doc_id, s, heading="Querying chunk")]
    if d is not None:
        parts.append(passage_md(ctx, doc_id, d, heading="Retrieved chunk"))
        return "\n\n---\n\n".join(parts)
    dep = doc_map(ctx, doc_id)
    row = next((r for r in dep if int(r.get("chunk", -1)) == s), None)
    if not row or not row.get("retrieved"):
        parts.append("It retrieved nothing (the first chunks of a document have nothing to retrieve).")
        return "\n\n".join(parts)
    pairs = sorted(zip(row["retrieved"], row["weights"]), key=lambda t: -t[1])
    for j, w in pairs[:4]:
        parts.append(passage_md(ctx, doc_id, int(j), heading=f"Retrieved (weight {weight_text(w)}): chunk"))
    return "\n\n---\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the tab
# ---------------------------------------------------------------------------------------------


@dataclass
class MapTab:
    """The Document map tab's components."""

    doc: gr.Dropdown
    button: gr.Button
    depmap: gr.HTML
    info: gr.Markdown
    src: gr.Textbox
    dst: gr.Textbox
    pick_btn: gr.Button
    picked: gr.Markdown


def layout() -> MapTab:
    """Build the tab's components (inside the app's `gr.Tabs`)."""
    with gr.Tab("Document map", id="map"):
        gr.Markdown(
            "While the document was read (prefill), every chunk retrieved a few earlier chunks. "
            "x: the querying chunk, y: the chunk it retrieved, both on page axes; size and colour "
            "= fusion weight. A proof that leans on a definition shows as a dot far below the "
            "diagonal.",
            elem_classes="drt-small",
        )
        with gr.Row():
            doc = gr.Dropdown(label="Document (prefilled)", choices=[], scale=3, elem_id="drt-map-doc")
            button = gr.Button("Show map", variant="primary", scale=1, elem_id="drt-show-map")
        with gr.Row():
            with gr.Column(scale=3):
                depmap = gr.HTML(
                    plots.note("Pick a document and press Show map."),
                    css_template=plots.CSS, js_on_load=plots.CLICK_JS, elem_id="drt-depmap",
                )  # fmt: skip
            with gr.Column(scale=2):
                info = gr.Markdown()
                with gr.Row():
                    src = gr.Textbox(label="Querying chunk", placeholder="e.g. 12", max_lines=1, elem_id="drt-map-src")
                    dst = gr.Textbox(label="Retrieved chunk (optional)", placeholder="empty: the chunks it retrieved",
                                     max_lines=1, elem_id="drt-map-dst")
                pick_btn = gr.Button("Show passages")
                picked = gr.Markdown(elem_id="drt-map-picked")
    return MapTab(doc, button, depmap, info, src, dst, pick_btn, picked)


def wire(ctx: UIContext, tab: MapTab) -> None:
    """The tab's events: Show map, a clicked link, two typed chunk numbers."""

    def show_map(doc_id) -> tuple:
        try:
            return doc_map_view(ctx, doc_id)
        except Exception as e:
            return gr.skip(), in_place(error_text(e))

    tab.button.click(show_map, [tab.doc], [tab.depmap, tab.info], **MODEL, **PRIVATE)

    @user_facing
    def link(doc_id, evt: gr.EventData) -> tuple:
        data = getattr(evt, "_data", None) or {}
        s, d = data.get("src"), data.get("dst")
        return doc_map_pick(ctx, doc_id, s, d), s, d

    tab.depmap.link_click(link, [tab.doc], [tab.picked, tab.src, tab.dst], **MODEL, **PRIVATE)

    @user_facing
    def map_pick(doc_id, s, d) -> str:
        return doc_map_pick(ctx, doc_id, s, d)

    tab.pick_btn.click(map_pick, [tab.doc, tab.src, tab.dst], tab.picked, **MODEL, **PRIVATE)


def api(ctx: UIContext) -> None:
    """The API-only endpoint /trace (gradio_client)."""

    def trace(doc_id: str) -> dict:
        """The document's dependency map: for each chunk, what it retrieved and the weights."""
        dep = user_facing(doc_map)(ctx, doc_id)
        return {"doc_id": ctx.library.resolve(doc_id), "chunks": dep}

    gr.api(trace, api_name="trace", **MODEL)
