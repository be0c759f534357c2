"""Rows 1-5 and 23 of the reliability plan: the served Gradio app over plain HTTP and gradio_client.

One server per module (launching costs seconds); the handlers that would run the model are
replaced by stubs where only the queue is under test. tests/ui/test_api.py::test_hardened_server
already checks the basic cases (the library and model paths and /etc/passwd on the file route, the
closed run/ routes, a 413 upload, /monitoring); these add the variants and the overload."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from ui import blocks
from ui import context
from ui.screenshots import free_port
from ui.tabs import library as library_tab

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting.*"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]


@pytest.fixture(scope="module")
def served_root(tmp_path_factory):
    return tmp_path_factory.mktemp("served")


@pytest.fixture(autouse=True)
def _one_upload_dir(served_root, monkeypatch):
    """Gradio reads GRADIO_TEMP_DIR at launch and again when it checks an upload: keep them equal
    for the module's one server (tests/conftest.py points it at each test's own tmp_path)."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(served_root / "gradio"))


@pytest.fixture(scope="module")
def served(tiny_model, served_root):
    import os

    root = served_root
    old = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = str(root / "gradio")
    port = free_port()
    ctx = context.UIContext(root / "home", tiny_model, max_file_bytes="64kb", upload_root=root / "gradio")
    ctx.library.documents()  # creates library.db
    (root / "home" / "states" / "abc").mkdir(parents=True)
    (root / "home" / "states" / "abc" / "meta.json").write_text('{"secret": 1}')
    demo, url = blocks.launch(ctx, port=port, prevent_thread_lock=True)
    try:
        yield url, ctx
    finally:
        demo.close()
        ctx.close()
        if old is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = old


def test_file_route_traversal_never_serves_bytes(served):
    """Row 1: /etc/passwd, ../, %2F-encoded, the data and model directories, URLs: 403/404 only."""
    url, ctx = served
    home, model = ctx.home.resolve(), Path(ctx.model).resolve()
    probes = [
        "/etc/passwd",
        "../../../../etc/passwd",
        "%2Fetc%2Fpasswd",
        "..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        f"{ctx.upload_root}/../../../../etc/passwd",
        "/proc/self/environ",
        f"{home}/library.db",
        f"{home}/library.db-wal",
        f"{home}/states/abc/meta.json",
        f"{model}/config.json",
        f"{model}/model.safetensors",
        "http://127.0.0.1:1/x",  # SSRF / open redirect
        "file:///etc/passwd",
    ]
    with httpx.Client(base_url=url, timeout=30, follow_redirects=False) as c:
        for p in probes:
            for prefix in ("gradio_api/file=", "file="):
                r = c.get(prefix + p)
                assert r.status_code in (403, 404), (prefix + p, r.status_code)
                assert b"root:" not in r.content and b"secret" not in r.content and b"SQLite" not in r.content
                assert "location" not in r.headers


def _counting_passage(seconds: float):
    """A stand-in for ui.tabs.library.passage that takes `seconds` and records the most calls running at
    once (peak[0])."""
    running, peak, lock = [0], [0], threading.Lock()

    def slow_passage(ctx, doc_id, chunk):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(seconds)
        with lock:
            running[0] -= 1
        return {"chunk": chunk, "text": "x", "pages": [1]}

    return slow_passage, peak


def test_queue_cannot_be_bypassed(served, monkeypatch):
    """Row 2: six concurrent direct POSTs to the run/ and call/ routes never run the function past
    the queue's limit (run/ is closed: 404)."""
    url, _ = served
    slow_passage, peak = _counting_passage(0.2)

    monkeypatch.setattr(library_tab, "passage", slow_passage)
    codes: list[int] = []

    def post(route: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as c:
            codes.append(c.post(route, json={"data": ["x", 1]}).status_code)

    threads = [threading.Thread(target=post, args=(r,)) for r in ["gradio_api/run/passage"] * 6]
    threads += [threading.Thread(target=post, args=(r,)) for r in ["gradio_api/call/passage"] * 6]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1.5)  # call/ only enqueues: let the queued ones run
    assert codes.count(404) >= 6  # run/ is closed
    assert peak[0] <= 1


