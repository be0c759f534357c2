"""Drive the web UI in headless Chromium (Playwright) and save a screenshot of each panel.

    python -m ui.screenshots [--pdf tests/assets/geotopo-pp1-10.pdf] [--model checkpoints/drt-tiny]
                             [--out docs/screenshots] [--question "..."]

It starts the app in-process on a free port with a temporary library, uploads the PDF, waits for
the staged progress to reach "Ready" (progress.png while prefilling, when it is slow enough to
catch), asks a question (the answer streams into the chat), clicks a
cell of the retrieval heatmap, makes an extractive summary, opens the document map and the outline, saving
library.png, ask.png, summary.png, map.png and outline.png. The browser test (tests/ui/test_browser.py) runs
the same `walk_through`.

Uses Debian's chromium (/usr/bin/chromium; `tests/ui/install_browser.sh` installs it) through the
`playwright` package: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("DRT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
TIMEOUT_MS = int(os.environ.get("DRT_BROWSER_TIMEOUT_MS", "240000"))

# records every distinct text of the last chat message, to see the answer stream in
_WATCH_CHAT = """
() => {
  window.__drtTexts = [];
  const root = document.querySelector('#drt-chat');
  // the whole chat's text at each change: an answer and its evidence note can land in one
  // batch of mutations, so watching only the last message could miss the note
  const seen = () => {
    const text = root.innerText;
    const arr = window.__drtTexts;
    if (text && arr[arr.length - 1] !== text) arr.push(text);
  };
  new MutationObserver(seen).observe(root, {subtree: true, childList: true, characterData: true});
}
"""


_LONG_LINK = """
() => {
  const ds = [...document.querySelectorAll('#drt-depmap svg circle[data-src]')].map(c => c.dataset);
  const ws = ds.map(d => Number(d.w)).sort((a, b) => b - a);
  const cut = ws[Math.floor(ws.length / 10)] || 0;
  let best = ds[ds.length - 1];
  for (const d of ds) {
    if (Number(d.w) >= cut && (d.src - d.dst) > (best.src - best.dst)) best = d;
  }
  return [Number(best.src), Number(best.dst)];
}
"""


def browser_unavailable() -> str | None:
    """Why the browser cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    if not (Path(CHROMIUM).exists() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (tests/ui/install_browser.sh installs Debian's chromium)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class WalkResult:
    screenshots: dict[str, Path] = field(default_factory=dict)
    answer_texts: list[str] = field(default_factory=list)  # what the chat showed, in order
    heatmap_cells: int = 0
    picked_passage: str = ""
    summary: str = ""
    summary_rows: int = 0  # the summary heatmap's rows (one per sentence)
    summary_picked: str = ""  # a clicked summary heatmap cell: the passage, what its sentence gave it
    summary_caption: str = ""
    map_links: int = 0
    map_picked: str = ""
    outline: str = ""
    page_caption: str = ""
    relied: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    question_top: tuple | None = None  # the last question's top in the chat's view (pixels), and whether
    # the chat is scrolled to its end


_LAST_QUESTION_TOP = """() => {
  const wrap = document.querySelector('#drt-chat .bubble-wrap');
  const rows = wrap.querySelectorAll('.message-row.user-row');
  const top = rows[rows.length - 1].getBoundingClientRect().top - wrap.getBoundingClientRect().top;
  return [top, wrap.scrollTop + wrap.clientHeight >= wrap.scrollHeight - 2];
}"""


def walk_through(url: str, pdf: Path, out_dir: Path, question: str = "What is a topological space?") -> WalkResult:
    """Upload, ask, summarize, map: the whole UI, one screenshot per panel."""
    from playwright.sync_api import expect, sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    res = WalkResult()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(url)
            # Library: upload -> staged progress -> Ready
            t = time.monotonic()
            page.locator("#drt-upload input[type=file]").set_input_files(str(pdf))
            status = page.locator("#drt-status")
            try:  # best effort: a small document may finish before an ETA is shown
                expect(status).to_contain_text("ETA", timeout=min(TIMEOUT_MS, 120_000))
                _shot(page, out_dir / "progress.png", res, "progress")
            except AssertionError:
                pass
            expect(status).to_contain_text("Ready:")
            expect(page.locator("#drt-docs")).to_contain_text("ready")
            res.seconds["ingest"] = time.monotonic() - t
            _shot(page, out_dir / "library.png", res, "library")

            # Ask: streamed answer, heatmap, click a cell
            page.get_by_role("tab", name="Ask").click()
            expect(page.locator("#drt-ask-doc input")).not_to_have_value("")
            page.evaluate(_WATCH_CHAT)
            t = time.monotonic()
            page.locator("#drt-question textarea").fill(question)
            page.locator("#drt-send").click()
            heat = page.locator("#drt-heatmap svg rect[data-chunk]")
            expect(heat.first).to_be_visible()
            res.seconds["ask"] = time.monotonic() - t
            # the heatmap can render before the chat's last update (the evidence note) lands
            expect(page.locator("#drt-chat")).to_contain_text("Retrieved by the model:")
            res.answer_texts = page.evaluate("() => window.__drtTexts || []")
            # a second question: the chat then shows it at its top, the answer's start under it
            page.locator("#drt-question textarea").fill(question)
            page.locator("#drt-send").click()
            expect(page.locator("#drt-chat .message-row.bot-row").nth(1)).to_contain_text("Retrieved by the model:")
            page.wait_for_timeout(400)
            res.question_top = page.evaluate(_LAST_QUESTION_TOP)
            res.heatmap_cells = heat.count()
            # click the cell under the first top-k outline (the outline itself lets clicks through)
            marks = page.locator("#drt-heatmap svg rect.drt-topk")
            target = heat.first
            if marks.count():
                c = marks.first.get_attribute("data-mark")
                target = page.locator(f'#drt-heatmap svg rect[data-row="0"][data-chunk="{c}"]').first
            target.click()
            expect(page.locator("#drt-picked")).to_contain_text("Chunk")
            res.picked_passage = page.locator("#drt-picked").inner_text()
            expect(page.locator("#drt-evidence")).to_contain_text("Evidence")
            # the clicked passage's page, highlighted; the conversation exported
            expect(page.locator("#drt-page-caption")).to_contain_text("highlighted")
            expect(page.locator("#drt-page img")).to_be_visible()
            res.page_caption = page.locator("#drt-page-caption").inner_text()
            page.locator("#drt-export").click()
            expect(page.locator("#drt-export-file")).to_contain_text(".md")
            _shot(page, out_dir / "ask.png", res, "ask")

            # Summary (extractive)
            page.get_by_role("tab", name="Summary").click()
            expect(page.locator("#drt-sum-doc input")).not_to_have_value("")
            page.locator("#drt-summarize").click()
            expect(page.locator("#drt-summary")).to_contain_text("Extractive")
            expect(page.locator("#drt-sum-heatmap svg rect[data-chunk]").first).to_be_visible()
            res.summary = page.locator("#drt-summary").inner_text()
            plot = page.locator("#drt-sum-heatmap .drt-plot").first
            res.summary_rows = int(plot.get_attribute("data-rows") or 0)
            # click the cell under a sentence's first retrieved chunk: its passage and page
            marks = page.locator("#drt-sum-heatmap svg rect.drt-topk")
            cell = page.locator("#drt-sum-heatmap svg rect[data-chunk]").first
            if marks.count():
                r, c = marks.first.get_attribute("data-row"), marks.first.get_attribute("data-mark")
                cell = page.locator(f'#drt-sum-heatmap svg rect[data-row="{r}"][data-chunk="{c}"]').first
            cell.click()
            expect(page.locator("#drt-sum-picked")).to_contain_text("Chunk")
            expect(page.locator("#drt-sum-page-caption")).to_contain_text("highlighted")
            res.summary_picked = page.locator("#drt-sum-picked").inner_text()
            res.summary_caption = page.locator("#drt-sum-page-caption").inner_text()
            _shot(page, out_dir / "summary.png", res, "summary")

            # Document map: click the heaviest link
            page.get_by_role("tab", name="Document map").click()
            expect(page.locator("#drt-map-doc input")).not_to_have_value("")
            page.locator("#drt-show-map").click()
            dots = page.locator("#drt-depmap svg circle[data-src]")
            expect(dots.first).to_be_visible()
            res.map_links = dots.count()
            # click a long-range link: the longest among the 10% heaviest
            src, dst = page.evaluate(_LONG_LINK)
            # on a long document the dots overlap: the click goes to the one picked, as a tap on it would
            page.locator(f'#drt-depmap svg circle[data-src="{src}"][data-dst="{dst}"]').first.dispatch_event("click")
            expect(page.locator("#drt-map-picked")).to_contain_text("Retrieved chunk")
            res.map_picked = page.locator("#drt-map-picked").inner_text()
            _shot(page, out_dir / "map.png", res, "map")

            # Outline: the parts, statements or names; then what the picked link's chunk relied on
            page.get_by_role("tab", name="Outline").click()
            expect(page.locator("#drt-out-doc input")).not_to_have_value("")
            page.locator("#drt-show-outline").click()
            expect(page.locator("#drt-outline")).to_contain_text("parts")
            res.outline = page.locator("#drt-outline").inner_text()
            page.locator("#drt-out-chunk input").fill(str(src))
            page.locator("#drt-out-chunk-btn").click()
            expect(page.locator("#drt-relied")).to_contain_text(f"Chunk {src}")
            res.relied = page.locator("#drt-relied").inner_text()
            _shot(page, out_dir / "outline.png", res, "outline")
        finally:
            browser.close()
    return res


def _shot(page, path: Path, res: WalkResult, name: str) -> None:
    page.wait_for_timeout(300)  # let the last render settle
    page.screenshot(path=str(path), full_page=True)
    res.screenshots[name] = path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdf", default=str(ROOT / "tests" / "assets" / "geotopo-pp1-10.pdf"))
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "drt-tiny"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--question", default="Was ist ein topologischer Raum?")
    args = ap.parse_args(argv)
    why = browser_unavailable()
    if why:
        raise SystemExit(f"screenshots: {why}")
    from .blocks import launch
    from .context import UIContext

    tmp = Path(tempfile.mkdtemp(prefix="drt-shots-"))
    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp / "gradio"))
    ctx = UIContext(tmp / "home", args.model)
    demo, url = launch(ctx, port=free_port(), prevent_thread_lock=True)
    try:
        res = walk_through(url, Path(args.pdf), Path(args.out), args.question)
    finally:
        demo.close()
        ctx.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for name, path in res.screenshots.items():
        print(f"{name}: {path}")
    print("seconds:", {k: round(v, 1) for k, v in res.seconds.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
