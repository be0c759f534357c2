"""TrainConfig in groups (issue 59, item 7): the flat configs that checkpoints saved before the groups
still load, the nested ones round-trip, every `train` flag names one setting, and the named recipes
build the models they say."""

from __future__ import annotations

import argparse
import json
import logging

import pytest
import torch

from drt_core.train.flags import add_args, config_from_args
from drt_core.train.options import FLAT, GROUPS, TrainConfig
from drt_core.train.recipes import RECIPES, recipe

# the "config" of a state.pt written before the groups (a real one: 59 steps of a small tiny model)
OLD_FLAT = {
    "preset": "tiny", "arch": "drt", "data": "/tmp/gtdata", "out": "/tmp/gtrun", "init": None,
    "model_overrides": {"hidden_size": 64, "num_heads": 2, "intermediate_size": 128}, "seq_len": 504,
    "batch_size": 2, "steps": 59, "lr": 0.0015, "min_lr": 0.00015, "warmup": 3, "weight_decay": 0.01,
    "betas": (0.9, 0.95), "grad_clip": 1.0, "book_weight": 0.7, "eval_every": 0, "eval_batches": 4,
    "ckpt_every": 100000, "seed": 1234, "bf16": "auto", "fsdp": False, "max_minutes": 0.7, "task": None,
    "task_frac": 1.0, "answer_weight": 5.0, "task_pairs": 4, "task_len_min": 504, "task_len_ramp": 1000,
    "task_margin": 320, "force_retrieval": 0.0, "force_steps": 0, "gca_lr_mult": 1.0, "copy_lr_mult": 3.0,
    "copy_bias_lr_mult": 1.0, "oracle_steps": 0, "retrieval_loss": 0.0, "gca_out_scale": 1.0, "lm_loss": 1.0,
    "task_split": 0.0, "retrieval_distractors": 1.0, "target_needle_start": False, "cite_rename": 0.0,
    "hard_negatives": "", "hard_negatives_per_row": 32, "group_targets": False, "train_only": "",
    "qa_data": "", "qa_boilerplate": "", "qa_boilerplate_per_row": 8, "init_lexical": 0.0, "lexical_lr_mult": 1.0,
    "log_file": "/tmp/gtrun/log.jsonl",
}


def test_an_old_flat_config_loads_into_the_groups():
    cfg = TrainConfig.from_dict(OLD_FLAT)
    assert cfg.flat() == OLD_FLAT  # nothing lost, nothing added
    assert (cfg.data.dir, cfg.optim.lr, cfg.run.max_minutes, cfg.model.model_overrides["hidden_size"]) == \
        ("/tmp/gtdata", 0.0015, 0.7, 64)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # the nested form round-trips
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # through JSON too (betas)


def test_an_older_config_takes_the_defaults_of_newer_settings_and_drops_retired_ones():
    """A config of the model rounds: no qa_*, init_lexical, max_minutes...; smear_lr_mult, whose
    smeared keys no model has now, is dropped."""
    newer = ("qa_", "init_lexical", "lexical_lr", "max_")
    older = {k: v for k, v in OLD_FLAT.items() if not k.startswith(newer)}
    cfg = TrainConfig.from_dict({**older, "smear_lr_mult": 30.0})
    assert cfg.tasks.qa_boilerplate_per_row == 8 and cfg.run.max_minutes == 0.0 and cfg.optim.lr == 0.0015
    with pytest.raises(ValueError, match="unknown key 'lr_mlt'"):
        TrainConfig.from_dict({**OLD_FLAT, "lr_mlt": 2.0})
    with pytest.raises(ValueError, match="'optim'"):
        TrainConfig.from_dict({"optim": {"lr": 1e-3, "momentum": 0.9}})


def test_every_flag_sets_one_setting():
    p = argparse.ArgumentParser()
    add_args(p)
    dests = {a.dest for a in p._actions} - {"help", "recipe", "set", "json"}
    # model_overrides: --set; log_file: OUT/log.jsonl; betas: no flag (as before the groups)
    assert dests == set(FLAT) - {"log_file", "model_overrides", "betas"}
    assert len(FLAT) == sum(len(g.__dataclass_fields__) for g in GROUPS.values())  # no name in two groups
    cfg = config_from_args(p.parse_args(["--data", "D", "--lr", "1e-3", "--fsdp", "--task", "cite"]))
    assert (cfg.data.dir, cfg.optim.lr, cfg.run.fsdp, cfg.tasks.task) == ("D", 1e-3, True, "cite")
    assert cfg.run.log_file == "runs/tiny/log.jsonl"
    assert config_from_args(p.parse_args([])).flat() == TrainConfig().replace(
        log_file="runs/tiny/log.jsonl").flat()  # no flag, no recipe: the defaults, as before the recipes


def test_recipes_build_the_models_they_name_and_flags_override_them():
    from drt_core.train.model import model_config
    from drt_core.train.plan import count_parameters

    assert set(RECIPES) == {"tiny", "small", "paper"}
    params = {name: count_parameters(model_config(recipe(name))) for name in RECIPES}
    assert round(params["small"] / 1e6, 1) == 22.3 and round(params["paper"] / 1e6, 1) == 113.7
    assert params["tiny"] < 5e6
    paper = recipe("paper")
    assert (paper.data.seq_len, paper.optim.steps, paper.optim.warmup) == (16380, 60_000, 1200)
    assert paper.data.seq_len % 63 == 0
    p = argparse.ArgumentParser()
    add_args(p)
    cfg = config_from_args(p.parse_args(["--recipe", "small", "--lr", "1e-3", "--set", "copy_head=true"]))
    assert cfg.optim.lr == 1e-3 and cfg.data.batch_size == 32  # the flag over the recipe, the rest kept
    assert cfg.model.model_overrides == {"hidden_size": 384, "num_heads": 6, "intermediate_size": 1024,
                                         "copy_head": True}
    assert recipe("small").model.model_overrides == {"hidden_size": 384, "num_heads": 6,
                                                     "intermediate_size": 1024}  # a fresh one each time
    with pytest.raises(SystemExit, match="no such recipe"):
        recipe("huge")


def test_a_checkpoint_with_an_old_flat_config_resumes(tmp_path, caplog, monkeypatch):
    """A state.pt written before the groups holds a flat config: the run resumes from it, reads it
    (TrainConfig.from_dict) and logs what changed; the checkpoints it writes hold the nested form."""
    from drt_core.train.loop import train
    from tests.drt_core.record_golden import build_token_dir, golden_config

    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    data = build_token_dir(tmp_path / "data")
    out = tmp_path / "run"
    cfg = golden_config(data, out, steps=1, seq_len=252, batch_size=1,
                        model_overrides={"hidden_size": 64, "num_heads": 2, "intermediate_size": 128})
    train(cfg)
    st = torch.load(out / "state.pt", weights_only=False)
    assert TrainConfig.from_dict(st["config"]) == cfg
    st["config"] = cfg.flat()  # as written before the groups
    torch.save(st, out / "state.pt")
    with caplog.at_level(logging.INFO, logger="drt_core.train.checkpoint"):
        res = train(cfg.replace(steps=2))
    assert [h["step"] for h in res["history"]] == [1, 2]
    assert "settings changed since the checkpoint: steps 1 -> 2" in caplog.text
    saved = torch.load(out / "state.pt", weights_only=False)["config"]
    assert set(saved) == set(GROUPS) and saved["optim"]["steps"] == 2
