"""The training loop's guards: the learning-rate schedule honours min_lr, and a non-finite loss
stops training with the last good checkpoint kept."""

from __future__ import annotations

import pytest
import torch

from drt_core.hf_config import DRTConfig
from drt_core.modeling import DRTForCausalLM
from drt_core.train.loop import lr_at, train
from drt_core.train.options import TrainConfig
from tests.drt_core.record_golden import build_token_dir, golden_config


def test_schedule_warms_up_then_decays_to_min_lr():
    """The reference scheduler ignored min_lr (spec §5.2); ours ends exactly on it."""
    cfg = TrainConfig().replace(lr=1e-3, min_lr=1e-4, warmup=10, steps=100)
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
        if calls["n"] == 3:  # the third training step (the loss is computed from the logits)
            res.logits = res.logits * float("nan")
        return res

    monkeypatch.setattr(DRTForCausalLM, "forward", poisoned)
    with pytest.raises(FloatingPointError):
        train(golden_config(data, out, steps=4, ckpt_every=1))
    st = torch.load(out / "state.pt", weights_only=False)
    assert st["step"] == 2  # steps 1 and 2 were checkpointed; step 3 was never applied
    assert all(torch.isfinite(v).all() for v in st["model"].values())


def test_param_groups_give_the_copy_heads_feature_biases_their_own_rate():
    """copy_bias_lr_mult multiplies copy_lr_mult for the copy head's per-feature biases only (match,
    recall, age tables and their gate scalars), not for its linear layers (the gate's bias too)."""
    from drt_core.train.model import COPY_BIASES, param_groups

    cfg = DRTConfig.from_preset("tiny", vocab_size=300, hidden_size=64, num_heads=2, intermediate_size=128,
                                copy_head=True, copy_match=4, copy_recall=3, copy_recall_age=4)
    model = DRTForCausalLM(cfg)
    groups = param_groups(model, TrainConfig().replace(copy_lr_mult=3.0, copy_bias_lr_mult=10.0))
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
    from drt_core.train.model import build_model

    data = build_token_dir(tmp_path / "data")
    torch.manual_seed(0)
    base = build_model(golden_config(data, tmp_path / "x"))
    base.save_pretrained(tmp_path / "init")
    cfg = golden_config(data, tmp_path / "run", init=str(tmp_path / "init"),
                        model_overrides={"copy_head": True})
    model = build_model(cfg)
    assert model.copy_head is not None and model.config.copy_head
    assert float(model.copy_head.gate.bias.detach()) == 0.0
    assert 0 < float(model.copy_head.q.weight.detach().std()) < 0.05
    sd = model.state_dict()
    for k, v in base.state_dict().items():
        assert torch.equal(sd[k], v), k


def test_zero_steps_saves_the_initialised_model(tmp_path):
    """`train --steps 0 --set lexical=true --init-lexical DF`: the run writes the model as initialised
    (the lexical weights from idf, nothing trained), a model that evaluation can then compare at step 0."""
    import numpy as np

    from drt_core.train.model import chunk_idf

    data = build_token_dir(tmp_path / "data")
    out = tmp_path / "run"
    cfg = golden_config(data, out, steps=0, init_lexical=0.5, model_overrides={"lexical": True})
    train(cfg)
    model = DRTForCausalLM.from_pretrained(out / "model")
    df, n = chunk_idf(data, model.config.vocab_size, model.config.chunk_tokens)
    want = np.log(0.5 * n / np.maximum(df, 1)).clip(min=0.0)
    assert (want > 0).any()
    assert np.allclose(model.lexical.weight.detach().numpy(), want, atol=1e-5)


def test_max_minutes_stops_and_saves_at_a_step_boundary(tmp_path):
    """`train --max-minutes`: the GPU scripts' time box. Past the limit the run saves the step it
    finished and stops; the saved state resumes from there."""
    data = build_token_dir(tmp_path / "data")
    out = tmp_path / "run"
    res = train(golden_config(data, out, steps=50, ckpt_every=100, max_minutes=1e-9))
    st = torch.load(out / "state.pt", weights_only=False)
    assert st["step"] == 1 == len(res["history"])
    assert (out / "model" / "model.safetensors").exists()


# -- the plan and the memory estimate (issue 32, item 2) ------------------------------------------


def test_count_parameters_matches_the_built_model():
    from drt_core.train.plan import count_parameters

    for mc in (DRTConfig.from_preset("tiny"), DRTConfig.from_preset("tiny", copy_head=True, lexical=True),
               DRTConfig.from_preset("paper", hidden_size=192, num_heads=3, intermediate_size=512),
               DRTConfig.from_preset("tiny", arch="sliding_window")):
        assert count_parameters(mc) == sum(p.numel() for p in DRTForCausalLM(mc).parameters())


def test_memory_estimate_grows_with_batch_and_length_and_shrinks_with_fsdp():
    from drt_core.train.plan import estimate_memory

    mc = DRTConfig.from_preset("tiny")
    act = [estimate_memory(mc, b, L)["activations"] for b, L in ((1, 504), (2, 504), (1, 1008), (2, 1008))]
    assert act[0] < act[1] < act[3] and act[0] < act[2] < act[3]
    assert 1.5 * act[0] < act[1] <= 2 * act[0]  # ~linear in the batch (the attention masks are shared)
    one, ddp, fsdp = (estimate_memory(mc, 2, 504, *a) for a in ((1, False), (8, False), (8, True)))
    assert fsdp["weights"] == pytest.approx(one["weights"] / 8) and fsdp["adamw"] == pytest.approx(one["adamw"] / 8)
    assert fsdp["total"] < one["total"] < ddp["total"]
    assert estimate_memory(mc, 2, 504, bf16=True)["activations"] < one["activations"]
    assert one["params"] == 4008960 and one["weights"] == pytest.approx(4008960 * 4 / 2**30)


