"""Resumable prefill with the REAL engine: SIGKILL a real `app.py ingest` process in the middle of
its prefill, run it again; it goes on from the last checkpoint (not from token 0) and ends with the
same states as an uninterrupted run, bit for bit.

Why bit-identical is expected: on CPU the computation is deterministic, a resumed prefill restarts at
a committed checkpoint, which lies on a block boundary of the uninterrupted run (the engine aligns
blocks to multiples of block_chunks * 63 real tokens from token 0), and the carried state (sliding
windows, selection, partial-chunk buffers) is restored exactly from safetensors. Both runs use the
same DRT_PREFILL_BLOCK_CHUNKS, so every block is computed on the same inputs with the same shapes.

Cost: three child processes on the Frankenstein excerpt written three times (32.6k tokens; one
killed early), about 2.5 prefills; ~30 s of CPU with OMP_NUM_THREADS=1. The document is long
enough that the kill lands mid-prefill however fast the prefill gets (the 10.9k-token excerpt alone
took 1.7 s once the prefill deferred the upper layers, and a kill 0.3 s after the first commit
found the ingest done: CI, 2026-12-05).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "checkpoints" / "drt-tiny"
MEMMAPS = {  # file -> (dtype from meta or fixed, row shape from meta)
    "key.f32": (lambda m: np.float32, lambda m: (m["D"],)),
    "k.bin": (lambda m: np.dtype(m["dtype"]), lambda m: (m["N"], m["D"])),
    "v.bin": (lambda m: np.dtype(m["dtype"]), lambda m: (m["N"], m["D"])),
    "sel_idx.i32": (lambda m: np.int32, lambda m: (m["G"], m["k"])),
    "sel_w.f32": (lambda m: np.float32, lambda m: (m["G"], m["k"])),
}
# small blocks and frequent commits: a wide window in which a kill lands between two checkpoints
BLOCK_CHUNKS, CHECKPOINT_EVERY = 4, 2
COMMIT_TOKENS = BLOCK_CHUNKS * CHECKPOINT_EVERY * 63


def _needs_real_engine() -> None:
    try:
        import drt_core.engine  # noqa: F401
    except ModuleNotFoundError as e:
        pytest.skip(f"drt_core.engine is not built yet ({e})")
    if not (MODEL / "config.json").exists():
        pytest.skip("no shipped checkpoint in checkpoints/drt-tiny")


def _env() -> dict:
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "DRT_DEVICE": "cpu",
            "PYTHONPATH": str(ROOT),
            "DRT_PREFILL_BLOCK_CHUNKS": str(BLOCK_CHUNKS),
            "DRT_PREFILL_CHECKPOINT_EVERY": str(CHECKPOINT_EVERY),
        }
    )
    return env


def _cmd(home: Path, doc: Path) -> list[str]:
    return [sys.executable, str(ROOT / "app.py"), "--home", str(home), "-v", "ingest", str(doc), "--json"]


def _row(home: Path) -> tuple[str, int, int, str] | None:
    """(status, n_tokens_done, n_tokens_total, state_dir) of the only prefill row, read-only."""
    db = home / "library.db"
    if not db.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute(
                "SELECT status, n_tokens_done, n_tokens_total, state_dir FROM prefill_states"
            ).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return (row[0], int(row[1]), int(row[2]), row[3]) if row else None


def _meta(sdir: Path) -> dict:
    return json.loads((sdir / "meta.json").read_text())


def _state(sdir: Path) -> tuple[dict, dict[str, np.ndarray], dict]:
    """meta.json, the memmaps' first n rows, and the carry tensors it names."""
    from safetensors.numpy import load_file

    meta = _meta(sdir)
    n = meta["n"]
    arrays = {}
    for name, (dt, shape) in MEMMAPS.items():
        a = np.fromfile(sdir / name, dtype=dt(meta))
        arrays[name] = a.reshape(-1, *shape(meta))[:n]
    return meta, arrays, load_file(str(sdir / meta["carry"]))


