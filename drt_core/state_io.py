"""A stream's state on disk, and the fingerprint that keys it.

A state directory (`Engine.open_state`) holds the chunk memory's files (store.chunk_store), one
`carry-<n>.safetensors` (the sliding-window caches, the carried selection, the partial chunk's
buffers: `Carry.tensors`) and meta.json, the commit record written last: a state is what its last
commit says, and a carry file no commit names is dropped on reopen.

The fingerprint names the model and everything the stored states depend on: the weights, the
tokenizer, the configuration as the states depend on it (`state_config`), the engine's version and
the memory's dtype. A state computed by another fingerprint is refused (CheckpointMismatch). When a
version changes the fingerprint of unchanged states, drt_core/state_migration.py moves the states
a library holds onto the new one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from store.chunk_store import ChunkMemory, MemmapChunkMemory, atomic_write_bytes

from .config import PAPER_FLAVOUR

if TYPE_CHECKING:
    from .hf_config import DRTConfig

# bump when the state format, the state-changing computation or the fingerprint's recipe changes; a
# recipe's change alone comes with a migration (state_migration.py): version 2 hashes state_config
# as it is, where version 1 re-inserted retired extensions to keep its fingerprints
ENGINE_VERSION = 2

# what the fingerprint leaves out: transformers' bookkeeping, an implementation choice with the same
# numbers (gca_backend), and the question-time settings that prefilled states do not depend on
NOT_STATE = ("transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype", "gca_backend",
             "bm25_weight", "bm25_window")


# ----------------------------------------------------------------------------------------------
# fingerprints


def state_config(cfg: DRTConfig) -> dict:
    """The configuration as the stored states depend on it (what the fingerprint hashes): every field
    but NOT_STATE's, and of our extensions only those switched on. An extension at its "off" value
    is the paper's model, so one added or retired later leaves every fingerprint as it was."""
    return {k: v for k, v in cfg.to_dict().items()
            if k not in NOT_STATE and not (k in PAPER_FLAVOUR and v == PAPER_FLAVOUR[k])}


def _engine_tag(memory_dtype) -> str:
    return f"engine{ENGINE_VERSION}/{np.dtype(memory_dtype).name}"


def model_fingerprint(model, memory_dtype) -> str:
    """The fingerprint of a model in memory: its weights' values, its state_config, the engine."""
    return weights_digest(model, state_config(model.config), _engine_tag(memory_dtype))


def checkpoint_fingerprint(path: Path, cfg: DRTConfig, memory_dtype) -> str:
    """The fingerprint of a checkpoint folder: the bytes of its weights and tokenizer, the config as
    the states depend on it (state_config, not config.json's bytes), the engine."""
    return files_digest(Path(path), state_config(cfg), _engine_tag(memory_dtype))


