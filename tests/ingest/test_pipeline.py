"""ingest.pipeline with the fake engine: stages, same file = same document, cancel, resume, errors."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from ingest import pipeline
from ingest.errors import Cancelled, IngestError, PasswordRequired, UnsupportedFile
from ingest.pipeline import Progress, ingest, prefill_document, state_dir
from tests.ingest.conftest import snapshot
from tests.ingest.fake_engine import FakeEngine


def test_ingest_book(library, fake_engine, assets):
    seen: list[Progress] = []
    res = ingest(assets / "emma-pp2-21.pdf", library=library, engine=fake_engine, progress=seen.append)
    assert res.status == "done" and res.created
    assert (res.title, res.pages) == ("Emma", 20)
    assert res.chunks == -(-res.tokens // 63) and res.tokens_prefilled == res.tokens
    assert set(res.to_json()) == {"doc_id", "title", "pages", "tokens", "chunks", "seconds"}
    stages = [p.stage for p in seen]
    for a, b in zip(pipeline.STAGES, pipeline.STAGES[1:]):
        assert stages.index(a) < stages.index(b)
    prefill = [p for p in seen if p.stage == "prefill" and p.tokens_per_s]
    assert prefill and all(p.eta_s is not None and p.total == res.tokens for p in prefill)
    assert prefill[-1].done == res.tokens
    # the library holds it all
    doc = library.document(res.doc_id)
    assert doc["tokenizer_fp"] and doc["kind"] == "pdf"
    chunks = library.chunks(res.doc_id)
    assert len(chunks) == res.chunks and chunks[0]["page_first"] == 1 and chunks[-1]["page_last"] == 20
    assert len(library.token_ids(res.doc_id)) == res.tokens
    row = library.prefill_state(res.doc_id, fake_engine.fingerprint)
    assert (row["status"], row["n_tokens_done"], row["n_chunks_done"]) == ("done", res.tokens, res.chunks)
    dep = library.latest_trace(res.doc_id, fake_engine.fingerprint, "dependency_map")["data"]
    assert len(dep) == res.chunks and dep[5]["retrieved"]
    assert (state_dir(library.home, res.doc_id, fake_engine.fingerprint) / "meta.json").exists()


def test_same_file_twice_is_one_document(library, fake_engine, assets, tmp_path, monkeypatch):
    first = ingest(assets / "stacks-brauer.tex", library=library, engine=fake_engine)
    renamed = tmp_path / "another-name.txt"
    shutil.copy(assets / "stacks-brauer.tex", renamed)

    def no_parse(*a, **k):
        raise AssertionError("a known document must not be parsed again")

    monkeypatch.setattr(pipeline, "parse_file", no_parse)
    again = ingest(renamed, library=library, engine=fake_engine)
    assert again.doc_id == first.doc_id and not again.created and again.status == "done"
    assert fake_engine.prefill_calls == 1  # nothing left to prefill
    assert len(library.documents()) == 1


def test_engine_factory_is_called_only_after_parsing(library, assets):
    calls = []

    def factory():
        calls.append(1)
        raise AssertionError("must not load the model for a bad file")

    with pytest.raises(PasswordRequired):
        ingest(assets / "005-libreoffice-writer-password.pdf", library=library, engine=factory)
    assert calls == []


@pytest.mark.parametrize(
    "name, error",
    [
        ("random-bytes.pdf", UnsupportedFile),
        ("empty.txt", IngestError),
        ("017-unreadable-meta-data__unreadablemetadata.pdf", IngestError),
        ("005-libreoffice-writer-password.pdf", PasswordRequired),
    ],
)
def test_bad_inputs_leave_the_library_unchanged(library, fake_engine, assets, drt_home, name, error):
    ingest(assets / "015-arabic__habibi.pdf", library=library, engine=fake_engine)
    before = snapshot(drt_home)
    with pytest.raises(error):
        ingest(assets / name, library=library, engine=fake_engine)
    assert snapshot(drt_home) == before


def test_cancel_before_storing_writes_nothing(library, fake_engine, assets, drt_home):
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.stage == "tokenize":
            cancel.set()

    with pytest.raises(Cancelled):
        path = assets / "emma-pp2-21.pdf"
        ingest(path, library=library, engine=fake_engine, progress=progress, cancel=cancel)
    assert library.documents() == []


def _dependency_map(library, doc_id, fp):
    return library.latest_trace(doc_id, fp, "dependency_map")["data"]


def test_cancel_keeps_what_was_done_and_resume_finishes(library, test_tokenizer, assets, tmp_path):
    from store.library import Library

    engine = FakeEngine(test_tokenizer, batch_chunks=3, checkpoint_every=2)
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.stage == "prefill" and p.done >= 40 * 63:
            cancel.set()

    res = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine, progress=progress, cancel=cancel)
    assert res.status == "partial"
    row = library.prefill_state(res.doc_id, engine.fingerprint)
    assert row["status"] == "partial" and 0 < row["n_tokens_done"] < res.tokens
    assert row["n_tokens_done"] == engine.open_state(row["state_dir"]).n_tokens
    assert row["n_chunks_done"] == row["n_tokens_done"] // 63
    assert library.latest_trace(res.doc_id, engine.fingerprint, "dependency_map") is None

    again = ingest(assets / "emma-pp2-21.pdf", library=library, engine=engine)
    assert again.status == "done" and not again.created
    # the same result as an uninterrupted run
    other = Library(tmp_path / "other-home")
    try:
        ref = ingest(assets / "emma-pp2-21.pdf", library=other, engine=FakeEngine(test_tokenizer))
        fp = engine.fingerprint
        assert _dependency_map(library, res.doc_id, fp) == _dependency_map(other, ref.doc_id, fp)
    finally:
        other.close()


def test_engine_failure_is_recorded_and_resumable(library, test_tokenizer, assets):
    crashing = FakeEngine(test_tokenizer, batch_chunks=2, checkpoint_every=1, fail_at_chunk=30)
    with pytest.raises(RuntimeError, match="simulated"):
        ingest(assets / "stacks-brauer.tex", library=library, engine=crashing)
    (doc,) = library.documents()  # the document itself is complete and stays
    row = library.prefill_state(doc["id"], crashing.fingerprint)
    assert row["status"] == "partial" and row["n_tokens_done"] == 30 * 63
    assert "simulated engine failure" in row["last_error"]
    healthy = FakeEngine(test_tokenizer)
    row = prefill_document(library, healthy, doc["id"])
    assert row["status"] == "done" and row["last_error"] is None
    assert len(_dependency_map(library, doc["id"], healthy.fingerprint)) == doc["n_chunks"]


def test_prefill_row_claims_only_what_was_committed(library, test_tokenizer, assets):
    """Regression (real engine): the row followed `state.n_tokens`, the engine's IN-MEMORY progress,
    so after a crash or a kill it claimed tokens that no checkpoint held. It must say what a
    restart finds: meta.json's n_tokens (here the engine dies at chunk 28, last commit at 24)."""
    import json

    crashing = FakeEngine(test_tokenizer, batch_chunks=2, checkpoint_every=3, fail_at_chunk=28)
    with pytest.raises(RuntimeError, match="simulated"):
        ingest(assets / "stacks-brauer.tex", library=library, engine=crashing)
    (doc,) = library.documents()
    row = library.prefill_state(doc["id"], crashing.fingerprint)
    committed = json.loads((Path(row["state_dir"]) / "meta.json").read_text())["n_tokens"]
    assert committed == 24 * 63
    assert (row["status"], row["n_tokens_done"], row["n_chunks_done"]) == ("partial", 24 * 63, 24)
    assert crashing.open_state(row["state_dir"]).n_tokens == row["n_tokens_done"]


