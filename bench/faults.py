"""Fault injection into ingest: `drt-reader bench faults --pdf BOOK.pdf --trials 50 [--seed S]`.

One uninterrupted `drt-reader ingest` of the file gives the reference: its stored states (the
chunk memory's rows, the carry, the commit record) and its library rows (document, pages,
chunks, token ids). Then, per seeded trial, in a fresh library: an ingest is started, SIGKILLed
after a random delay drawn uniformly over a warm reference run's wall time (so kills land in every
phase: start-up, hash, parse, tokenize, the store transaction, prefill blocks and their commits,
the final commit), and started again until it finishes. A trial passes when the resumed library
and states are bit-identical to the reference's. The phase each kill landed in is read from the
ingest's own progress lines (`-v`).

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
]
STAGE = re.compile(r"\[(\w+)\s*\]")


def env(block_chunks: int, checkpoint_every: int) -> dict:
    e = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), DRT_DEVICE="cpu",
             PYTHONPATH=str(ROOT), DRT_PREFILL_BLOCK_CHUNKS=str(block_chunks),
             DRT_PREFILL_CHECKPOINT_EVERY=str(checkpoint_every))
    return e


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
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        out["integrity"] = ok
        for i, q in enumerate(LIBRARY_QUERIES):
            h = hashlib.sha256()
            for row in con.execute(q):
                h.update(repr(row).encode())
            out[f"library.{q.split(' FROM ')[1].split()[0]}"] = h.hexdigest()[:16]
        dirs = [r[0] for r in con.execute("SELECT state_dir FROM prefill_states ORDER BY doc_id")]
    finally:
        con.close()
    for d in dirs:
        sdir = Path(d) if Path(d).is_absolute() or Path(d).exists() else home / d
        meta = json.loads((sdir / "meta.json").read_text())
        h = hashlib.sha256(json.dumps({k: v for k, v in meta.items() if k != "carry"}, sort_keys=True).encode())
        for name, (dt, shape) in MEMMAPS.items():
            if (sdir / name).exists():
                a = np.fromfile(sdir / name, dtype=dt(meta)).reshape(-1, *shape(meta))[: meta["n"]]
                h.update(name.encode() + a.tobytes())
        for k, v in sorted(load_file(str(sdir / meta["carry"])).items()):
            h.update(k.encode() + v.tobytes())
        out[f"state.{len(out)}"] = h.hexdigest()[:16]
    return out


def run_to_end(home: Path, doc: Path, model: str | None, e: dict, limit: float) -> tuple[int, float, str]:
    t0 = time.monotonic()
    p = subprocess.run(ingest_cmd(home, doc, model), env=e, capture_output=True, text=True, timeout=limit)
    return p.returncode, time.monotonic() - t0, p.stderr


def last_stage(stderr: str) -> str:
    stages = STAGE.findall(stderr)
    return stages[-1] if stages else "start-up"


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
               checkpoint_every: int = 2, log=print) -> dict:
    e = env(block_chunks, checkpoint_every)
    ref_home = work / "reference"
    rc, wall, err = run_to_end(ref_home, doc, model, e, 3600)
    if rc != 0:
        raise SystemExit(f"bench.faults: the reference ingest failed (rc {rc}): {err.strip().splitlines()[-1:]}")
    ref = digest(ref_home)
    # a second uninterrupted run: the same bits (else nothing can be compared), and the wall time
    # of a warm run, over which the kills are spread
    rc, wall, err = run_to_end(work / "reference-2", doc, model, e, 3600)
    if rc != 0 or digest(work / "reference-2") != ref:
        raise SystemExit("bench.faults: two uninterrupted ingests of the same file differ: nothing to compare")
    shutil.rmtree(work / "reference-2", ignore_errors=True)
    log(f"reference: {wall:.1f} s (warm), {ref}")
    rng = random.Random(seed)
    rows = []
    for t in range(trials):
        home = work / f"trial-{t:03d}"
        delay = rng.uniform(0.0, wall)
        proc = subprocess.Popen(ingest_cmd(home, doc, model), env=e, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            proc.wait(timeout=delay)
            finished_first = True
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            finished_first = False
        _, err = proc.communicate()
        phase = "finished before the kill" if finished_first else last_stage(err)
        restarts = 0
        while True:  # run again until it completes (a resume)
            rc, _, err2 = run_to_end(home, doc, model, e, 3600)
            restarts += 1
            if rc == 0 or restarts >= 3:
                break
        got = digest(home) if (home / "library.db").exists() else {}
        same = got == ref
        rows.append({"trial": t, "delay_s": round(delay, 2), "phase": phase, "resume_rc": rc, "identical": same,
                     "diff": [k for k in ref if got.get(k) != ref[k]]})
        log(f"trial {t}: kill at {delay:.1f} s ({phase}); resumed rc {rc}; "
            f"{'bit-identical' if same else 'DIFFERENT: ' + ', '.join(rows[-1]['diff'])}")
        shutil.rmtree(home, ignore_errors=True)
    return {"document": str(doc), "trials": trials, "seed": seed, "reference_s": round(wall, 1),
            "identical": sum(r["identical"] for r in rows), "phases": dict(Counter(r["phase"] for r in rows)),
            "rows": rows, "reference": ref}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.faults", description=__doc__.splitlines()[0])
    p.add_argument("--pdf", required=True, help="the document to ingest (a PDF, or any file ingest takes)")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pages", type=int, default=0, help="ingest only the first N pages of a PDF (0: all)")
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
        log = (lambda s: print(s, file=sys.stderr, flush=True)) if a.json else print
        res = run_trials(doc, a.trials, a.seed, work, a.model, log=log)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    res["command"] = "drt-reader bench faults " + " ".join(argv if argv is not None else sys.argv[1:])
    if a.json:
        print(json.dumps(res))
    else:
        print(f"{res['identical']} of {res['trials']} trials resumed bit-identical; kills by phase: {res['phases']}")
    return 0 if res["identical"] == res["trials"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
