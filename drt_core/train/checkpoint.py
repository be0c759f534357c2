"""A run's checkpoints (docs/training.md, "Checkpoints"): `state.pt` (one process or DDP), written
by rank 0 atomically (temporary file, fsync, rename), or the sharded `state.dcp/` (`--fsdp`: every
rank its shards, then two renames; it loads onto any number of processes), `model/` (the full
weights with config and tokenizer, for `drt-reader ask`), the log trimmed on resume."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch

from .options import TrainConfig

logger = logging.getLogger(__name__)


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary name, fsync, rename: a crash never leaves a torn checkpoint."""
    from store.chunk_store import atomic_write

    atomic_write(path, lambda f: torch.save(obj, f))


def trim_log(path: Path, step: int) -> int:
    """Drop the log records of steps after `step`, the checkpoint a resume starts from: the crashed
    run logged them and the resume replays them, so without this the log holds those steps twice.
    Returns how many records were dropped; a torn last line (a crash mid-write) is dropped too."""
    path = Path(path)
    if not path.exists():
        return 0
    keep, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1
            continue
        if isinstance(rec, dict) and rec.get("step", 0) > step:
            dropped += 1
        else:
            keep.append(line)
    if dropped:
        from store.chunk_store import atomic_write_bytes

        atomic_write_bytes(path, "".join(l + "\n" for l in keep).encode())
    return dropped


def copy_tokenizer(dst: Path, src: Path | None = None) -> None:
    """A checkpoint directory is complete: weights, config and the tokenizer it was trained with
    (the tokenizer files of `src`, a checkpoint directory; default the shipped tokenizer)."""
    import shutil

    from ..tokenizer import _resolve

    src = _resolve(None) if src is None else Path(src)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists() and not (dst / name).exists():
            shutil.copy2(src / name, dst / name)


SHARDED = "state.dcp"  # the sharded checkpoint directory (torch.distributed.checkpoint)


def find_sharded_checkpoint(out: Path) -> Path | None:
    """OUT/state.dcp, or OUT/state.dcp.old when a crash fell between save_sharded's two renames."""
    for name in (SHARDED, SHARDED + ".old"):
        d = Path(out) / name
        if (d / "trainer.pt").exists() and (d / ".metadata").exists():
            return d
    return None


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


def save_sharded(model, opt, out: Path, trainer: dict, rank: int, world: int) -> Path:
    """Write the model and optimizer state as a torch.distributed.checkpoint directory, each rank
    its own shards, atomically: everything goes to OUT/state.dcp.tmp (DCP fsyncs its files), rank 0
    adds trainer.pt (step, history, RNG, config) last, then renames state.dcp to state.dcp.old,
    state.dcp.tmp to state.dcp, and deletes the old one. A crash at any point leaves a complete
    checkpoint (state.dcp, or state.dcp.old between the renames: find_sharded_checkpoint). The keys
    are parameter names (get_model_state_dict / get_optimizer_state_dict), so the checkpoint loads
    onto any number of processes. On several nodes OUT must be one shared directory."""
    import shutil

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    out = Path(out)
    final, tmp, old = out / SHARDED, out / (SHARDED + ".tmp"), out / (SHARDED + ".old")
    if rank == 0 and tmp.exists():  # a save that crashed
        shutil.rmtree(tmp)
    _barrier(world)
    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.save(state, checkpoint_id=tmp)
    if rank == 0:
        atomic_save(trainer, tmp / "trainer.pt")
        _fsync_dir(tmp)
        if final.exists():
            if old.exists():
                shutil.rmtree(old)
            final.rename(old)
        tmp.rename(final)
        _fsync_dir(out)
        if old.exists():
            shutil.rmtree(old)
    _barrier(world)
    return final