def test_a_second_prefill_of_the_same_document_is_refused(library, test_tokenizer, assets):
    """Regression (integration review): nothing stopped two prefills of one document (the CLI beside
    the UI, two UI tabs) from writing the same memmaps and carry files at once; one could delete the
    carry file the other's meta.json names. The second now fails at once and changes nothing."""
    from ingest.errors import PrefillBusy

    engine = FakeEngine(test_tokenizer)
    res = ingest(assets / "stacks-brauer.tex", library=library, engine=engine, prefill=False)
    sdir = state_dir(library.home, res.doc_id, engine.fingerprint)
    sdir.mkdir(parents=True)
    with pipeline.prefill_lock(sdir, res.doc_id):  # what a running prefill holds
        before = snapshot(library.home)
        with pytest.raises(PrefillBusy, match="being prefilled"):
            prefill_document(library, engine, res.doc_id)
        assert snapshot(library.home) == before and engine.prefill_calls == 0
    row = prefill_document(library, engine, res.doc_id)  # released: it runs
    assert row["status"] == "done"


def test_prefill_cadence_from_the_environment(library, test_tokenizer, assets, monkeypatch):
    seen = {}

    class Spy(FakeEngine):
        def prefill(self, state, ids, cancel=None, **kw):
            seen.update(kw)
            return super().prefill(state, ids, cancel=cancel, **kw)

    monkeypatch.setenv("DRT_PREFILL_BLOCK_CHUNKS", "3")
    monkeypatch.setenv("DRT_PREFILL_CHECKPOINT_EVERY", "5")
    ingest(assets / "015-arabic__habibi.pdf", library=library, engine=Spy(test_tokenizer))
    assert seen == {"block_chunks": 3, "checkpoint_every": 5}
    monkeypatch.setenv("DRT_PREFILL_BLOCK_CHUNKS", "zero")
    with pytest.raises(IngestError, match="DRT_PREFILL_BLOCK_CHUNKS"):
        ingest(assets / "026-latex-multicolumn__multicolumn.pdf", library=library, engine=Spy(test_tokenizer))


