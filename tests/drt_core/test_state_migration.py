"""Engine version 2's fingerprints: a library made by version 1 (its states, rows and answers keyed
by version 1's fingerprint of the model) opens its prefilled documents under version 2 without a
prefill, re-keyed in place (drt_core/state_migration.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from drt_core import state_migration
from drt_core.engine import Engine
from store.library import Library

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "checkpoints" / "drt-tiny"
TEXT = ROOT / "tests" / "assets" / "frankenstein_excerpt.txt"
# what version 1 named drt-tiny's states (the fingerprint a library made before version 2 holds),
# for the weights and tokenizer of this file
V1_DRT_TINY = ("9ff2c5afdda8884e4858b8d727a6adcf6aca543c607a01775c96158850c17be6", "191f8d0db71e5755")


def _old_library(home: Path, text: Path, memory_dtype=np.float32):
    """A library as engine version 1 left it: the document ingested and prefilled by the model under
    version 1's fingerprint, with a question answered. Returns (library, doc_id, old fingerprint)."""
    from ingest.pipeline import ingest

    old = Engine.from_pretrained(MODEL, memory_dtype=memory_dtype)
    old.fingerprint = state_migration.checkpoint_fingerprint_v1(MODEL, old.cfg, old.memory_dtype)
    lib = Library(home)
    res = ingest(text, library=lib, engine=old)
    lib.record_answer(res.doc_id, "Who wrote?", old.fingerprint, "Walton", [[1, 0.5]], {"chunks": []})
    return lib, res.doc_id, old.fingerprint


@pytest.fixture
def short_text(tmp_path) -> Path:
    p = tmp_path / "excerpt.txt"
    p.write_text(TEXT.read_text(encoding="utf-8")[:5000], encoding="utf-8")
    return p


def test_version_1_fingerprint_is_what_version_1_wrote():
    """The frozen version-1 function gives the fingerprint drt-tiny's states were stored under, and
    version 2's differs (ENGINE_VERSION 2, the configuration hashed without version 1's shims)."""
    digest = hashlib.sha256((MODEL / "model.safetensors").read_bytes()).hexdigest()
    if digest != V1_DRT_TINY[0]:
        pytest.skip("checkpoints/drt-tiny was retrained after engine version 2: no library holds its version-1 states")
    eng = Engine.from_pretrained(MODEL)
    assert state_migration.checkpoint_fingerprint_v1(MODEL, eng.cfg, np.float16) == V1_DRT_TINY[1]
    assert state_migration.previous_fingerprints(eng) == [V1_DRT_TINY[1]] != [eng.fingerprint]


def test_a_library_made_before_opens_its_documents_without_a_prefill(tmp_path, short_text, monkeypatch):
    from ingest.pipeline import prefill_document, ready_state

    lib, doc_id, old_fp = _old_library(tmp_path / "home", short_text)
    total = len(lib.token_ids(doc_id))
    fresh = Engine.from_pretrained(MODEL, memory_dtype=np.float32)
    new_fp = fresh.fingerprint
    assert new_fp != old_fp and lib.prefill_state(doc_id, new_fp) is None

    monkeypatch.setattr(Engine, "prefill", lambda *a, **k: pytest.fail("the document was prefilled again"))
    state = ready_state(lib, fresh, doc_id)  # moves the library onto new_fp, then opens the state
    assert state.n_tokens == total

    states = tmp_path / "home" / "states" / doc_id
    assert sorted(p.name for p in states.iterdir() if p.is_dir()) == [new_fp]  # beside the chunk index (.npz)
    assert json.loads((states / new_fp / "meta.json").read_text())["model_fp"] == new_fp
    row = lib.prefill_state(doc_id, new_fp)
    assert row["status"] == "done" and row["state_dir"] == str(states / new_fp)
    assert lib.prefill_state(doc_id, old_fp) is None
    assert lib.latest_trace(doc_id, new_fp, "dependency_map")["data"] == state.dependency_map()
    assert [r["model_fp"] for r in lib.conversation(doc_id)] == [new_fp]
    assert prefill_document(lib, fresh, doc_id)["status"] == "done"  # nothing to do
    assert state_migration.migrate_library(lib, fresh) == []

    # the moved state computes what a state prefilled by version 2 computes, to the bit
    monkeypatch.undo()
    ids = lib.token_ids(doc_id)
    again = fresh.new_state()
    list(fresh.prefill(again, ids))
    probe = ids[:40]
    with torch.no_grad():
        assert torch.equal(fresh.feed(state.fork(), probe, want_logits=True),
                           fresh.feed(again.fork(), probe, want_logits=True))
    lib.close()


def test_a_migration_cut_short_is_finished_by_the_next(tmp_path, short_text):
    """Killed after the state directory moved but before the rows were re-keyed: the next run
    finds the rows under the old fingerprint and the state already moved, and re-keys the rows."""
    lib, doc_id, old_fp = _old_library(tmp_path / "home", short_text)
    fresh = Engine.from_pretrained(MODEL, memory_dtype=np.float32)
    states = tmp_path / "home" / "states" / doc_id
    state_migration._move_directory(states / old_fp, states / fresh.fingerprint, fresh.fingerprint)
    assert lib.prefill_state(doc_id, old_fp) is not None
    assert state_migration.migrate_library(lib, fresh) == [doc_id]
    assert lib.prefill_state(doc_id, old_fp) is None
    assert lib.prefill_state(doc_id, fresh.fingerprint)["status"] == "done"
    assert fresh.open_state(states / fresh.fingerprint).n_tokens == len(lib.token_ids(doc_id))
    lib.close()


def test_states_already_under_the_new_fingerprint_are_kept(tmp_path, short_text):
    """A document prefilled again under version 2 before any migration keeps those states; its
    version-1 states are left where they are."""
    lib, doc_id, old_fp = _old_library(tmp_path / "home", short_text)
    fresh = Engine.from_pretrained(MODEL, memory_dtype=np.float32)
    (tmp_path / "home" / "states" / doc_id / fresh.fingerprint).mkdir()
    assert state_migration.migrate_library(lib, fresh) == []
    assert lib.prefill_state(doc_id, old_fp)["status"] == "done"
    lib.close()


def test_ask_all_and_the_ui_library_see_an_old_librarys_documents(tmp_path, short_text):
    """Before anything opens a document, the whole-library paths move the states too: `ask --all`
    and the UI's engine (whose library list filters by fingerprint)."""
    from qa.ask import ask_all

    lib, doc_id, old_fp = _old_library(tmp_path / "home", short_text)
    fresh = Engine.from_pretrained(MODEL, memory_dtype=np.float32)
    out = ask_all(lib, fresh, "Who wrote the letters?", max_new_tokens=4)
    assert [d["doc_id"] for d in out["documents"]] == [doc_id]
    assert lib.prefill_state(doc_id, str(fresh.fingerprint))["status"] == "done"
    lib.close()

    lib2, doc2, _ = _old_library(tmp_path / "home2", short_text, memory_dtype=np.float16)  # the app's default
    lib2.close()
    from ui.context import UIContext

    ctx = UIContext(tmp_path / "home2", str(MODEL))
    try:
        eng = ctx.engine()
        assert ctx.library.prefill_state(doc2, str(eng.fingerprint))["status"] == "done"
    finally:
        ctx.close()
