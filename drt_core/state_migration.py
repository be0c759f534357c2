"""States stored under an older engine version's fingerprint, moved onto this version's in place.

A fingerprint (drt_core/state_io.py) names the model and the engine version that computed a
state. Engine version 2 hashes the configuration as it is, every extension at its "off" value left
out; version 1 hashed it with the retired extensions re-inserted and two later ones dropped at
their "off" values. The states are the same, only their name changed: `migrate_library` moves the
states a library holds from the version-1 fingerprint of the engine's model onto its fingerprint
now, so a library made before version 2 opens its prefilled documents without prefilling them
again. For each document: the state directory's commit record rewritten, the directory renamed
(states/<doc>/<old> -> states/<doc>/<new>), then the library's rows re-keyed (prefill_states,
traces, answers) in one transaction. Each step can be run again after a crash.

Version 1's fingerprint functions are kept here, as they were, and nowhere else.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np

from store.chunk_store import MemmapChunkMemory, atomic_write_bytes

from . import state_io

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------
# engine version 1's fingerprint, frozen

_V1_RETIRED = {"detach_fusion_weights": False, "smear_keys": False, "smear_init": 0.0, "query_key": False,
               "abstain_z": None}
_V1_DROPPED = ("gca_backend", "transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype",
               "bm25_weight", "bm25_window")


def state_config_v1(cfg) -> dict:
    """Version 1's state_config: the configuration with the retired extensions re-inserted at their
    "off" values, stream_preamble, lexical_word_carry and lexical_gates (which came after it) dropped at
    theirs."""
    d = {k: v for k, v in cfg.to_dict().items() if k not in _V1_DROPPED}
    d.update(_V1_RETIRED)
    if d.get("stream_preamble") is None:
        d.pop("stream_preamble", None)
    if not d.get("lexical_word_carry"):
        d.pop("lexical_word_carry", None)
    if not d.get("lexical_gates"):
        d.pop("lexical_gates", None)
    return d


def _tag_v1(memory_dtype) -> str:
    return f"engine1/{np.dtype(memory_dtype).name}"


def checkpoint_fingerprint_v1(path: Path, cfg, memory_dtype) -> str:
    """Version 1's state_io.checkpoint_fingerprint."""
    return state_io.files_digest(Path(path), state_config_v1(cfg), _tag_v1(memory_dtype))


def model_fingerprint_v1(model, memory_dtype) -> str:
    """Version 1's state_io.model_fingerprint."""
    return state_io.weights_digest(model, state_config_v1(model.config), _tag_v1(memory_dtype))


# ----------------------------------------------------------------------------------------------
# the migration

_PREVIOUS: dict[tuple, list[str]] = {}  # (how the fingerprint was made, it, dtype) -> the older ones


def previous_fingerprints(engine) -> list[str]:
    """The fingerprints that the engine's states had under older engine versions: version 1's of its
    checkpoint folder (Engine.from_pretrained) or of its model in memory, whichever its fingerprint
    now is; none for a fingerprint the caller chose."""
    model, dtype, fp = getattr(engine, "model", None), getattr(engine, "memory_dtype", None), str(engine.fingerprint)
    if model is None or dtype is None:  # not an Engine (a test's stand-in): no older fingerprint
        return []
    folder = getattr(engine, "model_dir", None)
    key = (str(folder), fp, np.dtype(dtype).name)
    if key not in _PREVIOUS:
        if folder is not None and fp == state_io.checkpoint_fingerprint(Path(folder), model.config, dtype):
            _PREVIOUS[key] = [checkpoint_fingerprint_v1(Path(folder), model.config, dtype)]
        elif fp == state_io.model_fingerprint(model, dtype):
            _PREVIOUS[key] = [model_fingerprint_v1(model, dtype)]
        else:
            _PREVIOUS[key] = []
    return [old for old in _PREVIOUS[key] if old != fp]


def migrate_library(library, engine) -> list[str]:
    """Move the states that `library` holds under an older fingerprint of the engine's model onto
    its fingerprint now (see the module's docstring). Returns the ids of the documents moved. Cheap
    when nothing is to move: one read of the library's state rows and a glob of its state folders.
    A document that already has states under the new fingerprint keeps them, its old ones untouched."""
    new = str(engine.fingerprint)
    states = Path(library.home) / "states"
    rows = {(s["doc_id"], s["model_fp"]): s for d in library.documents() for s in d.get("prefill") or []}
    on_disk = {(p.parent.name, p.name) for p in states.glob("*/*") if p.is_dir()}
    if all(fp == new for _, fp in set(rows) | on_disk):
        return []
    moved = []
    for old in previous_fingerprints(engine):
        for doc_id in sorted({d for d, fp in set(rows) | on_disk if fp == old}):
            # a directory under `new` with none left under `old` is this migration's, cut short
            if (doc_id, new) in rows or {(doc_id, new), (doc_id, old)} <= on_disk:
                logger.warning("document %s has states under both %s and %s: the old ones are left as they are",
                               doc_id[:12], old, new)
                continue
            _move_directory(states / doc_id / old, states / doc_id / new, new)
            _rekey_rows(library, doc_id, old, new, rows.get((doc_id, old)))
            moved.append(doc_id)
    if moved:
        logger.info("%d prefilled document(s) moved onto the fingerprint %s", len(moved), new)
    return moved


def _move_directory(src: Path, dst: Path, new: str) -> None:
    """The commit record of the state in src names the new fingerprint, then src becomes dst. Run
    again after a crash: a record already rewritten is left, a directory already moved is found."""
    if not src.is_dir():
        return
    meta = MemmapChunkMemory.read_meta(src)
    if meta is not None and meta.get("model_fp") != new:
        atomic_write_bytes(src / "meta.json", json.dumps({**meta, "model_fp": new}, indent=1).encode())
    os.replace(src, dst)


def _rekey_rows(library, doc_id: str, old: str, new: str, row: dict | None) -> None:
    """The document's prefill state, traces and answers under `old` re-keyed to `new`, in one transaction."""
    with library.write() as db:
        if row is not None:
            state_dir = str(Path(row["state_dir"]).parent / new) if row.get("state_dir") else row.get("state_dir")
            db.execute("UPDATE prefill_states SET model_fp = ?, state_dir = ? WHERE doc_id = ? AND model_fp = ?",
                       [new, state_dir, doc_id, old])
        db.execute("UPDATE traces SET model_fp = ? WHERE doc_id = ? AND model_fp = ?", [new, doc_id, old])
        db.execute("UPDATE answers SET model_fp = ? WHERE model_fp = ? AND question_id IN "
                   "(SELECT id FROM questions WHERE doc_id = ?)", [new, old, doc_id])