def test_activation_estimate_equals_what_a_real_forward_saves():
    """The meta-device count equals the bytes a real CPU forward saves for backward (fp32)."""
    from drt_core.train.plan import activation_bytes

    torch.manual_seed(0)
    mc = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128)
    model = DRTForCausalLM(mc).train()
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    ids = torch.randint(3, mc.vocab_size, (2, 504))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids, labels=ids)
    assert activation_bytes(mc, 2, 504) == pytest.approx(sum(seen.values()), rel=0.02)


def test_activation_estimate_of_a_lexical_model_and_a_plan_without_nan(monkeypatch):
    """Regression: the lexical term (torch.unique, no meta kernel) made the estimate nan, printed as
    'estimated memory per device nan GiB'. It is now counted without that term, and the plan of a
    model that cannot be estimated says so instead of printing nan."""
    from drt_core.train import plan as tr

    lex = DRTConfig.from_preset("tiny", lexical=True, lexical_doc_df=1.0, lexical_words=2.0, lexical_word_carry=True)
    plain = DRTConfig.from_preset("tiny")
    assert tr.activation_bytes(lex, 1, 504) == tr.activation_bytes(plain, 1, 504) > 0
    monkeypatch.setattr(tr, "activation_bytes", lambda *a, **k: None)
    text = tr.plan_text(TrainConfig().replace(preset="tiny", batch_size=1, seq_len=504))
    assert "nan" not in text and "activations not estimated" in text


def test_plan_names_what_the_paper_preset_will_use(monkeypatch):
    from drt_core.train.plan import plan_text

    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    text = plan_text(TrainConfig().replace(preset="paper", seq_len=4032, batch_size=4, steps=10, bf16="off"))
    assert "preset paper" in text and "113.7M parameters" in text
    assert "4 x 4032 tokens per process x 1 = 16,128 tokens per step" in text
    assert "device cpu, fp32, one process" in text and "estimated memory per device" in text
    monkeypatch.setenv("WORLD_SIZE", "8")
    text = plan_text(TrainConfig().replace(preset="paper", seq_len=4032, batch_size=4, fsdp=True, bf16="on"))
    assert "FSDP2 over 8 processes" in text and "129,024 tokens per step" in text


def test_fit_batch_size_is_the_largest_batch_the_estimate_fits():
    """Issue 53: the GPU scripts size their batch from the estimate and the device's memory."""
    from drt_core.train.plan import estimate_memory, fit_batch_size

    mc = DRTConfig.from_preset("tiny")
    gib = 1024 ** 3
    b = fit_batch_size(mc, 504, 2 * gib)
    assert b > 1
    assert estimate_memory(mc, b, 504)["total"] <= 0.8 * 2
    assert estimate_memory(mc, b + 1, 504)["total"] > 0.8 * 2
    assert fit_batch_size(mc, 504, 4 * gib) >= 2 * b - 1  # ~linear in the memory
    assert fit_batch_size(mc, 504, 4 * gib, max_batch=3) == 3
    assert fit_batch_size(mc, 504, 1024) == 1  # nothing fits: 1, which fails where it runs
    assert fit_batch_size(mc, 504, 2 * gib, bf16=True) > b


@pytest.mark.slow
def test_paper_preset_trains_a_few_steps_on_cpu(tmp_path, monkeypatch):
    """The paper's 113.7M model, 3 steps of 1 x 512 tokens (fp32, one thread: ~9 s a step on this
    2-core EPYC; 41 s in all)."""
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    data = build_token_dir(tmp_path / "data")
    cfg = TrainConfig().replace(preset="paper", data=str(data), out=str(tmp_path / "run"), seq_len=512,
                                batch_size=1, steps=3, warmup=1, eval_every=0, ckpt_every=1000, bf16="off",
                                book_weight=1.0)
    losses = [h["loss"] for h in train(cfg)["history"]]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    assert losses[0] < 10.0 and losses[-1] < losses[0]  # starts near ln(8192) = 9.01 and learns
    assert (tmp_path / "run" / "model" / "model.safetensors").exists()


def test_set_refuses_a_config_key_the_model_does_not_take():
    """`train --set copy_heads=true` used to train without a copy head and say nothing (issue 53)."""
    import argparse

    from drt_core.train.cli import register
    from drt_core.train.flags import check_config_keys, config_from_args

    check_config_keys(["copy_head", "lexical_words", "upper_groups"])  # known: no error
    with pytest.raises(SystemExit, match="copy_heads.*did you mean copy_head"):
        check_config_keys(["copy_heads"])
    ap = argparse.ArgumentParser()
    register(ap.add_subparsers())
    args = ap.parse_args(["train", "--out", "x", "--set", "copy_heads=true"])
    with pytest.raises(SystemExit, match="unknown config key"):
        config_from_args(args)
