"""Data parallel and resume: two CPU processes under torchrun (gloo) follow the loss curve of one
process on the same global batch, and an interrupted run resumes to exactly the same weights.

Retrieval noise: every rank seeds the same global RNG, so under DDP rank r's rows get the same
Gumbel draws as rank 0's, while one process on the global batch draws fresh noise for every row.
The curves then agree only in distribution. The DDP comparison therefore uses chunk_topk >= the
number of chunks, where top-k selects every eligible chunk whatever the noise (the fusion weights
use the clean scores), so it checks batch slicing and gradient averaging exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from drt_core.train import checkpoint, loop
from drt_core.train.batches import Batches
from drt_core.train.options import TrainConfig
from tests.drt_core.record_golden import build_token_dir

ROOT = Path(__file__).resolve().parents[3]
# a small DRT: 252 tokens = 4 chunks; chunk_topk=4 selects every eligible chunk (see module docstring)
MODEL = dict(hidden_size=64, num_heads=2, intermediate_size=128, lower_layers=1, encoder_layers=1,
             upper_groups=[1], window=128, chunk_topk=4)
RUN = dict(preset="tiny", seq_len=252, steps=3, warmup=1, eval_every=0, ckpt_every=100, seed=7, bf16="off",
           book_weight=1.0)


def _config(data, out, **kw) -> TrainConfig:
    args = {**RUN, **kw}
    return TrainConfig().replace(data=str(data), out=str(out), model_overrides=dict(MODEL), **args)


@pytest.fixture
def data(tmp_path):
    return build_token_dir(tmp_path / "data")


@pytest.fixture(autouse=True)
def _single_process(monkeypatch):
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("arch", ["drt", "fixed_retriever"])
def test_two_processes_match_one_on_the_global_batch(tmp_path, data, arch):
    """Also the regression test of two DDP bugs: ranks hanging at exit (the process group was
    destroyed under a live DDP reducer while rank 0 still saved), and fixed_retriever failing its
    second step (its unused landmark query norms need find_unused_parameters)."""
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "drt_core.train.loop", "--data", str(data), "--out", str(out), "--batch-size", "1",
           "--bf16", "off", "--arch", arch]
    for k, v in RUN.items():
        if k != "bf16":
            cmd += ["--" + k.replace("_", "-"), str(v)]
    for k, v in MODEL.items():
        cmd += ["--set", f"{k}={json.dumps(v)}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-1500:] + "\n" + proc.stderr[-3000:]  # how far the steps got
    ddp = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]

    one = loop.train(_config(data, tmp_path / "one", batch_size=2, arch=arch))["history"]
    assert [r["step"] for r in ddp] == [1, 2, 3]
    assert [r["loss"] for r in ddp] == pytest.approx([h["loss"] for h in one], rel=1e-5)
    a = torch.load(out / "state.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "one" / "state.pt", weights_only=False)["model"]
    for name in b:
        # Adam normalises tiny gradient differences (reduction order) into updates of ~1e-6, and on some
        # CPUs (an AMX Xeon: one weight in 4,096 off by 1.2e-5) a little more; one Adam step is ~lr = 2e-3
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=5e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_resume_is_exact(tmp_path, data, monkeypatch):
    """4 steps in one go == 2 steps, a crash, and a resume from OUT/state.pt to step 4. At 504 tokens
    (8 chunks) chunk_topk=4 leaves Gumbel noise in play, so the RNG state must be restored too."""
    kw = dict(steps=4, ckpt_every=2, batch_size=2, seq_len=504)
    full = loop.train(_config(data, tmp_path / "full", **kw))["history"]

    real_get = Batches.get

    def crash_at_2(self, step):
        if step == 2:
            raise KeyboardInterrupt("simulated crash after the step-2 checkpoint")
        return real_get(self, step)

    monkeypatch.setattr(Batches, "get", crash_at_2)
    with pytest.raises(KeyboardInterrupt):
        loop.train(_config(data, tmp_path / "resumed", **kw))
    assert torch.load(tmp_path / "resumed" / "state.pt", weights_only=False)["step"] == 2
    monkeypatch.setattr(Batches, "get", real_get)
    resumed = loop.train(_config(data, tmp_path / "resumed", **kw))["history"]

    assert [h["loss"] for h in resumed] == [h["loss"] for h in full]
    a = torch.load(tmp_path / "full" / "state.pt", weights_only=False)
    b = torch.load(tmp_path / "resumed" / "state.pt", weights_only=False)
    assert a["step"] == b["step"] == 4
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name


def test_resume_keeps_one_log_record_per_step(tmp_path, data, monkeypatch):
    """Regression: a crash after step 3 with the checkpoint at step 2 left step 3 in log.jsonl, and
    the resume logged it again, so per-task loss windows (bench/task_losses.py) and the loss
    curves counted it twice. The resume now drops the records after its checkpoint."""
    out = tmp_path / "run"
    kw = dict(steps=4, ckpt_every=2, batch_size=1, log_file=str(out / "log.jsonl"))
    real_get = Batches.get

    def crash_at_4(self, step):
        if step == 3:  # 0-based: steps 1-3 are logged, the checkpoint holds step 2
            raise KeyboardInterrupt("simulated crash after step 3")
        return real_get(self, step)

    monkeypatch.setattr(Batches, "get", crash_at_4)
    with pytest.raises(KeyboardInterrupt):
        loop.train(_config(data, out, **kw))
    log = out / "log.jsonl"
    assert [json.loads(l)["step"] for l in log.read_text().splitlines()] == [1, 2, 3]
    monkeypatch.setattr(Batches, "get", real_get)
    loop.train(_config(data, out, **kw))
    assert [json.loads(l)["step"] for l in log.read_text().splitlines()] == [1, 2, 3, 4]


def test_trim_log_drops_later_steps_and_a_torn_line(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "loss": 1.2}\n{"step": 4, "lo')
    assert checkpoint.trim_log(log, 2) == 2
    assert [json.loads(l)["step"] for l in log.read_text().splitlines()] == [1, 2]
    assert checkpoint.trim_log(log, 2) == 0
    assert checkpoint.trim_log(tmp_path / "missing.jsonl", 5) == 0
