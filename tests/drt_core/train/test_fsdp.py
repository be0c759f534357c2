"""FSDP2 on CPU (gloo): two processes with `--fsdp` follow the loss curve of one process on the same
global batch; sharded checkpoints (torch.distributed.checkpoint) are written atomically and resume
exactly, also onto another number of processes; bf16 mixed precision stays close to fp32.

As in test_ddp.py, the model has chunk_topk >= the number of chunks, so the Gumbel retrieval noise
(the same draws on every rank, fresh ones for each row of one process) cannot change the selection
and the curves can be compared step by step. The resume tests train at a constant learning rate
(min_lr = lr): a run of 2 steps is then the first half of a run of 4, and the resumed run can be
compared with an uninterrupted one without a crash hook in the torchrun children.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from drt_core.train import checkpoint, loop
from drt_core.train.options import TrainConfig
from tests.drt_core.record_golden import build_token_dir

ROOT = Path(__file__).resolve().parents[3]
MODEL = dict(hidden_size=64, num_heads=2, intermediate_size=128, lower_layers=1, encoder_layers=1,
             upper_groups=[1], window=128, chunk_topk=4)  # 252 tokens = 4 chunks: every chunk selected
RUN = dict(preset="tiny", seq_len=252, warmup=1, eval_every=0, ckpt_every=100, seed=7, book_weight=1.0)
CONST_LR = dict(lr=2e-3, min_lr=2e-3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build_token_dir(tmp_path_factory.mktemp("fsdp") / "data")


@pytest.fixture(autouse=True)
def _single_process(monkeypatch):
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)


def _one(data, out, **kw) -> list[float]:
    """One process (in this one) on the global batch of two rows."""
    args = {**RUN, "bf16": "off", "batch_size": 2, **kw}
    cfg = TrainConfig().replace(data=str(data), out=str(out), model_overrides=dict(MODEL), **args)
    return [h["loss"] for h in loop.train(cfg)["history"]]


def _torchrun(data, out, steps: int, *extra: str, nproc: int = 2) -> list[dict]:
    """`--fsdp` under torchrun, one row per process; returns the run's log records."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "drt_core.train.loop", "--data", str(data), "--out", str(out), "--batch-size", "1", "--fsdp",
           "--steps", str(steps), *extra]
    for k, v in RUN.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    for k, v in MODEL.items():
        cmd += ["--set", f"{k}={json.dumps(v)}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-1500:] + "\n" + proc.stderr[-3000:]  # how far the steps got
    assert "plan: preset tiny" in proc.stdout and "FSDP2 over 2 processes" in proc.stdout
    return [json.loads(line) for line in (Path(out) / "log.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict:
    from drt_core.modeling import DRTForCausalLM

    return DRTForCausalLM.from_pretrained(run / "model").state_dict()


def _assert_same_weights(a: dict, b: dict) -> None:
    for name in b:
        # Adam normalises tiny gradient differences (reduction order) into updates of ~1e-6, and on some
        # CPUs (an AMX Xeon: one weight in 4,096 off by 1.2e-5) a little more; one Adam step is ~lr = 2e-3
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=5e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_fsdp_two_processes_match_one_on_the_global_batch(tmp_path, data):
    fsdp = _torchrun(data, tmp_path / "fsdp", 3, "--bf16", "off")
    one = _one(data, tmp_path / "one", steps=3)
    assert [r["step"] for r in fsdp] == [1, 2, 3]
    assert [r["loss"] for r in fsdp] == pytest.approx(one, rel=1e-5)
    # the sharded checkpoint, and model/ with the full weights gathered on rank 0
    assert sorted(p.name for p in (tmp_path / "fsdp").iterdir()) == ["log.jsonl", "model", "state.dcp"]
    assert {p.name for p in (tmp_path / "fsdp" / "state.dcp").iterdir()} >= {".metadata", "trainer.pt",
                                                                           "__0_0.distcp", "__1_0.distcp"}
    assert json.loads((tmp_path / "fsdp" / "model" / "config.json").read_text())["architectures"] == ["DRTForCausalLM"]
    _assert_same_weights(_weights(tmp_path / "fsdp"), _weights(tmp_path / "one"))


def test_sharded_checkpoint_resumes_onto_one_and_two_processes(tmp_path, data):
    """Saved by 2 processes at step 2, resumed to step 4 by 2 processes and by 1 (resharding):
    both equal 4 uninterrupted steps of one process; and saved by 1, resumed by 2."""
    ref = _one(data, tmp_path / "ref", steps=4, **CONST_LR)
    lr = ["--lr", str(CONST_LR["lr"]), "--min-lr", str(CONST_LR["min_lr"]), "--bf16", "off"]
    half = _torchrun(data, tmp_path / "two", 2, *lr)
    assert [r["loss"] for r in half] == pytest.approx(ref[:2], rel=1e-5)
    assert torch.load(tmp_path / "two" / "state.dcp" / "trainer.pt", weights_only=False)["step"] == 2
    shutil.copytree(tmp_path / "two", tmp_path / "two_to_one")

    two = _torchrun(data, tmp_path / "two", 4, *lr)  # resumes at step 2
    assert [r["step"] for r in two] == [1, 2, 3, 4]
    assert [r["loss"] for r in two] == pytest.approx(ref, rel=1e-5)
    one = _one(data, tmp_path / "two_to_one", steps=4, fsdp=True, **CONST_LR)  # 2 -> 1 process
    assert one == pytest.approx(ref, rel=1e-5)
    _assert_same_weights(_weights(tmp_path / "two"), _weights(tmp_path / "ref"))
    _assert_same_weights(_weights(tmp_path / "two_to_one"), _weights(tmp_path / "ref"))

    _one(data, tmp_path / "one_to_two", steps=2, fsdp=True, **CONST_LR)  # 1 -> 2 processes
    assert (tmp_path / "one_to_two" / "state.dcp" / ".metadata").exists()
    up = _torchrun(data, tmp_path / "one_to_two", 4, *lr)  # (the in-process run kept no log.jsonl)
    assert [(r["step"], r["loss"]) for r in up] == [(3, pytest.approx(ref[2], rel=1e-5)),
                                                   (4, pytest.approx(ref[3], rel=1e-5))]
    _assert_same_weights(_weights(tmp_path / "one_to_two"), _weights(tmp_path / "ref"))


def test_sharded_save_is_atomic(tmp_path, data, monkeypatch):
    """A save that dies half-way (shards written, no metadata) leaves the previous checkpoint, and
    the resume from it equals the uninterrupted run; a crash between the two renames leaves
    state.dcp.old, which the resume takes."""
    import torch.distributed.checkpoint as dcp

    ref = _one(data, tmp_path / "ref", steps=3, **CONST_LR)
    run = tmp_path / "run"
    real_save = dcp.save
    calls = []

    def dies_on_second(state, checkpoint_id):
        calls.append(checkpoint_id)
        if len(calls) == 2:
            Path(checkpoint_id).mkdir(parents=True)
            (Path(checkpoint_id) / "__0_0.distcp").write_bytes(b"torn")
            raise KeyboardInterrupt("simulated crash in the middle of the step-2 save")
        return real_save(state, checkpoint_id=checkpoint_id)

    monkeypatch.setattr(dcp, "save", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        _one(data, run, steps=3, ckpt_every=1, fsdp=True, **CONST_LR)
    assert Path(calls[0]).name == "state.dcp.tmp"
    assert torch.load(run / "state.dcp" / "trainer.pt", weights_only=False)["step"] == 1
    assert (run / "state.dcp.tmp").exists()  # the torn one, never renamed
    monkeypatch.setattr(dcp, "save", real_save)

    # a crash between the renames: only state.dcp.old is complete
    (run / "state.dcp").rename(run / "state.dcp.old")
    assert checkpoint.find_sharded_checkpoint(run) == run / "state.dcp.old"
    assert _one(data, run, steps=3, ckpt_every=1, fsdp=True, **CONST_LR) == pytest.approx(ref, rel=1e-5)
    assert sorted(p.name for p in run.iterdir()) == ["model", "state.dcp"]  # no .tmp, no .old
    assert torch.load(run / "state.dcp" / "trainer.pt", weights_only=False)["step"] == 3


def test_a_plain_save_replaces_a_sharded_checkpoint(tmp_path, data):
    """One checkpoint per run directory: resumed without --fsdp, the run writes state.pt and drops
    state.dcp (a later resume would otherwise take the older sharded one)."""
    run = tmp_path / "run"
    _one(data, run, steps=1, fsdp=True, **CONST_LR)
    assert (run / "state.dcp").exists() and not (run / "state.pt").exists()
    _one(data, run, steps=2, **CONST_LR)
    assert (run / "state.pt").exists() and not (run / "state.dcp").exists()
    assert torch.load(run / "state.pt", weights_only=False)["step"] == 2


def test_fsdp_input_cast_passes_the_steering_through():
    """FSDP2's MixedPrecisionPolicy casts the forward's floating inputs with _apply_to_tensors, which
    rebuilt dataclasses with dataclasses.replace: Steering was one (its `loss` init=False), and the
    first bf16 step crashed. The steering passes through as the same object, its int tensors untouched."""
    from torch.distributed.utils import _apply_to_tensors

    from drt_core.train.objective import Steering

    forced = torch.tensor([[0, -1, 1]])
    steer = Steering(forced=forced, groups=2)
    args, kwargs = _apply_to_tensors(lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t,
                                     ((torch.ones(2),), {"steer": steer, "output_retrieval": False}))
    assert args[0].dtype == torch.bfloat16
    assert kwargs["steer"] is steer and steer.forced is forced and steer.loss is None


def test_fsdp_bf16_mixed_precision_is_close_to_fp32(tmp_path, data):
    """MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the losses stay within 1e-3
    (relative) of fp32's (the loss is computed in fp32 from bf16 logits). The full weights written
    are fp32 (the sharded master copy). Runs on every CPU: bf16 without AVX512-BF16 or AMX is only
    slower (it once skipped there, and crashed where the CPU had them)."""
    bf = _torchrun(data, tmp_path / "bf16", 3, "--bf16", "on")
    fp32 = _one(data, tmp_path / "fp32", steps=3)
    losses = [r["loss"] for r in bf]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses == pytest.approx(fp32, rel=1e-3)
    assert losses != fp32  # bf16 did change the arithmetic
    assert {v.dtype for v in _weights(tmp_path / "bf16").values()} == {torch.float32}
