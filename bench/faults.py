"""Fault injection into ingest: `drt-reader bench faults --pdf BOOK.pdf --trials 50 [--seed S]`.

One uninterrupted `drt-reader ingest` of the file gives the reference: its stored states (the
chunk memory's rows, the carry, the commit record), its library rows (document, pages, chunks,
token ids, prefill row) and its dependency-map trace. A second uninterrupted run must give the same
bits (else nothing can be compared) and gives the timeline of a warm run: when each stage's
progress line appeared (`-v`). Then, per seeded trial, in a fresh library, an ingest is started,
SIGKILLed at a random moment and started again until it finishes; the trial passes when the
resumed library and states are bit-identical to the reference's.

The kill moments (seeded, real timing, no hook in the product):
- "uniform" trials (half, `--uniform-share`): uniformly over the warm run's whole wall time, so
  kills land where the time goes (start-up, model load, prefill);
- "targeted" trials: in turn at parse, tokenize, store (the library transaction), prefill, a
  checkpoint and the final commit (the last state checkpoint and the transaction that marks the
  prefill done): the killer waits for that stage's first progress line in the trial's own run,
  then for a uniform fraction of that stage's duration in the warm run; a "checkpoint" kill then
  also waits, polling `/proc/PID/syscall`, until the main thread is inside a commit's fsync,
  fdatasync, msync or rename (a chunk-store checkpoint, or the prefill row's sqlite commit).
Each kill is reported with the phase it landed in, read from the killed run's own progress lines,
and with the system call its main thread was in (`/proc/PID/syscall`): a kill inside fsync,
fdatasync, msync or rename during prefill is reported as "commit (during prefill)", with the file
being synced (a chunk-store file, the carry, meta.json.tmp, or library.db-wal for the prefill row).
Right after each kill, before resuming, the library is checked read-only: integrity_check, and no
document without all its pages, chunks and token ids.

Small prefill blocks with frequent commits (DRT_PREFILL_BLOCK_CHUNKS / _CHECKPOINT_EVERY, the same
in every run) give many commit points. `--pages N` ingests the first N pages only (a PDF cut with
pymupdf, made once): 50 trials of a whole book would take hours on two cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MEMMAPS = {  # chunk-store file -> (dtype, row shape) from its meta.json
    "key.f32": (lambda m: np.float32, lambda m: (m["D"],)),
    "k.bin": (lambda m: np.dtype(m["dtype"]), lambda m: (m["N"], m["D"])),
    "v.bin": (lambda m: np.dtype(m["dtype"]), lambda m: (m["N"], m["D"])),
    "sel_idx.i32": (lambda m: np.int32, lambda m: (m["G"], m["k"])),
    "sel_w.f32": (lambda m: np.float32, lambda m: (m["G"], m["k"])),
    "tok.i32": (lambda m: np.int32, lambda m: (m["N"],)),
}
LIBRARY_QUERIES = [  # content only: no timestamps
    "SELECT id, title, kind, source_name, n_bytes, n_pages, n_chars, n_tokens, n_chunks, chunk_tokens, "
    "tokenizer_fp, warnings FROM documents ORDER BY id",
    "SELECT doc_id, number, label, char_start, char_end, text FROM pages ORDER BY doc_id, number",
    "SELECT doc_id, idx, tok_start, tok_end, char_start, char_end, page_first, page_last, text FROM chunks "
    "ORDER BY doc_id, idx",
    "SELECT doc_id, dtype, ids FROM tokens ORDER BY doc_id",
    "SELECT doc_id, model_fp, status, n_tokens_done, n_chunks_done, n_tokens_total, last_error FROM prefill_states "
    "ORDER BY doc_id",
    "SELECT doc_id, model_fp, kind, data FROM traces ORDER BY doc_id, model_fp, kind, id",
]
LINE = re.compile(r"\[(\w+)\s*\]\s*(?:([\d.]+)%)?\s*(.*)")
# x86-64 / aarch64 numbers of the calls a commit blocks in
COMMIT_SYSCALLS = {"x86_64": {74: "fsync", 75: "fdatasync", 26: "msync", 82: "rename", 264: "renameat",
                              316: "renameat2"},
                   "aarch64": {82: "fsync", 83: "fdatasync", 227: "msync", 38: "renameat", 276: "renameat2"}}
OTHER_SYSCALLS = {"x86_64": {0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 61: "wait4",
                             202: "futex", 232: "epoll_wait", 285: "fallocate"}}
TARGETS = ("parse", "tokenize", "store", "prefill", "checkpoint", "final commit")


def env(block_chunks: int, checkpoint_every: int) -> dict:
    return dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), DRT_DEVICE="cpu",
                PYTHONPATH=str(ROOT), DRT_PREFILL_BLOCK_CHUNKS=str(block_chunks),
                DRT_PREFILL_CHECKPOINT_EVERY=str(checkpoint_every))


def ingest_cmd(home: Path, doc: Path, model: str | None) -> list[str]:
    cmd = [sys.executable, str(ROOT / "app.py"), "--home", str(home), "-v"]
    if model:
        cmd += ["--model", model]
    return cmd + ["ingest", str(doc), "--json"]


def digest(home: Path) -> dict[str, str]:
    """sha256 of the library's content rows and of every prefilled state (rows 0..n of each
    chunk-store file, the carry tensors, the commit record without its file names)."""
    from safetensors.numpy import load_file

    out = {}
    con = sqlite3.connect(f"file:{home / 'library.db'}?mode=ro", uri=True)
    try:
        out["integrity"] = con.execute("PRAGMA integrity_check").fetchone()[0]
        for q in LIBRARY_QUERIES:
            h = hashlib.sha256()
            for row in con.execute(q):
                h.update(repr(row).encode())
            out[f"library.{q.split(' FROM ')[1].split()[0]}"] = h.hexdigest()[:16]
        dirs = [r[0] for r in con.execute("SELECT state_dir FROM prefill_states ORDER BY doc_id")]
    finally:
        con.close()
    for i, d in enumerate(dirs):
        sdir = Path(d) if Path(d).is_absolute() or Path(d).exists() else home / d
        meta = json.loads((sdir / "meta.json").read_text())
        h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != "carry"}, sort_keys=True).encode())
        for name, (dt, shape) in MEMMAPS.items():
            if (sdir / name).exists():
                a = np.fromfile(sdir / name, dtype=dt(meta)).reshape(-1, *shape(meta))[: meta["n"]]
                h.update(name.encode() + a.tobytes())
        for k, v in sorted(load_file(str(sdir / meta["carry"])).items()):
            h.update(k.encode() + v.tobytes())
        out[f"state.{i}"] = h.hexdigest()[:16]
    return out


def library_whole(home: Path) -> str:
    """'ok', or what is wrong with the library as a crash left it (read-only: nothing repaired)."""
    db = home / "library.db"
    if not db.exists():
        return "ok"  # killed before the library was created
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            ic = con.execute("PRAGMA integrity_check").fetchone()[0]
            if ic != "ok":
                return f"integrity_check: {ic}"
            if "documents" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}:
                return "ok"  # killed while the schema was being created (its own transaction)
            for doc_id, n_chunks, n_pages in con.execute("SELECT id, n_chunks, n_pages FROM documents").fetchall():
                c = con.execute("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", (doc_id,)).fetchone()[0]
                p = con.execute("SELECT COUNT(*) FROM pages WHERE doc_id = ?", (doc_id,)).fetchone()[0]
                t = con.execute("SELECT COUNT(*) FROM tokens WHERE doc_id = ?", (doc_id,)).fetchone()[0]
                if (c, p, t) != (n_chunks, n_pages, 1):
                    return f"half-written document {doc_id[:12]}: {c} chunks, {p} pages, {t} token rows"
        finally:
            con.close()
    except sqlite3.Error as e:
        return f"{type(e).__name__}: {e}"
    return "ok"


class Run:
    """One `drt-reader -v ingest` child, its progress lines timestamped as they arrive on stderr."""

    def __init__(self, home: Path, doc: Path, model: str | None, e: dict):
        self.t0, self.home = time.monotonic(), str(Path(home).resolve())
        self.proc = subprocess.Popen(ingest_cmd(home, doc, model), env=e, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.events: list[tuple[float, str, float | None, str]] = []  # (s since start, stage, percent, message)
        self.text = ""
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        fd, buf = self.proc.stderr.fileno(), b""
        while True:
            b = os.read(fd, 65536)
            t = time.monotonic() - self.t0
            if not b:
                break
            buf += b
            parts = re.split(rb"\r|\n|\x1b\[K", buf)  # each progress print ends with ESC[K and is flushed
            buf = parts.pop()
            for raw in parts:
                self._line(t, raw.decode("utf-8", "replace"))
        if buf:
            self._line(time.monotonic() - self.t0, buf.decode("utf-8", "replace"))
        with self.cond:
            self.cond.notify_all()

    def _line(self, t: float, line: str) -> None:
        with self.cond:
            self.text += line + "\n"
            m = LINE.match(line.strip())
            if m:
                self.events.append((t, m.group(1), float(m.group(2)) if m.group(2) else None, m.group(3)))
                self.cond.notify_all()

    def wait_event(self, pred, timeout: float) -> float | None:
        """Wait for the first event matching pred; its time (s since start), or None if the run
        ended or the timeout passed first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ev in self.events:
                    if pred(ev):
                        return ev[0]
                left = deadline - time.monotonic()
                if left <= 0 or not self.reader.is_alive():
                    return None
                self.cond.wait(min(left, 0.05))

    def sleep_until(self, t: float) -> bool:
        """Sleep until t s after the start; False if the run ended first."""
        try:
            self.proc.wait(timeout=max(0.0, self.t0 + t - time.monotonic()))
            return False
        except subprocess.TimeoutExpired:
            return True

    def syscall(self) -> str | None:
        """The system call the main thread is in ("running" when none), with the file of its
        first argument for fsync/fdatasync (e.g. "fsync states/.../k.bin"): from /proc."""
        try:
            parts = Path(f"/proc/{self.proc.pid}/syscall").read_text().split()
        except OSError:
            return None
        if not parts or not parts[0].lstrip("-").isdigit():
            return parts[0] if parts else None
        arch = os.uname().machine
        nr = int(parts[0])
        call = {**OTHER_SYSCALLS.get(arch, {}), **COMMIT_SYSCALLS.get(arch, {})}.get(nr, f"syscall {nr}")
        if call in ("fsync", "fdatasync") and len(parts) > 1:
            try:
                f = os.readlink(f"/proc/{self.proc.pid}/fd/{int(parts[1], 16)}")
                if f.startswith(self.home + "/"):
                    f = f[len(self.home) + 1:]
                    f = f"states/.../{f.rsplit('/', 1)[-1]}" if f.startswith("states/") else f
                call += " " + f
            except (OSError, ValueError):
                pass
        return call

    def wait_commit(self, timeout: float) -> bool:
        """Poll until the main thread is in a commit's system call (fsync, fdatasync, msync,
        rename); False if the run ended or the timeout passed first."""
        deadline = time.monotonic() + timeout
        commit = set(COMMIT_SYSCALLS.get(os.uname().machine, {}).values())
        while time.monotonic() < deadline and self.proc.poll() is None:
            c = self.syscall()
            if c is not None and c.split()[0] in commit:
                return True
            time.sleep(0.0002)
        return False

    def kill(self) -> tuple[float, str | None]:
        """SIGKILL now; (moment in s since start, the system call the main thread was in)."""
        call = self.syscall()
        t = time.monotonic() - self.t0
        self.proc.send_signal(signal.SIGKILL)
        return t, call

    def finish(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return rc


def phase_at(events: list, t: float, call: str | None = None) -> str:
    """The ingest phase at t, from the last progress line printed before it."""
    last = [ev for ev in events if ev[0] <= t]
    if not last:
        return "start-up"  # interpreter, imports, the library opened
    _, stage, pct, msg = last[-1]
    if stage == "parse":
        return "load model" if (pct or 0) >= 100 else "parse"
    if stage == "store":
        return "store" if msg.startswith("storing") else "prefill"  # "stored": the state is being opened
    if stage == "prefill":
        if (pct or 0) >= 100:
            return "final commit"
        if call is not None and call.split()[0] in ("fsync", "fdatasync", "msync", "rename", "renameat", "renameat2"):
            return "commit (during prefill)"
        return "prefill"
    if stage == "done":
        return "exit"
    return stage  # hash, tokenize


def stage_windows(events: list, wall: float) -> dict[str, tuple]:
    """{target: (predicate of its first progress line, its duration in this run)} from a run's timeline."""
    def first(pred):
        return next((ev[0] for ev in events if pred(ev)), None)

    preds = {
        "parse": lambda ev: ev[1] == "parse",
        "load model": lambda ev: ev[1] == "parse" and (ev[2] or 0) >= 100,
        "tokenize": lambda ev: ev[1] == "tokenize",
        "store": lambda ev: ev[1] == "store" and ev[3].startswith("storing"),
        "stored": lambda ev: ev[1] == "store" and ev[3] == "stored",
        "prefill": lambda ev: ev[1] == "prefill",
        "final commit": lambda ev: ev[1] == "prefill" and (ev[2] or 0) >= 100,
        "done": lambda ev: ev[1] == "done",
    }
    preds["checkpoint"] = preds["prefill"]  # a commit inside the prefill: its window is the prefill's
    at = {k: first(p) for k, p in preds.items()}
    ends = {"parse": "load model", "tokenize": "store", "store": "stored", "prefill": "final commit",
            "checkpoint": "final commit", "final commit": "done"}
    out = {}
    for k in TARGETS:
        a, b = at.get(k), at.get(ends[k])
        if a is not None and b is not None:
            out[k] = (preds[k], max(b - a, 0.0))
    return out


def run_to_end(home: Path, doc: Path, model: str | None, e: dict, limit: float) -> tuple[int, float, Run]:
    r = Run(home, doc, model, e)
    try:
        rc = r.finish(limit)
    except subprocess.TimeoutExpired:
        r.proc.kill()
        rc = r.finish(30)
    return rc, time.monotonic() - r.t0, r


def cut_pdf(pdf: Path, pages: int, out_dir: Path) -> Path:
    import pymupdf

    src = pymupdf.open(pdf)
    if pages >= src.page_count:
        return pdf
    dst = pymupdf.open()
    dst.insert_pdf(src, from_page=0, to_page=pages - 1)
    out = out_dir / f"{pdf.stem}-pp1-{pages}.pdf"
    dst.save(out, garbage=3, deflate=True)
    return out


def run_trials(doc: Path, trials: int, seed: int, work: Path, model: str | None = None, block_chunks: int = 4,
               checkpoint_every: int = 2, uniform_share: float = 0.5, targets: tuple[str, ...] = TARGETS,
               log=print) -> dict:
    e = env(block_chunks, checkpoint_every)
    ref_home = work / "reference"
    rc, wall1, r1 = run_to_end(ref_home, doc, model, e, 3600)
    if rc != 0:
        raise SystemExit(f"bench.faults: the reference ingest failed (rc {rc}): {r1.text.strip().splitlines()[-1:]}")
    ref = digest(ref_home)
    # a second uninterrupted run: the same bits (else nothing can be compared); the faster of the
    # two gives the timeline over which the kills are spread (on a shared machine a run slowed
    # by other jobs would put many kills after the end)
    rc, wall, r = run_to_end(work / "reference-2", doc, model, e, 3600)
    if rc != 0 or digest(work / "reference-2") != ref:
        raise SystemExit("bench.faults: two uninterrupted ingests of the same file differ: nothing to compare")
    shutil.rmtree(work / "reference-2", ignore_errors=True)
    if wall1 < wall:
        wall, r = wall1, r1
    windows = stage_windows(r.events, wall)
    timeline = {k: round(d, 3) for k, (_, d) in windows.items()}
    log(f"reference: {wall:.1f} s (the faster of two runs); stage durations (s): {timeline}; {ref}")
    calibrations = [round(wall, 1)]
    rng = random.Random(seed)
    n_uniform = round(trials * uniform_share)
    # interleave the two kinds: trial t is uniform when it is among the first n_uniform of a
    # seeded shuffle; targeted trials go round the stages in order
    kinds = ["uniform"] * n_uniform + ["targeted"] * (trials - n_uniform)
    rng.shuffle(kinds)
    targets = [k for k in targets if k in windows]
    aim_at = targets or None
    rows = []
    n_targeted = 0
    for t in range(trials):
        home = work / f"trial-{t:03d}"
        frac = rng.random()
        run = Run(home, doc, model, e)
        if kinds[t] == "uniform" or aim_at is None:
            aim = "uniform"
            alive = run.sleep_until(frac * wall)
        else:
            aim = targets[n_targeted % len(targets)]
            n_targeted += 1
            pred, dur = windows[aim]
            start = run.wait_event(pred, 3600)
            alive = start is not None and run.sleep_until(start + frac * dur)
            if aim == "checkpoint" and alive:  # then the next moment it is inside a commit's fsync/rename
                alive = run.wait_commit(3600)
        if alive:
            at, call = run.kill()
            phase = phase_at(run.events, at, call)
        else:
            at, call, phase = time.monotonic() - run.t0, None, "finished before the kill"
        if run.finish(3600) == 0 and phase != "finished before the kill":
            phase = "finished before the kill"  # it exited between the last check and the signal
        if phase == "finished before the kill" and any(ev[1] == "done" for ev in run.events):
            full = time.monotonic() - run.t0
            if full < wall:  # the machine got faster: recalibrate on this complete run
                wall = full
                windows.update(stage_windows(run.events, wall))
                calibrations.append(round(wall, 1))
                log(f"recalibrated on trial {t}'s complete run: {wall:.1f} s")
        after_kill = library_whole(home)
        restarts, stored_before = 0, None
        while True:  # run again until it completes (a resume)
            rc, _, again = run_to_end(home, doc, model, e, 3600)
            if restarts == 0:
                stored_before = any(ev[1] == "store" and "already in the library" in ev[3] for ev in again.events)
            restarts += 1
            if rc == 0 or restarts >= 3:
                break
        got = digest(home) if (home / "library.db").exists() else {}
        same = got == ref
        rows.append({"trial": t, "aim": aim, "kill_s": round(at, 3), "phase": phase, "syscall": call,
                     "library_after_kill": after_kill, "document_stored_before_kill": stored_before,
                     "resume_rc": rc, "resumes": restarts, "identical": same,
                     "diff": [k for k in ref if got.get(k) != ref[k]]})
        log(f"trial {t}: {aim} kill at {at:.2f} s in {phase} ({call}); library after the kill: {after_kill}; "
            f"resumed rc {rc}{' (the document was stored)' if stored_before else ''}; "
            f"{'bit-identical' if same else 'DIFFERENT: ' + ', '.join(rows[-1]['diff'])}"
            + ("" if rc == 0 else f"; last output: {again.text.strip().splitlines()[-1:]}"))
        shutil.rmtree(home, ignore_errors=True)
    return {"document": str(doc), "trials": trials, "seed": seed, "reference_s": round(wall, 1),
            "stage_s": timeline, "calibrations_s": calibrations, "identical": sum(r["identical"] for r in rows),
            "library_whole_after_kill": sum(r["library_after_kill"] == "ok" for r in rows),
            "phases": dict(Counter(r["phase"] for r in rows)), "rows": rows, "reference": ref}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.faults", description=__doc__.splitlines()[0])
    p.add_argument("--pdf", required=True, help="the document to ingest (a PDF, or any file ingest takes)")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pages", type=int, default=0, help="ingest only the first N pages of a PDF (0: all)")
    p.add_argument("--uniform-share", type=float, default=0.5,
                   help="share of trials killed uniformly over the whole run (the rest aim at each stage in turn)")
    p.add_argument("--block-chunks", type=int, default=4, help="DRT_PREFILL_BLOCK_CHUNKS of every run")
    p.add_argument("--checkpoint-every", type=int, default=2, help="DRT_PREFILL_CHECKPOINT_EVERY of every run")
    p.add_argument("--model", default=None, help="checkpoint (default: the shipped one)")
    p.add_argument("--work", default=None, help="scratch directory (default: a temporary one, removed)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    work = (Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="drt-faults-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        doc = Path(a.pdf)
        if not doc.is_file():
            raise SystemExit(f"bench.faults: no such file: {doc}")
        if a.pages:
            doc = cut_pdf(doc, a.pages, work)
        log = (lambda s: print(s, file=sys.stderr, flush=True)) if a.json else (lambda s: print(s, flush=True))
        if a.pages:
            log(f"ingesting the first {a.pages} pages of {a.pdf} only ({doc.name})")
        res = run_trials(doc, a.trials, a.seed, work, a.model, a.block_chunks, a.checkpoint_every,
                         a.uniform_share, log=log)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    res["pages"] = a.pages or "all"
    res["command"] = "drt-reader bench faults " + " ".join(argv if argv is not None else sys.argv[1:])
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{res['identical']} of {res['trials']} trials resumed bit-identical; the library was whole right "
              f"after {res['library_whole_after_kill']} of {res['trials']} kills; kills by phase: {res['phases']}")
    return 0 if res["identical"] == res["trials"] == res["library_whole_after_kill"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
