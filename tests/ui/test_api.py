"""The served app through gradio_client (Gradio's own way of testing: launch(prevent_thread_lock=True),
Client(url)), and the hardened settings over plain HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ui import blocks
from ui import context

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "tests" / "assets"
# Gradio's own queue analytics (gradio/queueing.py) trips pandas deprecation warnings
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting.*"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]
PDF = ASSETS / "026-latex-multicolumn__multicolumn.pdf"  # 3 pages, 52 chunks: prefills in seconds


@pytest.fixture
def served(drt_home, tiny_model, free_port, tmp_path):
    ctx = context.UIContext(drt_home, tiny_model, max_file_bytes="300kb", upload_root=tmp_path / "gradio")
    demo, url = blocks.launch(ctx, port=free_port, prevent_thread_lock=True)
    try:
        yield url, ctx
    finally:
        demo.close()
        ctx.close()


def test_upload_ask_and_read_the_trace_with_gradio_client(served):
    from gradio_client import Client, handle_file

    url, ctx = served
    assert url.startswith("http://127.0.0.1:")
    client = Client(url, verbose=False)
    named = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/ingest", "/documents", "/ask", "/summarize", "/trace", "/passage"} <= named
    assert not any("bot" in n or "turn" in n for n in named)  # UI-only events are private

    status, file_out, _pw, result, table, *_ = client.predict(handle_file(str(PDF)), "Two columns", "",
                                                               api_name="/ingest")  # fmt: skip
    assert result["status"] == "done" and result["pages"] == 3 and result["chunks"] == 52
    assert "Ready:" in status and "✓ prefilling" in status and file_out is None
    assert not any(ctx.upload_root.rglob("*.pdf"))  # the upload was removed once stored
    assert table["data"][0][0] == "Two columns" and table["data"][0][4] == "ready"

    (doc,) = client.predict(api_name="/documents")
    assert doc["state"] == "ready" and doc["doc_id"] == result["doc_id"]

    job = client.submit(doc["doc_id"][:12], "What is this document about?", 24, api_name="/ask")
    final = job.result(timeout=300)
    updates = job.outputs()
    assert len(updates) >= 2 and not updates[0]["done"]  # streamed
    assert final["done"] and set(final) >= {"answer", "evidence", "trace"}
    assert final["trace"]["chunks"] and all("topk" in r and "scores" in r for r in final["trace"]["chunks"])
    assert final["evidence"] and all(1 <= p <= 3 for e in final["evidence"] for p in e["pages"])

    chunk = final["evidence"][0]["chunk"]
    p = client.predict(doc["doc_id"], chunk, api_name="/passage")
    assert p["chunk"] == chunk and p["text"] == final["evidence"][0]["text"]
    tr = client.predict(doc["doc_id"], api_name="/trace")
    assert 50 <= len(tr["chunks"]) <= 52 and tr["chunks"][0]["chunk"] == 1  # chunk 0 retrieves nothing
    s = client.predict(doc["doc_id"], "extractive", 16, api_name="/summarize")
    assert s["mode"] == "extractive" and s["evidence"]


def test_hardened_server(served, tmp_path):
    url, ctx = served
    with httpx.Client(base_url=url, timeout=30) as c:
        # the queue's direct REST routes stay closed: limits cannot be bypassed
        for name in ("ask", "documents", "ingest"):
            assert c.post(f"gradio_api/run/{name}", json={"data": []}).status_code == 404
        # the library and the model are never served
        ctx.library.documents()  # creates library.db
        for path in (ctx.home / "library.db", Path(ctx.model) / "config.json", Path("/etc/passwd")):
            r = c.get(f"gradio_api/file={path}")
            assert r.status_code in (403, 404), (path, r.status_code)
        # uploads over max_file_size are refused while streaming
        big = tmp_path / "big.pdf"
        big.write_bytes(b"%PDF-1.4\n" + b"0" * (400 * 1024))
        with big.open("rb") as f:
            r = c.post("gradio_api/upload", files={"files": ("big.pdf", f, "application/pdf")})
        assert r.status_code == 413
        # no event analytics
        assert c.get("monitoring").status_code != 200
        cfg = c.get("config").json()
        assert cfg.get("enable_queue", True) and not cfg.get("share_url")
