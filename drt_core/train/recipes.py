"""Named recipes for the presets: a whole TrainConfig each, the settings of a run that was made (or
the paper's), for `drt-reader train --recipe NAME` (the flags given override it) or
`recipes.recipe(NAME).replace(...)`. Without --recipe, `train` starts from TrainConfig's defaults,
as before the recipes. Standard library only (the command line's parser imports drt_core.train)."""

from __future__ import annotations

from .options import TrainConfig


def tiny() -> TrainConfig:
    """The shipped tiny model's pretraining (checkpoints/drt-tiny-pretrained; its log is in
    docs/history/2026-11-29-to-12-01-model-rounds.md): the tiny preset (4M parameters), 620 steps of
    4 x 4032 tokens (10.0M tokens, books 0.7 / Stacks 0.3), lr 2e-3 -> 2e-4 after 20 warm-up
    steps, validation every 40 steps, a checkpoint every 10; ~4K tokens/s on two CPU cores."""
    return TrainConfig().replace(preset="tiny", seq_len=4032, batch_size=4, steps=620, warmup=20, lr=2e-3,
                                 min_lr=2e-4, eval_every=40, ckpt_every=10)


def small() -> TrainConfig:
    """The 22M DRT of bench/gpu_train.sh: the small preset at hidden 384 (6 heads, MLP 1024; 22.3M
    parameters), 32 x 4032 tokens a step per process (the script lowers the batch to what the
    memory estimate fits: bench.train --fit-batch), lr 1.5e-3 -> 1.5e-4, bf16 where the device has
    it, no validation. The script sizes --steps (and --warmup, 5%) to the GPU's measured speed;
    2500 steps here (323M tokens)."""
    cfg = TrainConfig().replace(preset="small", seq_len=4032, batch_size=32, steps=2500, warmup=126,
                                lr=1.5e-3, min_lr=1.5e-4, eval_every=0)
    cfg.model.model_overrides.update(hidden_size=384, num_heads=6, intermediate_size=1024)
    return cfg


def paper() -> TrainConfig:
    """The paper's recipe (docs/spec.md §5.2) on its model (the paper preset, 113.7M parameters):
    a global batch of 32 x 16,380 tokens (260 chunks) as 4 a process on 8 GPUs (torchrun
    --nproc-per-node 8), 60k steps, AdamW (lr 2e-3, betas 0.9 / 0.95, clip 1.0), cosine schedule
    with 2% warm-up, bf16. Ours ends on min_lr (2e-4), where the released scheduler decays to 0. A
    checkpoint every 200 steps (docs/training.md's commands). Not run: no GPU was available."""
    return TrainConfig().replace(preset="paper", seq_len=16380, batch_size=4, steps=60_000, warmup=1200,
                                 lr=2e-3, min_lr=2e-4, betas=(0.9, 0.95), grad_clip=1.0, bf16="on",
                                 ckpt_every=200)


RECIPES = {"tiny": tiny, "small": small, "paper": paper}


def recipe(name: str) -> TrainConfig:
    """The recipe called `name` (a fresh TrainConfig); SystemExit naming the recipes otherwise."""
    if name not in RECIPES:
        raise SystemExit(f"--recipe {name!r}: no such recipe; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]()