def test_killed_ingest_resumes_and_matches_an_uninterrupted_run(tmp_path, assets):
    _needs_real_engine()
    doc = tmp_path / "frankenstein_x3.txt"
    doc.write_text((assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8") * 3, encoding="utf-8")
    home_a, home_b = tmp_path / "interrupted", tmp_path / "reference"

    # 1. start an ingest and SIGKILL it once the library shows a committed checkpoint, a little
    #    later, so that blocks past that checkpoint are in flight (computed, not committed)
    proc = subprocess.Popen(_cmd(home_a, doc), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    killed_at = None
    while time.monotonic() < deadline and proc.poll() is None:
        row = _row(home_a)
        if row and 0 < row[1] < row[2]:
            time.sleep(0.1)
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = row[1]
            break
        time.sleep(0.05)
    _, err = proc.communicate()
    assert killed_at is not None, (
        "the prefill finished (or never committed) before it could be killed; "
        f"rc={proc.returncode}, stderr tail: {err.decode(errors='replace')[-500:]}"
    )
    assert proc.returncode == -signal.SIGKILL

    # 2. what a restart will find: a partial row that claims no more than the disk holds
    status, n_row, total, sdir = _row(home_a)
    sdir = Path(sdir)
    n_disk = _meta(sdir)["n_tokens"]
    assert status == "partial"
    assert 0 < n_row <= n_disk < total  # the row never claims more than the commit record
    assert n_disk % COMMIT_TOKENS == 0  # commits land on block boundaries

    # 3. run it again: it resumes at the committed count (logged by the pipeline with -v)
    resumed = subprocess.run(_cmd(home_a, doc), env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    m = re.search(r"prefill of \w+ resuming at (\d+) of (\d+) tokens", resumed.stderr)
    assert m, f"the second run did not resume: {resumed.stderr[-800:]}"
    assert (int(m.group(1)), int(m.group(2))) == (n_disk, total)

    # 4. an uninterrupted run in another home
    ref = subprocess.run(_cmd(home_b, doc), env=_env(), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr
    assert "resuming at" not in ref.stderr
    a = json.loads(resumed.stdout.strip().splitlines()[-1])
    b = json.loads(ref.stdout.strip().splitlines()[-1])
    assert (a["doc_id"], a["tokens"], a["chunks"]) == (b["doc_id"], b["tokens"], b["chunks"])
    assert a["tokens"] == total

    # 5. the same library rows and dependency maps
    for home in (home_a, home_b):
        st, done, tot, _ = _row(home)
        assert (st, done, tot) == ("done", total, total)
    dep = []
    for home in (home_a, home_b):
        con = sqlite3.connect(home / "library.db")
        (data,) = con.execute("SELECT data FROM traces WHERE kind = 'dependency_map'").fetchone()
        dep.append(json.loads(data))
        con.close()
    assert dep[0] == dep[1]

    # 6. the same states, bit for bit: meta.json, the memmaps up to n, the carried decoder state
    sdir_b = Path(_row(home_b)[3])
    assert sdir.relative_to(home_a) == sdir_b.relative_to(home_b)  # same doc id, same model fp
    meta_a, arr_a, carry_a = _state(sdir)
    meta_b, arr_b, carry_b = _state(sdir_b)
    assert meta_a == meta_b
    assert meta_a["n_tokens"] == total and meta_a["n"] == total // 63
    for name in MEMMAPS:
        x, y = arr_a[name], arr_b[name]
        assert x.shape == y.shape and x.shape[0] == meta_a["n"], name
        assert x.tobytes() == y.tobytes(), (
            f"{name} differs after resume: {int((x != y).sum())} values, "
            f"max |diff| {float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max())}"
        )
    assert sorted(carry_a) == sorted(carry_b)
    for k in carry_a:
        assert carry_a[k].tobytes() == carry_b[k].tobytes(), f"carry tensor {k} differs after resume"
    # nothing but the committed files (and at most a torn temporary of the killed run) remains
    names_a = {p.name for p in sdir.iterdir() if not p.name.endswith(".tmp")}
    names_b = {p.name for p in sdir_b.iterdir()}
    assert names_b <= names_a and all(n.startswith("carry-") for n in names_a - names_b), names_a ^ names_b
