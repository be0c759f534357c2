"""The training loop's guards: the learning-rate schedule honours min_lr, and a non-finite loss
stops training with the last good checkpoint kept."""

from __future__ import annotations

import pytest
import torch

from drt_core.modeling import DRTForCausalLM
from drt_core.train import TrainConfig, lr_at, train
from tests.drt_core.record_golden import build_token_dir, golden_config


def test_schedule_warms_up_then_decays_to_min_lr():
    """The reference scheduler ignored min_lr (spec §5.2); ours ends exactly on it."""
    cfg = TrainConfig(lr=1e-3, min_lr=1e-4, warmup=10, steps=100)
    assert lr_at(0, cfg) == pytest.approx(1e-4)
    assert lr_at(9, cfg) == pytest.approx(1e-3)
    assert lr_at(99, cfg) == pytest.approx(1e-4)
    assert all(lr_at(s, cfg) >= 1e-4 - 1e-12 for s in range(100))


def test_non_finite_loss_stops_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    data = build_token_dir(tmp_path / "data")
    out = tmp_path / "run"
    forward = DRTForCausalLM.forward
    calls = {"n": 0}

    def poisoned(self, *a, **kw):
        res = forward(self, *a, **kw)
        calls["n"] += 1
        if calls["n"] == 3:  # the third training step
            res.loss = res.loss * float("nan")
        return res

    monkeypatch.setattr(DRTForCausalLM, "forward", poisoned)
    with pytest.raises(FloatingPointError):
        train(golden_config(data, out, steps=4, ckpt_every=1))
    st = torch.load(out / "state.pt", weights_only=False)
    assert st["step"] == 2  # steps 1 and 2 were checkpointed; step 3 was never applied
    assert all(torch.isfinite(v).all() for v in st["model"].values())