def weights_digest(model, config: dict, tag: str) -> str:
    """sha256 over the weights' names and values, the state config and the engine's tag (16 hex
    digits); every engine version's model fingerprint, with its own config and tag."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().float().cpu().numpy().tobytes())
    h.update(json.dumps(config, sort_keys=True).encode())
    h.update(tag.encode())
    return h.hexdigest()[:16]


def files_digest(path: Path, config: dict, tag: str) -> str:
    """sha256 over a checkpoint folder's weights and tokenizer files, the state config and the
    engine's tag (16 hex digits); every engine version's checkpoint fingerprint."""
    h = hashlib.sha256()
    for p in (path / "model.safetensors", path / "tokenizer.json"):
        if p.exists():
            with open(p, "rb") as f:
                for blk in iter(lambda: f.read(1 << 20), b""):
                    h.update(blk)
    h.update((json.dumps(config, sort_keys=True) + tag).encode())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------------------------
# the carry on disk


def read_meta(directory: Path, fingerprint: str) -> dict | None:
    """The state's last commit record (None: nothing committed); CheckpointMismatch when another
    model computed it."""
    meta = MemmapChunkMemory.read_meta(directory)
    if meta is not None and meta.get("model_fp") not in (None, fingerprint):
        from .errors import CheckpointMismatch

        raise CheckpointMismatch(f"states in {directory} were computed by model {meta.get('model_fp')}, "
                                 f"not {fingerprint}")
    return meta


def load_carry(directory: Path, meta: dict | None, carry, cfg: DRTConfig, n_lower: int, device) -> bool:
    """Fill a new carry from the committed carry file (False: none committed). A carry or snapshot
    file no commit names (a kill between writing it and committing meta.json) is deleted first."""
    snaps = {s["file"] for s in (meta or {}).get("snapshots", [])}
    for f in [*directory.glob("carry-*.safetensors*"), *directory.glob("snap-*.safetensors*")]:
        if meta is None or (f.name != meta.get("carry") and f.name not in snaps):
            f.unlink(missing_ok=True)
    if meta is None or not meta.get("carry"):
        return False
    fill_carry(directory / meta["carry"], meta, carry, cfg, n_lower, device)
    return True


def fill_carry(path: Path, meta: dict, carry, cfg: DRTConfig, n_lower: int, device) -> None:
    """Fill `carry` from a carry file and what its commit (or snapshot) record says of it."""
    from safetensors.torch import load_file

    t = load_file(str(path), device=str(device))
    carry.pos, carry.n_tokens = int(meta["pos"]), int(meta["n_tokens"])
    carry.sel_idx, carry.sel_w, carry.h_buf = t["sel_idx"], t["sel_w"], t["h_buf"]
    carry.tok_buf = t["tok_buf"].tolist()
    if carry.key_tail is not None:
        carry.key_tail = t["key_tail"]
    for i, w in enumerate(carry.windows):
        w.k, w.v, w.pos, w.next_pos = t[f"w{i}.k"], t[f"w{i}.v"], t[f"w{i}.pos"], carry.pos + cfg.preamble_len
    # a state committed with its retrieval groups deferred (Engine.prefill): caught up on demand
    carry.upper_pos = int(meta.get("upper_pos", carry.pos))
    carry.mid = t.get("mid")
    for w in carry.windows[n_lower:]:  # the ring's positions as of upper_pos (stale ones are never read)
        w.next_pos = carry.upper_pos + cfg.preamble_len


# a commit at least this many tokens past the last snapshot keeps its carry as a snapshot too: the state
# of the document cut at any chunk is then at most this many tokens of prefill away (`Engine.prefix`,
# spoiler-safe reading); ~2.4 MB each for the shipped model
SNAPSHOT_TOKENS = 32768


def save_carry(directory: Path, memory: ChunkMemory, carry, fingerprint: str, arch: str) -> None:
    """Write the carry to a new file, then commit the memory with meta.json naming it; the carry file
    of the commit before is deleted after. Every SNAPSHOT_TOKENS, the carry is also kept as a
    snapshot (`snap-<n>.safetensors`, listed in meta.json's "snapshots" with the memory's rows then)."""
    from safetensors.torch import save

    name = f"carry-{carry.n_tokens}.safetensors"
    tensors: dict[str, torch.Tensor] = carry.tensors()
    blob = save({k: v.cpu() for k, v in tensors.items()})
    atomic_write_bytes(directory / name, blob)
    old = memory.meta.get("carry")
    snaps = [s for s in memory.meta.get("snapshots", [])
             if s["n_tokens"] <= carry.n_tokens and s["n"] <= memory.n and (directory / s["file"]).exists()]
    if carry.n_tokens - (snaps[-1]["n_tokens"] if snaps else 0) >= SNAPSHOT_TOKENS:
        snap = f"snap-{carry.n_tokens}.safetensors"
        atomic_write_bytes(directory / snap, blob)
        snaps.append({"file": snap, "n_tokens": carry.n_tokens, "pos": carry.pos, "upper_pos": carry.upper_pos,
                      "n": memory.n})
    memory.commit({"carry": name, "pos": carry.pos, "n_tokens": carry.n_tokens, "model_fp": fingerprint,
                   "arch": arch, "upper_pos": carry.upper_pos, "snapshots": snaps})
    if old and old != name:
        try:
            (directory / old).unlink()
        except FileNotFoundError:
            pass
