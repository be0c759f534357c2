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
from ui import handlers as h
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
    ctx = h.UIContext(drt_home, tiny_model, upload_root=tmp_path / "gradio")
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
    assert any("Evidence:" in t for t in res.answer_texts)
    assert res.heatmap_cells >= 53  # one cell per document chunk and generated chunk
    assert res.picked_passage.startswith("Chunk ") and "p. " in res.picked_passage
    assert "Extractive" in res.summary
    assert res.map_links > 0 and "Querying chunk" in res.map_picked
    assert "parts" in res.outline and "Relied on" in res.relied
    for name in ("library", "ask", "summary", "map", "outline"):
        png = res.screenshots[name]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    if os.environ.get("DRT_UPDATE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        for png in res.screenshots.values():
            shutil.copy(png, out / png.name)