def test_oversize_upload_leaves_nothing_behind(served):
    """Row 3: an upload of twice max_file_size is refused while streaming (413); no file stays."""
    url, ctx = served
    before = {p for p in ctx.upload_root.rglob("*") if p.is_file()} if ctx.upload_root.exists() else set()
    with httpx.Client(base_url=url, timeout=30) as c:
        body = b"%PDF-1.4\n" + b"0" * (128 * 1024)
        r = c.post("gradio_api/upload", files={"files": ("big.pdf", body, "application/pdf")})
    assert r.status_code == 413
    after = {p for p in ctx.upload_root.rglob("*") if p.is_file()} if ctx.upload_root.exists() else set()
    assert after == before


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("setup.exe", b"MZ\x90\x00" + bytes(range(256)) * 4, "(?i)invalid file type|not allowed"),
        ("paper.pdf", b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 8, "neither a PDF"),
        ("notes.txt", b"text\x00with\x00many\x00NUL\x00bytes\x00" * 50, "neither a PDF|no text"),
        ("archive.epub", b"PK\x03\x04" + b"\x00" * 200, "zip archive|neither|cannot"),
    ],
)
def test_disguised_files_are_one_line_errors_and_store_nothing(served, tmp_path, name, data, says):
    """Row 4: the content decides, not the name; a clear error, no document row."""
    from gradio_client import Client, handle_file

    url, ctx = served
    f = tmp_path / name
    f.write_bytes(data)
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match=says) as e:
        client.predict(handle_file(str(f)), "", "", api_name="/ingest")
    assert "Traceback" not in str(e.value)
    assert ctx.library.documents() == []


def test_cross_origin_and_rebinding_requests_are_refused(served):
    """Row 5: an evil Origin gets no CORS grant and cannot even upload (a multipart POST needs no
    preflight); a Host that is not loopback (DNS rebinding) is refused; a local origin works."""
    url, ctx = served
    port = url.rstrip("/").rsplit(":", 1)[1]
    with httpx.Client(base_url=url, timeout=30) as c:
        evil = {"Origin": "https://evil.example"}
        r = c.get("config", headers=evil)
        assert r.status_code == 403 and r.headers.get("access-control-allow-origin") != "https://evil.example"
        for origin in ("null", "http://evil.example:" + port):
            assert c.get("config", headers={"Origin": origin}).status_code == 403
        pre = c.request("OPTIONS", "gradio_api/upload",
                        headers={**evil, "Access-Control-Request-Method": "POST"})  # fmt: skip
        assert "access-control-allow-origin" not in pre.headers
        files = {"files": ("a.pdf", b"%PDF-1.4 hello", "application/pdf")}
        assert c.post("gradio_api/upload", headers=evil, files=files).status_code == 403
        rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        r = c.get("config", headers=rebound)
        assert r.status_code == 400 and b"components" not in r.content
        ok = c.get("config", headers={"Origin": url.rstrip("/")})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == url.rstrip("/")
        assert c.get("config", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_unauthenticated_endpoints(served):
    """Row 5: there is no login (README, `serve` warns off loopback); what an unauthenticated
    client reaches on loopback is the app's own API, never analytics or a share link."""
    url, _ = served
    with httpx.Client(base_url=url, timeout=30) as c:
        for path in ("monitoring", "monitoring/summary", "gradio_api/monitoring/summary"):
            assert c.get(path).status_code in (403, 404), path
        cfg = c.get("config").json()
        assert not cfg.get("share_url") and not cfg.get("auth_required")
        assert c.get("gradio_api/mcp/sse").status_code == 404  # mcp_server=False


def test_overload_more_jobs_than_the_queue_holds(served, monkeypatch):
    """Row 23: 45 jobs against one worker and a queue of 32: at most one runs at a time, the extras
    get "Queue is full", every accepted job completes."""
    from gradio_client import Client

    url, _ = served
    slow_passage, peak = _counting_passage(0.05)

    monkeypatch.setattr(library_tab, "passage", slow_passage)
    client = Client(url, verbose=False, max_workers=48)
    jobs = [client.submit("x", i, api_name="/passage") for i in range(45)]
    done, full, other = 0, 0, []
    for j in jobs:
        try:
            j.result(timeout=120)
            done += 1
        except Exception as e:  # noqa: BLE001 - sorted below
            if "Queue is full" in str(e):
                full += 1
            else:
                other.append(repr(e))
    assert other == []
    assert peak[0] == 1
    assert full >= 1 and done >= 32 and done + full == 45
