"""The UI in headless Chromium (Debian's chromium through Playwright; nothing is downloaded):
upload a PDF, watch the staged progress, ask, see the answer stream in and the heatmap render,
click a cell, summarize, open the document map; one screenshot per panel.

Skipped, with the reason, when /usr/bin/chromium or the playwright package is missing
(`tests/ui/install_browser.sh` installs the browser). Set DRT_UPDATE_SCREENSHOTS=1 to copy the
screenshots to docs/screenshots/ (better: `python -m ui.screenshots`, with the shipped model).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ui import blocks
from ui import context
from ui.screenshots import browser_unavailable, walk_through

ROOT = Path(__file__).resolve().parents[2]
PDF = ROOT / "tests" / "assets" / "026-latex-multicolumn__multicolumn.pdf"

# Gradio's own queue analytics (gradio/queueing.py) trips pandas deprecation warnings
_GRADIO_PANDAS = [
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting.*"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]
_WHY = browser_unavailable()
pytestmark = [pytest.mark.browser, pytest.mark.skipif(_WHY is not None, reason=_WHY or ""), *_GRADIO_PANDAS]


def test_upload_ask_heatmap_summary_map_in_chromium(drt_home, tiny_model, free_port, tmp_path):
    ctx = context.UIContext(drt_home, tiny_model, upload_root=tmp_path / "gradio")
    demo, url = blocks.launch(ctx, port=free_port, prevent_thread_lock=True)
    shots = tmp_path / "screenshots"
    try:
        res = walk_through(url, PDF, shots, question="What is this document about?")
    finally:
        demo.close()
        ctx.close()
    # the answer streamed in: the chat showed a growing, unfinished answer before the final one
    partial = [t for t in res.answer_texts if "▌" in t]
    assert partial, res.answer_texts
    assert any("Retrieved by the model:" in t for t in res.answer_texts)
    # after a second question, the chat shows that question at its top (not the answer's closing lines),
    # or, where the answer is short, the whole of both
    top, at_end = res.question_top
    assert top >= 0 and (top <= 60 or at_end), res.question_top
    assert res.heatmap_cells >= 53  # one cell per document chunk and generated chunk
    assert res.picked_passage.startswith("Chunk ") and "p. " in res.picked_passage
    assert "Extractive" in res.summary
    # the summary's heatmap: a row per sentence; a clicked cell shows the passage, its sentence and its page
    assert res.summary_rows >= 1 and res.summary_picked.startswith("Chunk ")
    assert "While it read sentence" in res.summary_picked and "highlighted on p" in res.summary_caption
    assert res.map_links > 0 and "Querying chunk" in res.map_picked
    assert "parts" in res.outline and "Relied on" in res.relied
    assert res.page_caption.startswith("Chunk ") and "highlighted on p" in res.page_caption
    for name in ("library", "ask", "summary", "map", "outline"):
        png = res.screenshots[name]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    if os.environ.get("DRT_UPDATE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        for png in res.screenshots.values():
            shutil.copy(png, out / png.name)


def test_no_dead_ends_in_chromium(drt_home, tiny_model, free_port, tmp_path):
    """Issue 52's dead ends, in the browser: an empty library says what to do; asking with no
    document says so in the chat (no HTTP 500, no "Error" badge); a bad file ends in a final status;
    an upload runs one ingest (pressing "Add to library" afterwards does not start a second); the
    new document is picked in every tab, and again after a reload; evidence is cut at words."""
    from playwright.sync_api import expect, sync_playwright

    from ui.screenshots import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS

    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 200)
    ctx = context.UIContext(drt_home, tiny_model, upload_root=tmp_path / "gradio")
    demo, url = blocks.launch(ctx, port=free_port, prevent_thread_lock=True)
    failures: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 500 else None)
            page.goto(url)
            expect(page.locator("#drt-lib-note")).to_contain_text("The library is empty")

            page.get_by_role("tab", name="Ask").click()
            page.locator("#drt-question textarea").fill("What is this about?")
            page.locator("#drt-send").click()
            expect(page.locator("#drt-chat")).to_contain_text("add a document in the Library tab first")
            assert page.locator(".error").count() == 0  # no "Error" badge

            page.get_by_role("tab", name="Library").click()
            page.locator("#drt-upload input[type=file]").set_input_files(str(bad))
            expect(page.locator("#drt-status")).to_contain_text("✗")
            assert "▶" not in page.locator("#drt-status").inner_text()

            page.locator("#drt-upload input[type=file]").set_input_files(str(PDF))
            page.locator("#drt-add").click()  # while the upload's ingest runs: it waits, then finds it added
            expect(page.locator("#drt-status")).to_contain_text("Already added")
            assert page.locator(".error").count() == 0
            expect(page.locator("#drt-docs")).to_contain_text("ready")
            assert len(ctx.library.documents()) == 1
            page.locator("#drt-add").click()  # nothing new to add: it says the upload is in (not "choose a file")
            expect(page.locator("#drt-status")).to_contain_text("choose another file")
            for tab, menu in (("Ask", "#drt-ask-doc"), ("Summary", "#drt-sum-doc"), ("Outline", "#drt-out-doc"),
                              ("Document map", "#drt-map-doc")):
                page.get_by_role("tab", name=tab).click()
                expect(page.locator(f"{menu} input")).not_to_have_value("")
            page.reload()
            page.get_by_role("tab", name="Ask").click()
            expect(page.locator("#drt-ask-doc input")).not_to_have_value("")
            page.locator("#drt-question textarea").fill("What is this about?")
            page.locator("#drt-send").click()
            expect(page.locator("#drt-chat")).to_contain_text("Evidence", timeout=TIMEOUT_MS)
            browser.close()
    finally:
        demo.close()
        ctx.close()
    assert not failures, failures
