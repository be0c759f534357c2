"""The `train` options (`add_args`) and the TrainConfig they make (`config_from_args`: a recipe or
the defaults, then every flag given, then the --set overrides of the model's config). Standard
library only at import: the command line's parser (drt_core.train.cli) imports this module for
`drt-reader --help`; `python -m drt_core.train.loop` (torchrun) parses with it too."""

from __future__ import annotations

import argparse

from .options import FLAT, TrainConfig
from .recipes import recipe

INT_FLAGS = ("seq_len", "batch_size", "steps", "warmup", "eval_every", "eval_batches", "ckpt_every", "seed",
             "task_pairs", "task_len_min", "task_len_ramp", "task_margin", "force_steps", "oracle_steps")
FLOAT_FLAGS = ("lr", "min_lr", "weight_decay", "grad_clip", "book_weight", "task_frac", "answer_weight",
               "force_retrieval", "gca_lr_mult", "copy_lr_mult", "copy_bias_lr_mult", "retrieval_loss",
               "gca_out_scale", "lm_loss", "task_split")


def add_args(p: argparse.ArgumentParser) -> None:
    """The `train` options. Their defaults are None: a flag given overrides the recipe (--recipe) or
    TrainConfig's default, one not given leaves it (config_from_args); help shows TrainConfig's."""
    d = TrainConfig().flat()
    p.add_argument("--recipe", default=None, metavar="NAME",
                   help="start from a named recipe (drt_core.train.recipes: tiny, small, paper); "
                        "the flags given override it")
    p.add_argument("--preset", default=None, help="tiny | small | paper")
    p.add_argument("--arch", default=None,
                   help="drt | sliding_window | full_attention | fixed_retriever | landmark")
    p.add_argument("--data", default=None, help="directory written by `drt-reader data`")
    p.add_argument("--out", default=None, help="run directory (state.pt, model/, log)")
    p.add_argument("--init", default=None, help="start from this checkpoint (fine-tuning)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, e.g. --set upper_groups=[1,1] (JSON values)")
    for name in INT_FLAGS:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"default {d[name]}")
    for name in FLOAT_FLAGS:
        p.add_argument("--" + name.replace("_", "-"), type=float, default=None, help=f"default {d[name]}")
    _add_task_args(p, d)
    p.add_argument("--bf16", default=None, choices=["auto", "on", "off"], help="bf16 autocast")
    p.add_argument("--train-only", default=None,
                   help="train only parameters whose names contain one of these comma-separated fragments, "
                        "e.g. encoder.,lmk_norms. (the retrieval scorer)")
    p.add_argument("--target-needle-start", action="store_true", default=None,
                   help="single / multikey: a needle written across a chunk boundary also has its first "
                        "chunk as retrieval target (tasks.needles.retrieval_targets needle_start)")
    p.add_argument("--group-targets", action="store_true", default=None,
                   help="G >= 2 groups: group g is trained toward target column g alone (2hop: group 1 finds "
                        "hop 1's chunk, group 2 hop 2's) instead of every group toward any target")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop and save at the first step after this many minutes of training (a time box: "
                        "the learning-rate schedule still runs to --steps, so choose --steps to fit)")
    p.add_argument("--fsdp", action="store_true", default=None,
                   help="FSDP2 instead of DDP under torchrun (large presets)")
    p.add_argument("--task", default=None, type=_tasks_arg,
                   help="retrieval fine-tuning task(s): single, multikey, 2hop, repeat (copy warm-up), "
                        "cite (Stacks \\ref -> \\label retrieval targets) or a comma-separated mix")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _add_task_args(p: argparse.ArgumentParser, d: dict) -> None:
    p.add_argument("--retrieval-distractors", type=_at_least_one, default=None, metavar="M",
                   help="the retrieval loss counts every non-target chunk M times, as if each row's "
                        "haystack were M times longer (train at 64K for the competition of 64K*M tokens); "
                        "default 1")
    p.add_argument("--cite-rename", type=float, default=None, metavar="P",
                   help="cite rows: share whose statements' label names are renamed at random, consistently "
                        "in \\label and \\ref (the scorer must match names, not topics); default 0")
    p.add_argument("--hard-negatives", default=None, metavar="HUBS.npy",
                   help="mined hub passages (drt-reader bench mine_hubs) spliced into every NIAH row's "
                        "haystack")
    p.add_argument("--hard-negatives-per-row", type=int, default=None,
                   help=f"passages per row (default {d['hard_negatives_per_row']})")
    p.add_argument("--qa-data", default=None,
                   help="mined questions (python -m drt_core.mine): a directory with train.jsonl and "
                        "train.bin; default <data>/qa")
    p.add_argument("--qa-boilerplate", default=None, metavar="PASSAGES.npy",
                   help="boilerplate passages (licence pages, contents lists: ingest.boilerplate) written "
                        "over chunks of every qa row's window")
    p.add_argument("--qa-boilerplate-per-row", type=int, default=None)
    p.add_argument("--init-lexical", type=float, default=None, metavar="DF",
                   help="set the lexical scorer's token weights (config lexical) from the training data's "
                        "idf over chunks, 0 for tokens in more than this share of chunks (e.g. 0.02)")
    p.add_argument("--lexical-lr-mult", type=float, default=None)


