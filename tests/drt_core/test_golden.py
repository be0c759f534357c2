"""Golden loss: the tiny preset trained 5 steps on CPU (fp32, fixed seed) reproduces the recorded
curve tests/assets/losses/tiny_cpu.json (re-record with `python -m tests.drt_core.record_golden`
only for a change meant to alter the numerics)."""

from __future__ import annotations

import json

import pytest

from drt_core.train.loop import train
from tests.drt_core.record_golden import GOLDEN, build_token_dir, golden_config


def test_tiny_cpu_golden_losses(tmp_path):
    recorded = json.loads(GOLDEN.read_text())["losses"]
    data = build_token_dir(tmp_path / "data")
    res = train(golden_config(data, tmp_path / "run"))
    losses = [h["loss"] for h in res["history"]]
    assert [h["step"] for h in res["history"]] == [1, 2, 3, 4, 5]
    assert losses == pytest.approx(recorded, rel=1e-4, abs=0)
    # the run also leaves a loadable checkpoint
    assert (tmp_path / "run" / "state.pt").exists()
    assert (tmp_path / "run" / "model" / "model.safetensors").exists()
