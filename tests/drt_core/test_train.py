"""The training loop's guards: the learning-rate schedule honours min_lr, and a non-finite loss
stops training with the last good checkpoint kept."""

from __future__ import annotations

import pytest
import torch

from drt_core.config import DRTConfig
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


def test_param_groups_give_smeared_key_logits_their_own_rate():
    """Each smear logit is one scalar per head: at the matrices' rate (Adam moves it ~lr per step)
    it could not leave 0.5 within a fine-tuning run, so it gets `smear_lr_mult`."""
    from drt_core.train import TrainConfig, param_groups

    cfg = DRTConfig.from_preset("tiny", vocab_size=300, hidden_size=64, num_heads=2, intermediate_size=128,
                                smear_keys=True)
    model = DRTForCausalLM(cfg)
    groups = param_groups(model, TrainConfig(smear_lr_mult=25.0, gca_lr_mult=2.0))
    by_id = {id(p): g for g in groups for p in g["params"]}
    for n, p in model.named_parameters():
        g = by_id[id(p)]
        if n.endswith("smear"):
            assert g["lr_mult"] == 25.0 and g["weight_decay"] == 0.0, n
        elif "gca." in n:
            assert g["lr_mult"] == 2.0, n
        else:
            assert g["lr_mult"] in (1.0, 2.0), n
    assert sum(n.endswith("smear") for n, _ in model.named_parameters()) == 2 + 2 + 1


def test_param_groups_give_the_copy_heads_feature_biases_their_own_rate():
    """copy_bias_lr_mult multiplies copy_lr_mult for the copy head's per-feature biases only (match,
    recall, age tables and their gate scalars), not for its linear layers (the gate's bias too)."""
    from drt_core.train import COPY_BIASES, TrainConfig, param_groups

    cfg = DRTConfig.from_preset("tiny", vocab_size=300, hidden_size=64, num_heads=2, intermediate_size=128,
                                copy_head=True, copy_match=4, copy_recall=3, copy_recall_age=4)
    model = DRTForCausalLM(cfg)
    groups = param_groups(model, TrainConfig(copy_lr_mult=3.0, copy_bias_lr_mult=10.0))
    by_id = {id(p): g for g in groups for p in g["params"]}
    seen = set()
    for n, p in model.named_parameters():
        if n.startswith("copy_head."):
            last = n.split(".")[-1]
            want = 30.0 if last in COPY_BIASES else 3.0
            assert by_id[id(p)]["lr_mult"] == want, n
            seen.add(last)
    assert set(COPY_BIASES) <= seen and "bias" in seen  # every feature bias exists; gate.bias stays at 3


def test_init_with_structural_overrides_adds_the_new_modules(tmp_path):
    """`train --init CKPT --set copy_head=true`: the override reaches the config before the model is
    built, so the copy head exists (freshly initialised like any layer: the gate's bias at 0) and every loaded
    weight is kept. Regression: overrides were set on the config after loading, adding nothing."""
    from drt_core.train import build_model

    data = build_token_dir(tmp_path / "data")
    torch.manual_seed(0)
    base = build_model(golden_config(data, tmp_path / "x"))
    base.save_pretrained(tmp_path / "init")
    cfg = golden_config(data, tmp_path / "run", init=str(tmp_path / "init"),
                        model_overrides={"copy_head": True, "smear_keys": True, "smear_init": 5.0})
    model = build_model(cfg)
    assert model.copy_head is not None and model.config.copy_head
    assert float(model.copy_head.gate.bias.detach()) == 0.0
    assert 0 < float(model.copy_head.q.weight.detach().std()) < 0.05
    sd = model.state_dict()
    for k, v in base.state_dict().items():
        assert torch.equal(sd[k], v), k
    assert all(float(p.detach().min()) == 5.0 for n, p in model.named_parameters() if n.endswith("attn.smear"))


def test_zero_steps_saves_the_initialised_model(tmp_path):
    """`train --steps 0 --set lexical=true --init-lexical DF`: the run writes the model as initialised
    (the lexical weights from idf, nothing trained), a model that evaluation can then compare at step 0."""
    import numpy as np

    from drt_core.train import chunk_idf

    data = build_token_dir(tmp_path / "data")
    out = tmp_path / "run"
    cfg = golden_config(data, out, steps=0, init_lexical=0.5, model_overrides={"lexical": True})
    train(cfg)
    model = DRTForCausalLM.from_pretrained(out / "model")
    df, n = chunk_idf(data, model.config.vocab_size, model.config.chunk_tokens)
    want = np.log(0.5 * n / np.maximum(df, 1)).clip(min=0.0)
    assert (want > 0).any()
    assert np.allclose(model.lexical.weight.detach().numpy(), want, atol=1e-5)
