"""The Gradio 6 app: the tabs assembled, the events that cross them, the hardened launch.

    ctx = UIContext(home, model, max_file_bytes="50mb")
    demo = build_app(ctx)
    demo.launch(**launch_kwargs(ctx, host="127.0.0.1", port=7860))

Each tab is a module of `ui.tabs` with its layout, its handlers and its events: Library (upload
with staged progress, Cancel, Resume, Delete), Ask (streamed chat, retrieval heatmap, evidence with
each passage's causal effect, Mask and regenerate: the answer before and after barring chunks from
retrieval, side by side), Summary (extractive / abstractive), Outline (parts, statements, people
and places), Document map (dependency map from prefill). `ui.context` holds what they share,
`ui.jobs` the worker threads and progress, `ui.render` the Markdown, `ui.plots` the drawings.

Safe defaults (docs/reliability.md §1): bound to 127.0.0.1, `max_file_size`, the queue's direct
REST routes closed (`api_open=False`), monitoring off, analytics off, upload cache cleaned
(`delete_cache`, and each upload is deleted once stored), the data directory and the model
blocked from the file route, no share link, no SSR, no MCP server. Every event that runs the model
shares one worker (`concurrency_id="model"`, limit 1): users queue.

API (gradio_client), named endpoints: /ingest (upload a file), /documents, /ask (streams
{"answer", "done"} then {"answer", "evidence", "trace", "done": true}), /summarize, /outline,
/trace, /passage. UI-only events are private.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from .context import UIContext  # noqa: E402
from .tabs import ask, library, outline, summary  # noqa: E402
from .tabs import map as doc_map  # noqa: E402

APP_CSS = """
#drt-status { min-height: 9em; }
#drt-status p { margin: 0.1em 0; }
.drt-small { font-size: 0.9em; color: var(--body-text-color-subdued); }
"""

INTRO = (
    "**drt-reader** reads long documents with a retrieval transformer and shows what it retrieved: "
    "every answer comes with the document chunks the model actually looked at, on a page axis."
)


def build_app(ctx: UIContext) -> gr.Blocks:
    """The app for one library and one model (see the module docstring): the tabs in order, then
    their events; every change to the library refreshes the other tabs' document menus."""
    with gr.Blocks(title="drt-reader", analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        gr.Markdown(INTRO)
        answers = gr.State([])  # the Ask tab's answer records
        pending_q = gr.State("")  # the Ask tab's question, between the user turn and the bot turn

        with gr.Tabs():
            library_tab = library.layout(ctx)
            ask_tab = ask.layout(answers, pending_q)
            summary_tab = summary.layout()
            outline_tab = outline.layout()
            map_tab = doc_map.layout()

        menus = [ask_tab.doc, summary_tab.doc, map_tab.doc, outline_tab.doc]  # the Ask tab's first
        library.wire(ctx, demo, library_tab, menus)
        ask.wire(ctx, ask_tab)
        summary.wire(ctx, summary_tab)
        outline.wire(ctx, outline_tab)
        doc_map.wire(ctx, map_tab)
        for tab in (library, ask, summary, doc_map, outline):
            tab.api(ctx)
    return demo


def queue_app(demo: gr.Blocks) -> gr.Blocks:
    """The queue: its direct REST routes closed, one job per event by default, a bounded queue."""
    return demo.queue(api_open=False, default_concurrency_limit=1, max_size=32)


def launch_kwargs(
    ctx: UIContext, *, host: str = "127.0.0.1", port: int | None = 7860, prevent_thread_lock: bool = False
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


def launch(ctx: UIContext, *, host: str = "127.0.0.1", port: int | None = 7860, prevent_thread_lock: bool = False):
    """Build, queue and launch the app; returns (demo, local_url)."""
    demo = queue_app(build_app(ctx))
    _, url, _ = demo.launch(**launch_kwargs(ctx, host=host, port=port, prevent_thread_lock=prevent_thread_lock))
    return demo, url
