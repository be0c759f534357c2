"""Rows 16-20 of the reliability plan: SIGKILLs during sqlite writes, a full disk for the database
and for the chunk memmaps, writers contending for the lock, a crash after each step of the
chunk-store commit. (Rows 21-22, resume and cancel, are tests/ingest/test_pipeline.py's.)"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cli_io import UserError

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")

_WRITER = r"""
import sys
from store.library import Library
lib = Library(sys.argv[1])
tag, n_chunks = sys.argv[2], 400
print("ready", flush=True)
for i in range(10**6):
    doc_id = f"{tag}{i:06d}".ljust(64, "0")
    doc = {"id": doc_id, "title": doc_id[:8], "kind": "text", "source_name": "x.txt", "n_bytes": 1,
           "n_pages": 20, "n_chars": 1, "n_tokens": n_chunks * 63, "n_chunks": n_chunks, "chunk_tokens": 63,
           "tokenizer_fp": "t", "warnings": []}
    pages = [{"number": p, "label": str(p), "char_start": 0, "char_end": 1, "text": "page " * 50} for p in range(1, 21)]
    chunks = [{"idx": c, "tok_start": c * 63, "tok_end": c * 63 + 63, "char_start": 0, "char_end": 1,
               "page_first": 1, "page_last": 1, "text": f"chunk {c} " * 20} for c in range(n_chunks)]
    lib.add_document(doc, pages, chunks, list(range(n_chunks * 63)))
    lib.set_prefill_state(doc_id, "fp", status="partial", n_tokens_done=0, n_chunks_done=0,
                          n_tokens_total=n_chunks * 63, state_dir="x")
"""


def _check_library(db: Path) -> int:
    """integrity_check passes and every document is whole; returns the number of documents."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        docs = con.execute("SELECT id, n_chunks, n_pages FROM documents").fetchall()
        for doc_id, n_chunks, n_pages in docs:
            assert con.execute("SELECT count(*) FROM chunks WHERE doc_id = ?", [doc_id]).fetchone()[0] == n_chunks
            assert con.execute("SELECT count(*) FROM pages WHERE doc_id = ?", [doc_id]).fetchone()[0] == n_pages
            assert con.execute("SELECT count(*) FROM tokens WHERE doc_id = ?", [doc_id]).fetchone()[0] == 1
        orphans = con.execute("SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
        assert orphans.fetchone()[0] == 0
        return len(docs)
    finally:
        con.close()


def test_twenty_sigkills_during_sqlite_writes(tmp_path):
    """Row 16: a writer adding 400-chunk documents is SIGKILLed 20 times at random moments."""
    rng = random.Random(16)
    home = tmp_path / "home"
    counts = []
    for k in range(20):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(home), f"{k:02x}"], env=ENV, cwd=str(ROOT),
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.4))
        proc.kill()
        proc.wait()
        proc.stdout.close()
        counts.append(_check_library(home / "library.db"))
    assert counts[-1] > 0 and counts == sorted(counts)  # work was done and none was lost


def test_two_writer_processes_contend_for_the_lock(tmp_path):
    """Row 18: two processes write at once (each write is BEGIN IMMEDIATE, including the
    read-then-write upserts): no "database is locked" error, every document whole."""
    home = tmp_path / "home"
    from store.library import Library

    Library(home).close()  # migrated once, before the race
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER.replace("range(10**6)", "range(15)"), str(home), tag],
                         env=ENV, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        for tag in ("aa", "bb")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "locked" not in err
    assert _check_library(home / "library.db") == 30


def test_full_database_is_a_clean_one_line_error(tmp_path, library, drt_home):
    """Row 17: the database cannot grow (PRAGMA max_page_count, SQLite's own disk-full fault) while
    a document is stored: LibraryFull, rolled back, integrity ok, nothing half-written."""
    from ingest.pipeline import ingest
    from store.errors import LibraryFull
    from tests.ingest.conftest import snapshot

    src = tmp_path / "doc.txt"
    src.write_text("Words to store in a library whose disk is full. " * 3000)
    before = snapshot(drt_home)
    pages = library._w.conn.execute("PRAGMA page_count").fetchone()[0]
    library._w.conn.execute(f"PRAGMA max_page_count = {pages + 3}")
    with pytest.raises(LibraryFull, match="full") as e:
        ingest(src, library=library, engine=None, prefill=False)
    assert "\n" not in str(e.value) and isinstance(e.value, UserError)
    assert snapshot(drt_home) == before
    assert library._r.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    library._w.conn.execute("PRAGMA max_page_count = 1073741823")  # space freed: it works
    assert ingest(src, library=library, engine=None, prefill=False).status == "stored"


# -- row 20: a full disk under the chunk memmaps --------------------------------------------------

_PREFILL = r"""
import sys, resource
from pathlib import Path
from drt_core.engine import Engine
from cli_io import UserError
from ingest import pipeline
from store.library import Library
home, model, doc, states, fsize = sys.argv[1:6]
if int(fsize):
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(fsize), int(fsize)))
pipeline.state_dir = lambda h, d, fp: Path(states) / d[:12] / fp
lib = Library(home)
try:
    res = pipeline.ingest(doc, library=lib, engine=Engine.from_pretrained(model))
    print("OK", res.status)
except Exception as e:
    print("ERROR", type(e).__name__, isinstance(e, UserError), e)
"""