def _at_least_one(s: str) -> float:
    x = float(s)
    if not x >= 1.0:
        raise argparse.ArgumentTypeError(f"{s} is below 1 (M = 1 is the plain loss; M > 1 adds competition)")
    return x


def _tasks_arg(s: str) -> str:
    parts = [p.strip() for p in s.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("single", "multikey", "2hop", "repeat", "cite", "qa")]
    if not parts or bad:
        raise argparse.ArgumentTypeError(f"unknown task(s) {bad or s!r}; "
                                         "use single, multikey, 2hop, repeat, cite, qa")
    return ",".join(parts)


def config_from_args(args) -> TrainConfig:
    """The run's TrainConfig: the recipe (--recipe) or the defaults, then every flag given, then the
    --set overrides (checked against DRTConfig's keys), the log file in OUT."""
    import json
    from pathlib import Path

    cfg = recipe(args.recipe) if getattr(args, "recipe", None) else TrainConfig()
    cfg = cfg.replace(**{k: getattr(args, k) for k in FLAT if getattr(args, k, None) is not None})
    check_config_keys([kv.partition("=")[0] for kv in args.set])
    overrides = cfg.model.model_overrides
    for kv in args.set:
        k, _, v = kv.partition("=")
        try:
            overrides[k] = json.loads(v)
        except json.JSONDecodeError:
            overrides[k] = v
        if k == "stream_preamble" and v == "default":  # prompts.STREAM_PREAMBLE, what the shipped model reads
            from ..prompts import stream_preamble_ids

            overrides[k] = stream_preamble_ids()
    obj = cfg.objective
    if obj.group_targets and (obj.target_needle_start or "cite" in (cfg.tasks.task or "").split(",")):
        raise SystemExit("--group-targets gives target column g to group g: it cannot be combined with "
                         "--target-needle-start or the cite task, whose columns are alternatives")
    cfg.run.log_file = str(Path(cfg.run.out) / "log.jsonl")
    return cfg


def check_config_keys(keys) -> None:
    """SystemExit naming each key that DRTConfig does not take (`--set copy_heads=true` would
    otherwise train without a copy head and say nothing), with the nearest keys it does take."""
    import difflib

    from ..config import VALID_KEYS

    known = sorted(VALID_KEYS)
    bad = [k for k in keys if k not in known]
    if bad:
        close = {k: ", ".join(difflib.get_close_matches(k, known, 3)) or "none close" for k in bad}
        hints = "; ".join(f"{k!r}: did you mean {close[k]}?" for k in bad)
        raise SystemExit(f"--set: unknown config key(s) {', '.join(map(repr, bad))} ({hints})")
