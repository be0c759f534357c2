"""Ingest benchmark: `drt-reader bench ingest [--pdf PATH] [--json]` or `python -m bench.ingest`.

End to end on a real book PDF with the shipped model (checkpoints/drt-tiny), through the same code
the CLI runs (`ingest.pipeline.ingest`, into a fresh library and memmap state store):

    hash -> parse (MuPDF in its limited subprocess) -> tokenize -> store (sqlite) -> prefill

Each stage is timed from the pipeline's own progress events (a stage lasts from its first event to
the first event of the next), in wall-clock seconds and in CPU seconds (this process plus its
waited-for children, so the parse worker counts). Rates: pages/s for parsing, tokens/s for
tokenizing and for prefilling (wall and per CPU second: on a shared machine the CPU figure is the
steadier one). The model is loaded before the clock starts and reported on its own line.

Then reopening the prefilled document, each in a NEW process (a new Engine, nothing cached):
    reopen   load the model, open the stored state (`ready_state`), lay out the question and
             generate: time from spawning the process to the first answer token;
    scratch  load the model, prefill the document's stored token ids again from token 0 into a
             fresh state directory (memmap tier, as ingest does), then the same question: time
             from spawning to the first answer token.
The ratio scratch / reopen is what storing the states saves on the first answer. Both answers'
first token ids are reported; they must agree (same computation on the same inputs).

Workers run with OMP_WAIT_POLICY=PASSIVE unless set (see bench/prefill.py: spinning OpenMP threads
cost a lot on a shared machine); run the whole bench with OMP_NUM_THREADS=1 on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "checkpoints" / "drt-tiny"
BOOKS = ROOT.parent / "shared" / "pdfs" / "books"
FALLBACK_PDF = ROOT / "tests" / "assets" / "emma-pp2-21.pdf"
DEFAULT_QUESTION = "Who is the main character of this book?"
TARGET_PAGES = 300


def cpu_s() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def default_pdf() -> Path:
    """The book in ../shared/pdfs/books closest to 300 pages (else a test asset)."""
    best, best_d = None, None
    try:
        import pymupdf

        for p in sorted(BOOKS.glob("*.pdf")):
            try:
                with pymupdf.open(p) as d:
                    dist = abs(d.page_count - TARGET_PAGES)
            except Exception:  # noqa: BLE001 - an unreadable file is simply not a candidate
                continue
            if best_d is None or dist < best_d:
                best, best_d = p, dist
    except ImportError:
        pass
    return best or FALLBACK_PDF


# ----------------------------------------------------------------------------------------------
# stage timing from the pipeline's progress events


class StageClock:
    """Records (wall, cpu) at the first progress event of each stage."""

    def __init__(self):
        self.marks: dict[str, tuple[float, float]] = {}
        self.order: list[str] = []
        self.last: dict[str, object] = {}

    def __call__(self, p) -> None:
        if p.stage not in self.marks:
            self.marks[p.stage] = (time.perf_counter(), cpu_s())
            self.order.append(p.stage)
        self.last[p.stage] = p

    def durations(self, end: tuple[float, float]) -> dict[str, dict]:
        out = {}
        for i, st in enumerate(self.order):
            nxt = self.marks[self.order[i + 1]] if i + 1 < len(self.order) else end
            w0, c0 = self.marks[st]
            out[st] = {"seconds": nxt[0] - w0, "cpu_s": nxt[1] - c0}
        return out


def _rate(n: float, s: float | None) -> float | None:
    return n / s if s and s > 0 else None


# ----------------------------------------------------------------------------------------------
# workers (new processes)


def _first_token(engine, state, question: str) -> dict:
    t = time.time()
    for ev in engine.generate(state, question, max_new_tokens=1, temperature=0.0):
        if ev.token_id is not None:
            return {"t_first_token": time.time(), "first_token_id": int(ev.token_id),
                    "first_token_text": engine.tokenizer.decode([ev.token_id]) if engine.tokenizer else None,
                    "generate_s": time.time() - t}
        if ev.done:
            break
    return {"t_first_token": time.time(), "first_token_id": None, "first_token_text": None,
            "generate_s": time.time() - t}


def worker(kind: str, home: str, doc_id: str, model: str, question: str, scratch_dir: str | None) -> dict:
    t_start = time.time()
    from drt_core.engine import Engine

    from ingest.pipeline import default_device, ready_state
    from store.library import Library

    t_imported = time.time()
    engine = Engine.from_pretrained(model, device=default_device())
    t_loaded = time.time()
    lib = Library(home)
    try:
        if kind == "reopen":
            state = ready_state(lib, engine, doc_id)
            t_ready = time.time()
            r = {"n_tokens": int(state.n_tokens), "n_chunks": int(state.n_chunks)}
        else:
            ids = lib.token_ids(doc_id)
            d = Path(scratch_dir)
            shutil.rmtree(d, ignore_errors=True)
            state = engine.open_state(d)
            c0, w0 = cpu_s(), time.time()
            for _ in engine.prefill(state, ids):
                pass
            t_ready = time.time()
            r = {"n_tokens": int(state.n_tokens), "n_chunks": int(state.n_chunks),
                 "prefill_s": t_ready - w0, "prefill_cpu_s": cpu_s() - c0}
        r |= _first_token(engine, state, question)
    finally:
        lib.close()
    return r | {"t_start": t_start, "import_s": t_imported - t_start, "model_load_s": t_loaded - t_imported,
                "open_s": t_ready - t_loaded, "cpu_s": cpu_s(),
                "peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float | None:
    """VmHWM of this process (MB). Not ru_maxrss: Linux keeps that across execve, so a worker
    spawned by a big parent would report the parent's size at fork."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _spawn(kind: str, home: Path, doc_id: str, model: str, question: str, scratch_dir: Path | None) -> dict:
    cmd = [sys.executable, "-m", "bench.ingest", "--worker", kind, "--home", str(home), "--doc", doc_id,
           "--model", model, "--question", question]
    if scratch_dir is not None:
        cmd += ["--scratch-dir", str(scratch_dir)]
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t_spawn = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.time() - t_spawn
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{kind} worker failed (rc {proc.returncode}): {tail[0]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    r["ttft_s"] = r["t_first_token"] - t_spawn  # spawn -> first answer token
    r["startup_s"] = r["t_start"] - t_spawn  # interpreter start before our first line
    r["process_wall_s"] = wall
    return r


# ----------------------------------------------------------------------------------------------
# report


def _f(v, nd=1) -> str:
    if v is None:
        return "-"
    return f"{v:,.{nd}f}"


def format_table(res: dict) -> str:
    st = res["stages"]
    n_pages, n_tok = res["document"]["pages"], res["document"]["tokens"]
    lines = [
        f"ingest benchmark: {res['date']}; {res['machine']}; torch threads {res['torch_threads']}; "
        f"load average at start {res['loadavg_start']}",
        f"document: {res['pdf']} ({n_pages} pages, {res['document']['chars']:,} characters, "
        f"{n_tok:,} tokens, {res['document']['chunks']:,} chunks); model {res['model']} ({res['model_fp']})",
        f"command: {res['command']}",
        "",
        "| stage | wall s | CPU s | work | rate (wall) | rate (per CPU s) |",
        "|---|---|---|---|---|---|",
    ]
    units = {"hash": (res["document"]["bytes"] / 2**20, "MiB"), "parse": (n_pages, "pages"),
             "tokenize": (n_tok, "tokens"), "store": (res["document"]["chunks"], "chunks"),
             "prefill": (n_tok, "tokens")}
    for name in ("hash", "parse", "tokenize", "store", "prefill"):
        if name not in st:
            continue
        n, u = units[name]
        w, c = st[name]["seconds"], st[name]["cpu_s"]
        lines.append(f"| {name} | {_f(w, 2)} | {_f(c, 2)} | {_f(n, 2 if u == 'MiB' else 0)} {u} "
                     f"| {_f(_rate(n, w), 1)} {u}/s "
                     f"| {_f(_rate(n, c), 1)} {u}/CPU-s |")
    tot = res["total"]
    lines.append(f"| **total (ingest call)** | {_f(tot['seconds'], 2)} | {_f(tot['cpu_s'], 2)} | | | |")
    lines.append(f"| (model load, before the clock) | {_f(res['model_load_s'], 2)} | | | | |")
    ro, sc = res.get("reopen"), res.get("scratch")
    lines += ["", "first answer token from a new process (spawn -> first token):", "",
              "| path | spawn->first token s | python start + imports s | model load s | open / prefill s "
              "| prompt + first token s | peak RSS MB | first token |",
              "|---|---|---|---|---|---|---|---|"]
    for name, r in (("reopen stored state", ro), ("prefill again from scratch", sc)):
        if not r:
            continue
        lines.append(
            f"| {name} | {_f(r['ttft_s'], 2)} | {_f(r['startup_s'] + r['import_s'], 2)} | {_f(r['model_load_s'], 2)} "
            f"| {_f(r['open_s'], 3)} | {_f(r['generate_s'], 3)} | {_f(r['peak_rss_mb'], 0)} "
            f"| {r['first_token_id']} {json.dumps(r['first_token_text'])} |")
    if ro and sc:
        lines += ["", f"ratio (scratch / reopen, time to first answer token): **{res['ratio_ttft']:.1f}x** "
                      f"from spawning the process; **{res['ratio_after_load']:.0f}x** once the model is loaded "
                      "(open + first token vs prefill + first token); "
                      f"scratch prefill {_f(sc['n_tokens'] / sc['prefill_s'], 0)} tok/s "
                      f"({_f(sc['n_tokens'] / sc['prefill_cpu_s'], 0)} tok/CPU-s); "
                      f"same first token: {res['same_first_token']}"]
    lines.append(f"state on disk: {res['state_bytes'] / 2**20:,.1f} MiB "
                 f"({res['state_bytes'] / max(n_tok, 1):,.0f} B/token)")
    return "\n".join(lines)


def machine_name() -> str:
    from bench.prefill import machine_name as m

    return m()


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in d.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.ingest", description=__doc__.splitlines()[0])
    p.add_argument("--pdf", default=None,
                   help=f"the document (default: the book in {BOOKS} closest to {TARGET_PAGES} pages)")
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="checkpoint (default checkpoints/drt-tiny)")
    p.add_argument("--home", default=None, help="library to ingest into (default: a fresh temporary one, removed)")
    p.add_argument("--question", default=DEFAULT_QUESTION, help="question for the first-token measurements")
    p.add_argument("--no-scratch", action="store_true", help="skip prefilling again from scratch (no ratio)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--worker", choices=("reopen", "scratch"), help=argparse.SUPPRESS)
    p.add_argument("--doc", help=argparse.SUPPRESS)
    p.add_argument("--scratch-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(args.worker, args.home, args.doc, args.model, args.question, args.scratch_dir)))
        return 0

    pdf = Path(args.pdf) if args.pdf else default_pdf()
    if not pdf.is_file():
        print(f"bench.ingest: error: no such file: {pdf}", file=sys.stderr)
        return 2
    if not (Path(args.model) / "config.json").exists():
        print(f"bench.ingest: error: no model at {args.model}", file=sys.stderr)
        return 2
    tmp = None
    if args.home:
        home = Path(args.home)
        if (home / "library.db").exists():
            print(f"bench.ingest: error: {home} already holds a library; give a new --home", file=sys.stderr)
            return 2
    else:
        tmp = Path(tempfile.mkdtemp(prefix="drt-bench-ingest-"))
        home = tmp / "home"
    log = (lambda *a: None) if args.json else (lambda *a: print("[bench.ingest]", *a, file=sys.stderr, flush=True))
    try:
        import torch

        import drt_core.engine  # noqa: F401 - imports before the model-load clock
        from ingest.pipeline import default_device, ingest, load_engine
        from store.library import Library

        loadavg = " ".join(f"{x:.1f}" for x in os.getloadavg())
        t = time.perf_counter()
        engine = load_engine(args.model, default_device())
        model_load_s = time.perf_counter() - t
        log(f"model loaded in {model_load_s:.1f} s; ingesting {pdf}")
        lib = Library(home)
        clock = StageClock()
        last_log = [0.0]

        def progress(pr):
            clock(pr)
            if pr.stage != "prefill" or time.monotonic() - last_log[0] > 15 or pr.done == pr.total:
                if pr.stage == "prefill":
                    last_log[0] = time.monotonic()
                log(f"{pr.stage}: {pr.done:,}/{pr.total:,} {pr.message}"
                    + (f" ({pr.tokens_per_s:,.0f} tok/s)" if pr.tokens_per_s else ""))

        w0, c0 = time.perf_counter(), cpu_s()
        try:
            result = ingest(pdf, library=lib, engine=engine, progress=progress)
            end = (time.perf_counter(), cpu_s())
            doc = lib.document(result.doc_id)
        finally:
            lib.close()
        stages = clock.durations(end)
        stages.pop("done", None)
        sdir = home / "states" / result.doc_id / str(engine.fingerprint)
        res = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_name(),
            "torch_threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "loadavg_start": loadavg,
            "command": "drt-reader bench ingest " + " ".join(argv if argv is not None else sys.argv[1:]),
            "pdf": str(pdf),
            "model": str(args.model),
            "model_fp": str(engine.fingerprint),
            "model_load_s": model_load_s,
            "document": {"doc_id": result.doc_id, "pages": result.pages, "tokens": result.tokens,
                         "chunks": result.chunks, "chars": doc["n_chars"], "bytes": doc["n_bytes"],
                         "status": result.status},
            "stages": stages,
            "total": {"seconds": end[0] - w0, "cpu_s": end[1] - c0},
            "state_bytes": _dir_bytes(sdir),
        }
        for name, n in (("parse", result.pages), ("tokenize", result.tokens), ("prefill", result.tokens)):
            if name in stages:
                stages[name]["per_s"] = _rate(n, stages[name]["seconds"])
                stages[name]["per_cpu_s"] = _rate(n, stages[name]["cpu_s"])
        log(f"ingested: {result.tokens:,} tokens in {res['total']['seconds']:.1f} s; reopening in a new process")
        res["reopen"] = _spawn("reopen", home, result.doc_id, args.model, args.question, None)
        log(f"reopen: first token after {res['reopen']['ttft_s']:.2f} s")
        if not args.no_scratch:
            log("prefilling again from scratch in a new process")
            res["scratch"] = _spawn("scratch", home, result.doc_id, args.model, args.question, home / "scratch-state")
            log(f"scratch: first token after {res['scratch']['ttft_s']:.1f} s")
            res["ratio_ttft"] = res["scratch"]["ttft_s"] / res["reopen"]["ttft_s"]
            ro, sc = res["reopen"], res["scratch"]
            res["ratio_after_load"] = (sc["open_s"] + sc["generate_s"]) / max(ro["open_s"] + ro["generate_s"], 1e-9)
            res["same_first_token"] = res["scratch"]["first_token_id"] == res["reopen"]["first_token_id"]
        if args.out:
            Path(args.out).write_text(json.dumps(res, indent=1))
        print(json.dumps(res) if args.json else format_table(res))
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