def _small_tmpfs_available() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m none /mnt"], capture_output=True)
    return r.returncode == 0


def _doc(tmp_path) -> Path:
    src = tmp_path / "doc.txt"
    src.write_text("A document long enough to need many chunks of states on disk. " * 1500)
    return src


def test_memmaps_past_the_file_size_limit(tmp_path, tiny_model):
    """Row 20 (runs anywhere): RLIMIT_FSIZE of 16 MB under a prefill whose memmaps want more:
    a one-line error (EFBIG), the process alive, no SIGBUS."""
    cmd = [sys.executable, "-c", _PREFILL, str(tmp_path / "home"), str(tiny_model), str(_doc(tmp_path)),
           str(tmp_path / "states"), str(16 * 2**20)]  # fmt: skip
    r = subprocess.run(cmd, env=ENV, cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ERROR IngestError True no space left"), r.stdout
    assert "\n" not in r.stdout.strip()


@pytest.mark.skipif(not _small_tmpfs_available(), reason="cannot mount a small tmpfs (unshare -rm)")
def test_memmaps_on_a_full_disk_fail_cleanly_without_sigbus(tmp_path, tiny_model):
    """Row 20: the states directory on a 2 MB tmpfs that fills during prefill. Regression: the
    memmaps were sparse files and the first write into a hole on the full disk was a SIGBUS that
    killed the process (exit -7). Now: a one-line error, and the library still opens."""
    script = tmp_path / "prefill.py"
    script.write_text(_PREFILL)
    inner = (f"mount -t tmpfs -o size=2m none /mnt && {sys.executable} {script} {tmp_path / 'home'} "
             f"{tiny_model} {_doc(tmp_path)} /mnt/states 0")  # fmt: skip
    r = subprocess.run(["unshare", "-rm", "sh", "-c", inner], env=ENV, cwd=str(ROOT), capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("ERROR IngestError True no space left"), r.stdout
    from store.library import Library

    with Library(tmp_path / "home") as lib:
        (doc,) = lib.documents()
        assert doc["prefill"][0]["status"] == "partial"
        assert "No space left" in doc["prefill"][0]["last_error"]
    assert _check_library(tmp_path / "home" / "library.db") == 1


# -- row 19: a crash after each step of the chunk-store commit ------------------------------------


class _Crash(BaseException):
    pass


def test_crash_after_each_step_of_the_state_commit(tmp_path, monkeypatch):
    """Row 19: the commit of a checkpoint is: memmap flush, fsync of the six data files, the carry
    file (write, fsync, rename, directory fsync), then meta.json (write, fsync, rename = the commit,
    directory fsync). The process "dies" (an exception nothing catches, the state abandoned) after
    each of those steps in turn; reopening finds the last commit or the new one, never a mix, leaves
    no temporary or orphan files, and resuming ends in the states of an uninterrupted run."""
    from drt_core.engine import Engine
    from tests.drt_core.test_engine import ids_of, make_model

    m = make_model()
    ids = ids_of(63 * 8 + 5, seed=3)[0].tolist()
    ref = Engine(m, memory_dtype=np.float32).open_state(tmp_path / "ref")
    list(ref.engine.prefill(ref, ids, block_chunks=2))

    real_fsync, real_replace = os.fsync, os.replace
    step = {"n": 0, "at": None}

    def counted(fn):
        def wrapper(*a, **k):
            out = fn(*a, **k)
            step["n"] += 1
            if step["at"] is not None and step["n"] == step["at"]:
                raise _Crash(step["n"])
            return out

        return wrapper

    monkeypatch.setattr(os, "fsync", counted(real_fsync))
    monkeypatch.setattr(os, "replace", counted(real_replace))
    first = 2 * 63  # the first checkpoint (one block of two chunks)
    k, crashes = 1, 0
    while True:
        d = tmp_path / f"crash-{k}"
        eng = Engine(m, memory_dtype=np.float32)
        st = eng.open_state(d)
        gen = eng.prefill(st, ids, block_chunks=2, checkpoint_every=1)
        next(gen)  # the first checkpoint is committed
        step.update(n=0, at=k)
        try:
            next(gen)  # the second block and its checkpoint: dies at step k
        except _Crash:
            crashes += 1
        else:
            break  # k is past the last step of one commit
        finally:
            step["at"] = None
        del gen, st
        st = Engine(m, memory_dtype=np.float32).open_state(d)
        assert st.n_tokens in (first, 2 * first), (k, st.n_tokens)
        names = sorted(p.name for p in d.iterdir())
        assert not [n for n in names if n.endswith(".tmp")], (k, names)
        assert [n for n in names if n.startswith("carry-")] == [f"carry-{st.n_tokens}.safetensors"], (k, names)
        list(st.engine.prefill(st, ids, block_chunks=2))
        assert st.n_tokens == len(ids)
        np.testing.assert_allclose(st.memory.keys(), ref.memory.keys(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(st.memory.selections()[0], ref.memory.selections()[0])
        k += 1
    assert crashes >= 12  # 6 data fsyncs + carry (fsync, rename, dir) + meta.json (fsync, rename, dir)