def test_lost_state_files_are_prefilled_again(library, fake_engine, assets):
    res = ingest(assets / "015-arabic__habibi.pdf", library=library, engine=fake_engine)
    shutil.rmtree(state_dir(library.home, res.doc_id, fake_engine.fingerprint))
    again = ingest(assets / "015-arabic__habibi.pdf", library=library, engine=fake_engine)
    assert again.status == "done" and fake_engine.prefill_calls == 2


def test_store_without_prefill(library, assets):
    res = ingest(assets / "015-arabic__habibi.pdf", library=library, engine=None, prefill=False)
    assert res.status == "stored" and library.document(res.doc_id)["n_tokens"] > 0


def test_title_override(library, fake_engine, assets):
    path = assets / "026-latex-multicolumn__multicolumn.pdf"
    res = ingest(path, library=library, engine=fake_engine, title="Lorem")
    assert res.title == "Lorem"
    res = ingest(path, library=library, engine=fake_engine, title="Ipsum")
    assert library.document(res.doc_id)["title"] == "Ipsum"


_CHILD = """
import sys
from store.library import Library
from ingest.pipeline import ingest
from tests.ingest.fake_engine import FakeEngine
lib = Library(sys.argv[1])
engine = FakeEngine(batch_chunks=2, checkpoint_every=2, delay_s=float(sys.argv[3]))
res = ingest(sys.argv[2], library=lib, engine=engine)
print(res.status, res.doc_id)
"""