def load_sharded(model, opt, d: Path) -> dict:
    """Load a save_sharded directory into `model` and `opt` (sharded or not, any number of
    processes: DCP reshards by parameter name); returns its trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                         set_model_state_dict, set_optimizer_state_dict)

    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.load(state, checkpoint_id=d)
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, opt, state["optim"])
    return torch.load(Path(d) / "trainer.pt", weights_only=False)


def remove_sharded(out: Path) -> None:
    """After a state.pt save: drop a sharded checkpoint of an earlier (--fsdp) run of OUT, so that a
    resume never picks the older of two checkpoints."""
    import shutil

    for name in (SHARDED, SHARDED + ".old", SHARDED + ".tmp"):
        if (Path(out) / name).exists():
            shutil.rmtree(Path(out) / name)


def full_state_dict(model) -> dict:
    """The full (unsharded) weights of an FSDP model on rank 0, in CPU memory (every rank calls it:
    it all-gathers; the other ranks get {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_pretrained(model, dst: Path, state_dict: dict | None = None) -> None:
    """model.save_pretrained (with `state_dict`, the gathered weights of a sharded model), the
    config naming the model's own class (fully_shard swaps in a subclass, FSDPDRTForCausalLM) and
    the tokenizer."""
    from ..modeling import DRTForCausalLM

    model.save_pretrained(dst, state_dict=state_dict)
    if type(model) is not DRTForCausalLM and isinstance(model, DRTForCausalLM):
        model.config.architectures = [DRTForCausalLM.__name__]
        model.config.save_pretrained(dst)
    copy_tokenizer(dst)


# ----------------------------------------------------------------------------------------------
# what the loop calls: save every --ckpt-every steps, resume from what OUT holds


def save_checkpoint(model, opt, out: Path, trainer: dict, fsdp: bool, rank: int, world: int) -> None:
    """The run's checkpoint at a step (`trainer`: step, history, RNG, config): with --fsdp the
    sharded state.dcp (every rank its shards, a collective), else rank 0's state.pt; then rank 0
    writes model/ and removes the other format's checkpoint, so OUT holds one."""
    if fsdp:  # every rank writes its shards (collective), then the full weights go to model/
        save_sharded(model, opt, out, trainer, rank, world)
        full = full_state_dict(model) if world > 1 else None
        if rank == 0:
            save_pretrained(model, out / "model", full)
            (out / "state.pt").unlink(missing_ok=True)  # one checkpoint per run directory: this one
        return
    if rank != 0:
        return
    atomic_save({"model": model.state_dict(), "opt": opt.state_dict(), **trainer}, out / "state.pt")
    remove_sharded(out)
    model.save_pretrained(out / "model")
    copy_tokenizer(out / "model")


def resume(model, opt, cfg: TrainConfig, rank: int, sharded: bool, device) -> tuple[int, list]:
    """(step, history) of OUT's checkpoint, loaded into `model` and `opt` with the RNG state, or
    (0, []) when there is none. The log's records after that step are dropped (they are replayed),
    and the settings that differ from the checkpoint's config are logged."""
    out = Path(cfg.run.out)
    ck = out / "state.pt"
    dcp_dir = find_sharded_checkpoint(out)
    if dcp_dir is not None:  # a sharded checkpoint loads onto any number of processes, FSDP or not
        st = load_sharded(model, opt, dcp_dir)
    elif ck.exists():
        if sharded:
            raise SystemExit(f"{ck} is a single-process / DDP checkpoint: resume it without --fsdp (or with "
                             "one "
                             "process), which then writes a sharded checkpoint")
        st = torch.load(ck, map_location=device, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
    else:
        return 0, []
    start, history = st["step"], st["history"]
    torch.set_rng_state(st["rng"])
    if rank == 0:
        logger.info("resumed from %s at step %d", dcp_dir or ck, start)
        log_changed_settings(st.get("config"), cfg)
        if cfg.run.log_file and (n := trim_log(Path(cfg.run.log_file), start)):
            logger.info("dropped %d log records after step %d (they are replayed)", n, start)
    return start, history


def log_changed_settings(saved: dict | None, cfg: TrainConfig) -> list[str]:
    """Log (and return) the settings of this run that differ from the checkpoint's config, read by
    TrainConfig.from_dict: nested, or flat as every checkpoint written before the groups holds it."""
    if not saved:
        return []
    try:
        old = TrainConfig.from_dict(saved).flat()
    except ValueError as e:
        logger.warning("the checkpoint's training config is not readable (%s); not compared", e)
        return []
    now = cfg.flat()
    changed = [f"{k} {old[k]!r} -> {now[k]!r}" for k in now if k != "log_file" and old[k] != now[k]]
    if changed:
        logger.info("settings changed since the checkpoint: %s", "; ".join(changed))
    return changed
