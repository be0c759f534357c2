"""Load test of the served app: `drt-reader bench load --clients N --minutes T`.

Starts `drt-reader serve` on a free loopback port with a fresh library (the shipped model unless
--model), then N simultaneous gradio_client clients, each of which uploads its own document (by
default tests/assets/emma-pp2-21.pdf, 20 pages of Emma, made distinct per client by its PDF
metadata, so each copy is really parsed in the sandboxed worker, tokenized and prefilled), then
asks questions and asks for summaries in turn (one of each at least) until T minutes have passed.
Bounded in count too: each client stops after --max-actions. Reported:

- latency p50 / p95 per action (ingest, ask, summarize), in seconds;
- queue rejections ("Queue is full") and every other error, with its message;
- the server's peak RSS (its whole process tree, parse workers included, sampled from /proc every
  0.2 s) and its RSS after start-up;
- the library afterwards (server stopped): `integrity_check`, every document complete (prefill
  done) or resumable (partial, with its committed state on disk), none half-written (a document
  row without its chunks, pages or token ids).

Targets (issue 30): no error but "queue full", no client left hanging, the library whole, and the
peak RSS of the last run at most 1.5x that of the first (N = 16 against N = 1); the exit status is
1 when one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ui.screenshots import free_port

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "tests" / "assets" / "emma-pp2-21.pdf"
QUESTIONS = {  # by the default document's stem; any other document gets the generic ones
    "emma-pp2-21": ["How long had Miss Taylor been in Mr. Woodhouse's family?", "Whom did Miss Taylor marry?",
                    "Where did Mr. Knightley live?", "What did Mr. Woodhouse think of matrimony?"],
    "frankenstein_excerpt": ["Who is the narrator writing to?", "Where is the ship when the stranger is found?",
                             "What does the stranger ask before he comes on board?", "What is the name of the sister?"],
}
GENERIC = ["What is this document about?", "Who is the main character?", "Where does it take place?",
           "What happens at the beginning?"]
RSS_TARGET = 1.5


def client_copies(doc: Path, n: int, out: Path) -> list[Path]:
    """n copies of doc with different bytes (so n documents in the library) and the same text."""
    paths = []
    for k in range(n):
        p = out / f"client-{k:02d}{doc.suffix}"
        if doc.suffix.lower() == ".pdf":
            import pymupdf

            d = pymupdf.open(doc)
            d.set_metadata({**(d.metadata or {}), "subject": f"load test client {k}"})
            d.save(p)
            d.close()
        else:
            p.write_text(f"Load test document {k}.\n\n{doc.read_text(encoding='utf-8')}", encoding="utf-8")
        paths.append(p)
    return paths


def tree_mem_mb(pid: int, fields=("VmRSS", "RssAnon", "RssFile")) -> dict[str, float]:
    """Memory of a process and all its descendants, from /proc (MB): VmRSS, and its anonymous and
    file-backed parts (RssAnon; RssFile: mapped chunk states, shared libraries)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    total, todo = dict.fromkeys(fields, 0), [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                name = line.split(":", 1)[0]
                if name in total:
                    total[name] += int(line.split()[1])
        except OSError:
            pass
        todo += kids.get(p, [])
    return {k: v / 1024 for k, v in total.items()}


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and all its descendants, from /proc (MB)."""
    return tree_mem_mb(pid)["VmRSS"]


class RssSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()
        self.peak_anon = self.peak_file = 0.0  # their own peaks (not necessarily at the same moment)

    def run(self):
        while not self.stop.is_set():
            m = tree_mem_mb(self.pid)
            self.peak = max(self.peak, m["VmRSS"])
            self.peak_anon = max(self.peak_anon, m["RssAnon"])
            self.peak_file = max(self.peak_file, m["RssFile"])
            time.sleep(0.2)


def start_server(home: Path, model: str | None, port: int, threads: int | None) -> subprocess.Popen:
    cmd = [sys.executable, str(ROOT / "app.py"), "--home", str(home)]
    if model:
        cmd += ["--model", model]
    cmd += ["serve", "--host", "127.0.0.1", "--port", str(port)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADIO_ANALYTICS_ENABLED="False")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench.load: the server exited: {proc.stderr.read()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("bench.load: the server did not listen within 180 s")


def client_loop(url: str, k: int, doc: Path, until: float, max_actions: int, out: list, lock: threading.Lock,
                questions: list[str]):
    from gradio_client import Client, handle_file

    def record(action, t0, err=None):
        with lock:
            out.append({"client": k, "action": action, "s": time.monotonic() - t0, "error": err})

    def call(action, *args, **kw):
        t0 = time.monotonic()
        try:
            res = client.predict(*args, **kw)
            record(action, t0)
            return res
        except Exception as e:  # noqa: BLE001 - every failure is recorded and classified
            record(action, t0, str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__)
            return None

    client = Client(url, verbose=False)
    res = call("ingest", handle_file(str(doc)), f"load client {k}", "", api_name="/ingest")
    doc_id = None
    docs = call("documents", api_name="/documents") or []
    for d in docs:
        if d.get("title") == f"load client {k}":
            doc_id = d["doc_id"]
    if res is None or doc_id is None:
        return
    n = 0
    while n < min(2, max_actions) or (time.monotonic() < until and n < max_actions):  # one ask and one summary at least
        if n % 2 == 0:
            call("ask", doc_id, questions[(k + n) % len(questions)], 16, api_name="/ask")
        else:
            call("summarize", doc_id, "extractive", 32, api_name="/summarize")
        n += 1


def library_state(home: Path) -> dict:
    con = sqlite3.connect(f"file:{home / 'library.db'}?mode=ro", uri=True)
    try:
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        docs = con.execute("SELECT id, n_chunks, n_pages FROM documents").fetchall()
        half = []
        for doc_id, n_chunks, n_pages in docs:
            c = con.execute("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            p = con.execute("SELECT COUNT(*) FROM pages WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            t = con.execute("SELECT COUNT(*) FROM tokens WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            if c != n_chunks or p != n_pages or t != 1:
                half.append(doc_id)
        states = con.execute("SELECT status, state_dir, n_tokens_done FROM prefill_states").fetchall()
    finally:
        con.close()
    done = sum(s == "done" for s, _, _ in states)
    resumable = 0
    for s, d, n in states:
        if s != "done":
            sdir = Path(d) if Path(d).is_absolute() else home / d
            meta = sdir / "meta.json"
            resumable += int(n == 0 or (meta.exists() and json.loads(meta.read_text())["n_tokens"] >= n))
    return {"integrity": integrity, "documents": len(docs), "half_written": half, "prefill_done": done,
            "prefill_resumable": resumable, "prefill_rows": len(states)}


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run(clients: int, minutes: float, max_actions: int = 40, model: str | None = None, work: Path | None = None,
        threads: int | None = None, doc: Path | None = None) -> dict:
    work = Path(work or tempfile.mkdtemp(prefix="drt-load-"))
    home = work / "home"
    doc = Path(doc or DOC)
    questions = QUESTIONS.get(doc.stem, GENERIC)
    docs = client_copies(doc, clients, work)  # one distinct document per client
    port = free_port()
    server = start_server(home, model, port, threads)
    sampler = RssSampler(server.pid)
    sampler.start()
    time.sleep(1.0)
    rss_idle = tree_rss_mb(server.pid)
    out: list[dict] = []
    lock = threading.Lock()
    t0 = time.monotonic()
    until = t0 + 60 * minutes
    ths = [threading.Thread(target=client_loop, args=(f"http://127.0.0.1:{port}/", k, docs[k], until, max_actions,
                                                      out, lock, questions)) for k in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(timeout=60 * minutes + 600)
    wall = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    actions = {}
    for a in ("ingest", "ask", "summarize", "documents"):
        ok = [r["s"] for r in out if r["action"] == a and r["error"] is None]
        actions[a] = {"ok": len(ok), "p50_s": pct(ok, 0.5), "p95_s": pct(ok, 0.95)}
    errors = [r for r in out if r["error"] is not None]
    full = [r for r in errors if "queue is full" in r["error"].lower()]
    other = sorted({r["error"] for r in errors if r not in full})
    return {"clients": clients, "minutes": minutes, "document": str(doc), "wall_s": round(wall, 1), "actions": actions,
            "queue_full": len(full), "other_errors": other, "n_other_errors": len(errors) - len(full),
            "rss_idle_mb": round(rss_idle), "rss_peak_mb": round(sampler.peak),
            "rss_anon_peak_mb": round(sampler.peak_anon), "rss_file_peak_mb": round(sampler.peak_file),
            "library": library_state(home),
            "stuck_clients": sum(t.is_alive() for t in ths)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.load", description=__doc__.splitlines()[0])
    p.add_argument("--clients", default="1,4,16", help="comma-separated client counts, one run each")
    p.add_argument("--minutes", type=float, default=2.0, help="how long the clients keep asking, per run")
    p.add_argument("--max-actions", type=int, default=40, help="ask/summarize calls per client at most")
    p.add_argument("--doc", default=None, help=f"the document each client uploads a copy of (default: {DOC.name})")
    p.add_argument("--model", default=None, help="checkpoint (default: the shipped one)")
    p.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the server")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    runs = []
    for n in [int(x) for x in a.clients.split(",") if x.strip()]:
        with tempfile.TemporaryDirectory(prefix="drt-load-") as work:
            r = run(n, a.minutes, a.max_actions, a.model, Path(work), a.threads, Path(a.doc) if a.doc else None)
        runs.append(r)
        print(f"[bench.load] N={n}: {json.dumps(r)}", file=sys.stderr, flush=True)
    base = runs[0]["rss_peak_mb"] if runs else None
    res = {"command": "drt-reader bench load " + " ".join(argv if argv is not None else sys.argv[1:]),
           "runs": runs, "rss_peak_over_first": [round(r["rss_peak_mb"] / base, 3) for r in runs] if base else []}
    checks = {
        "no error but queue full": all(r["n_other_errors"] == 0 for r in runs),
        "no client left hanging": all(r["stuck_clients"] == 0 for r in runs),
        "library whole, every document complete or resumable": all(
            r["library"]["integrity"] == "ok" and not r["library"]["half_written"]
            and r["library"]["prefill_done"] + r["library"]["prefill_resumable"] == r["library"]["prefill_rows"]
            for r in runs),
        f"peak RSS of the last run at most {RSS_TARGET}x the first's": (
            not res["rss_peak_over_first"] or res["rss_peak_over_first"][-1] <= RSS_TARGET),
    }
    res["targets"] = checks
    if a.json:
        print(json.dumps(res))
    else:
        print("| N | wall s | ingest p50/p95 s | ask p50/p95 s | summarize p50/p95 s | queue full | other errors "
              "| peak RSS MB (x first) | library |")
        print("|---|---|---|---|---|---|---|---|---|")
        def f(v):
            return "-" if v is None else f"{v:.2f}"

        for r, x in zip(runs, res["rss_peak_over_first"]):
            ac, lib = r["actions"], r["library"]
            print(f"| {r['clients']} | {r['wall_s']} | " + " | ".join(
                f"{f(ac[k]['p50_s'])} / {f(ac[k]['p95_s'])} ({ac[k]['ok']})" for k in ("ingest", "ask", "summarize"))
                + f" | {r['queue_full']} | {r['n_other_errors']} | {r['rss_peak_mb']} ({x}) | "
                f"{lib['integrity']}, {lib['prefill_done']} done + {lib['prefill_resumable']} resumable of "
                f"{lib['documents']}, {len(lib['half_written'])} half-written |")
    if not a.json:
        for k, v in checks.items():
            print(f"{'met' if v else 'MISSED'}: {k}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