def test_sigkill_during_prefill_then_resume(assets, tmp_path):
    """A real process killed in the middle of prefill: the document is whole, the row says partial,
    and the next run continues from the checkpoint and ends like an uninterrupted one."""
    import json
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
    doc = str(assets / "stacks-brauer.tex")
    home = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(home), doc, "0.05"], env=env, cwd=root)
    done = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (home / "library.db").exists():
            con = sqlite3.connect(f"file:{home / 'library.db'}?mode=ro", uri=True)
            try:
                row = con.execute("SELECT n_tokens_done FROM prefill_states").fetchone()
            except sqlite3.Error:
                row = None
            con.close()
            if row and row[0] > 0:
                done = row[0]
                os.kill(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.02)
    proc.wait()
    assert done > 0, "the child finished before it could be killed"
    con = sqlite3.connect(home / "library.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    (n_chunks,) = con.execute("SELECT n_chunks FROM documents").fetchone()
    assert con.execute("SELECT count(*) FROM chunks").fetchone()[0] == n_chunks  # the document is whole
    row = con.execute("SELECT status, n_tokens_done, state_dir FROM prefill_states").fetchone()
    status, n_done, state = row
    con.close()
    assert status == "partial" and 0 < n_done
    checkpointed = json.loads((Path(state) / "meta.json").read_text())["n_tokens"]
    assert checkpointed >= n_done

    def run(h: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-c", _CHILD, str(h), doc, "0"]
        return subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)

    out = run(home)
    assert out.returncode == 0, out.stderr
    ref_home = tmp_path / "reference"
    ref = run(ref_home)
    assert out.stdout.split()[0] == ref.stdout.split()[0] == "done"

    def dep(h):
        c = sqlite3.connect(h / "library.db")
        try:
            return c.execute("SELECT data FROM traces WHERE kind = 'dependency_map'").fetchone()[0]
        finally:
            c.close()

    assert dep(home) == dep(ref_home)


def test_a_state_saved_before_token_ids_is_prefilled_again(library, tmp_path):
    """A document whose state was saved before the chunks' token ids were stored (no tok.i32): asking
    it is a clear one-line error saying to ingest again; ingesting it again prefills it anew from the
    library's token ids, ending with the state an uninterrupted prefill makes, its token ids stored.
    Nothing is lost: the state is computed from those ids, which the library keeps."""
    import numpy as np

    from cli_io import UserError
    from drt_core.hf_config import DRTConfig
    from drt_core.engine import Engine
    from drt_core.modeling import DRTForCausalLM
    from ingest.pipeline import ready_state
    from store.errors import StateTooOld

    shipped = Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny"
    model_dir = tmp_path / "model"
    DRTForCausalLM(DRTConfig.from_preset("tiny", vocab_size=8192)).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(shipped / name, model_dir / name)
    engine = Engine.from_pretrained(model_dir, device="cpu")
    src = tmp_path / "doc.txt"
    src.write_text("The lighthouse keeper counted the ships that passed in the night. " * 40)
    res = ingest(src, library=library, engine=engine)
    assert res.status == "done"
    sdir = state_dir(library.home, res.doc_id, engine.fingerprint)
    mem = ready_state(library, engine, res.doc_id).memory
    n, keys, toks = mem.n, mem.keys().copy(), mem.tokens(np.arange(mem.n)).copy()
    del mem
    ids = library.token_ids(res.doc_id)
    assert n >= 3 and toks[0].tolist() == ids[:63]

    (sdir / "tok.i32").unlink()  # as a state committed before the chunk store kept token ids
    with pytest.raises(StateTooOld, match="drt-reader ingest") as e:
        ready_state(library, engine, res.doc_id)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)

    again = ingest(src, library=library, engine=engine)
    assert again.status == "done" and again.doc_id == res.doc_id and not again.created
    mem = ready_state(library, engine, res.doc_id).memory
    assert mem.n == n and np.array_equal(mem.keys(), keys)
    assert np.array_equal(mem.tokens(np.arange(n)), toks)
    row = library.prefill_state(res.doc_id, engine.fingerprint)
    assert row["status"] == "done" and row["n_tokens_done"] == len(ids)


def test_a_finished_prefill_keeps_the_question_indexes(library, tmp_path):
    """The end of a prefill builds what a question reads besides the states, and keeps it on disk: the
    chunk texts' BM25 (qa's reader statistics) beside the document's states, the engine's BM25 (its
    question-time selection term) in the state folder. A new process loads them instead of building
    them on its first question (the same scores); a stale file is built again."""
    import numpy as np

    from drt_core.bm25 import BM25
    from drt_core.engine import Engine
    from ingest.pipeline import chunk_index

    engine = Engine.from_pretrained(Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny")
    assert engine.cfg.bm25_weight > 0
    src = tmp_path / "doc.txt"
    src.write_text("The lighthouse keeper counted the ships that passed in the night. " * 30
                   + "His sister Margaret kept the lamp burning on the northern cliff. " * 30)
    res = ingest(src, library=library, engine=engine)
    texts = [r["text"] for r in library.chunks(res.doc_id)]
    kept = BM25.load(Path(library.home) / "states" / res.doc_id / "chunks-bm25-w0.npz")
    q = "Who kept the lamp burning?"
    np.testing.assert_array_equal(kept.scores(q), BM25(texts, window=0).scores(q))
    sdir = state_dir(library.home, res.doc_id, engine.fingerprint)
    w = engine.cfg.bm25_window
    stored = BM25.load(sdir / f"bm25-w{w}.npz")
    fresh = Engine.from_pretrained(engine.model_dir)  # a new process: nothing cached in memory
    state = pipeline.ready_state(library, fresh, res.doc_id)
    assert stored is not None and stored.n == state.memory.n >= len(texts) - 1 and stored.window == w
    np.testing.assert_array_equal(fresh.bm25_index(state).scores(q), stored.scores(q))
    # a file of another document's size is stale: built again, and kept
    BM25(texts[:2], window=0).save(Path(library.home) / "states" / res.doc_id / "chunks-bm25-w0.npz")
    assert chunk_index(library, res.doc_id).n == len(texts)
    assert BM25.load(Path(library.home) / "states" / res.doc_id / "chunks-bm25-w0.npz").n == len(texts)
