"""What the `train` and `data` commands take: a training run's settings (`TrainConfig`), the
`train` options (`add_args`) and the document split's seed. Standard library only: the command
line (drt_core.train.cli) imports this module for `drt-reader --help`, and the modules that do the
work (loop, data: numpy, torch) import it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SPLIT_SEED = 20261129  # `data --seed`'s default: the seed of the document split (data.make_splits)


@dataclass
class TrainConfig:
    preset: str = "tiny"
    arch: str = "drt"
    data: str = "data"
    out: str = "runs/tiny"
    init: str | None = None  # start from these weights (fine-tuning)
    model_overrides: dict = field(default_factory=dict)
    seq_len: int = 4032  # tokens per sample (64 chunks of 63)
    batch_size: int = 4  # per process
    steps: int = 2500
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup: int = 50
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.95)
    grad_clip: float = 1.0
    book_weight: float = 0.7  # mixing weight of books vs mathematics (stacks)
    eval_every: int = 100
    eval_batches: int = 4
    ckpt_every: int = 50
    seed: int = 1234
    bf16: str = "auto"  # auto | on | off
    fsdp: bool = False
    # retrieval fine-tuning
    max_minutes: float = 0.0  # stop (and save) at the first step after this much training time; 0 = no limit
    task: str | None = None  # single | multikey | 2hop, or a comma-separated mix (alternating)
    task_frac: float = 1.0  # fraction of each batch made of task examples
    answer_weight: float = 5.0
    task_pairs: int = 4  # needle/question pairs per training sequence
    task_len_min: int = 504  # haystack grows from this length...
    task_len_ramp: int = 1000  # ...to seq_len over this many steps
    task_margin: int = 320  # needle-free tokens before the questions (> window: retrieval needed)
    force_retrieval: float = 0.0  # P(answer's needle chunk forced into the selection) at step 0...
    force_steps: int = 0  # ...decaying linearly to 0 over this many steps (teacher-forced retrieval)
    gca_lr_mult: float = 1.0  # lr multiplier of the retrieval path (GCA, chunk encoder, query norms)
    copy_lr_mult: float = 3.0  # lr multiplier of the copy head (config copy_head), new on a trained model
    copy_bias_lr_mult: float = 1.0  # and on top of it, of the copy head's feature biases (COPY_BIASES)
    oracle_steps: int = 0  # first steps: forced rows read only the needle chunk (copy-path warm-up)
    retrieval_loss: float = 0.0  # weight of the forced rows' retrieval cross-entropy (0 = LM loss only)
    gca_out_scale: float = 1.0  # with --init: scale the GCA output projections once at the start
    lm_loss: float = 1.0  # weight of the LM loss (0 with --retrieval-loss: train the scorer alone)
    task_split: float = 0.0  # share of needles written across a chunk boundary at the value (split_frac)
    retrieval_distractors: float = 1.0  # the retrieval loss counts every other chunk this many times
    target_needle_start: bool = False  # a needle written across chunks: its first chunk is a retrieval target too
    cite_rename: float = 0.0  # share of cite rows whose label names are renamed (tasks.cite.rename_labels)
    hard_negatives: str = ""  # .npy of mined hub passages (drt-reader bench mine_hubs) spliced into NIAH rows
    hard_negatives_per_row: int = 32  # how many passages each single / multikey / 2hop row gets
    group_targets: bool = False  # G >= 2: group g is trained (and forced) toward target column g (2hop: hop g + 1)
    train_only: str = ""  # comma-separated parameter-name fragments to train (others frozen); "" = all
    qa_data: str = ""  # mined questions (drt_core.mine): directory with train.jsonl / train.bin; "" = <data>/qa
    qa_boilerplate: str = ""  # .npy of boilerplate passages (licence pages, contents) spliced into qa rows
    qa_boilerplate_per_row: int = 8  # how many each qa row gets
    init_lexical: float = 0.0  # > 0: set the lexical scorer's token weights from idf (tokens in more than this share of chunks get 0)
    lexical_lr_mult: float = 1.0  # lr multiplier of the lexical scorer's weights and scales
    log_file: str | None = None


def add_args(p: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    p.add_argument("--preset", default=d.preset, help="tiny | small | paper")
    p.add_argument("--arch", default=d.arch, help="drt | sliding_window | full_attention | fixed_retriever | landmark")
    p.add_argument("--data", default=d.data, help="directory written by `drt-reader data`")
    p.add_argument("--out", default=d.out, help="run directory (state.pt, model/, log)")
    p.add_argument("--init", default=None, help="start from this checkpoint (fine-tuning)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, e.g. --set upper_groups=[1,1] (JSON values)")
    for name in ("seq_len", "batch_size", "steps", "warmup", "eval_every", "eval_batches", "ckpt_every", "seed",
                 "task_pairs", "task_len_min", "task_len_ramp", "task_margin", "force_steps", "oracle_steps"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name), help=f"default {getattr(d, name)}")
    for name in ("lr", "min_lr", "weight_decay", "grad_clip", "book_weight", "task_frac", "answer_weight",
                 "force_retrieval", "gca_lr_mult", "copy_lr_mult", "copy_bias_lr_mult", "retrieval_loss", "gca_out_scale", "lm_loss",
                 "task_split"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(d, name), help=f"default {getattr(d, name)}")
    p.add_argument("--retrieval-distractors", type=_at_least_one, default=d.retrieval_distractors, metavar="M",
                   help="the retrieval loss counts every non-target chunk M times, as if each row's haystack were "
                        "M times longer (train at 64K for the competition of 64K*M tokens); default 1")
    p.add_argument("--cite-rename", type=float, default=d.cite_rename, metavar="P",
                   help="cite rows: share whose statements' label names are renamed at random, consistently in "
                        "\\label and \\ref (the scorer must match names, not topics); default 0")
    p.add_argument("--hard-negatives", default="", metavar="HUBS.npy",
                   help="mined hub passages (drt-reader bench mine_hubs) spliced into every NIAH row's haystack")
    p.add_argument("--hard-negatives-per-row", type=int, default=d.hard_negatives_per_row,
                   help=f"passages per row (default {d.hard_negatives_per_row})")
    p.add_argument("--qa-data", default="", help="mined questions (python -m drt_core.mine): a directory with "
                   "train.jsonl and train.bin; default <data>/qa")
    p.add_argument("--qa-boilerplate", default="", metavar="PASSAGES.npy",
                   help="boilerplate passages (licence pages, contents lists: ingest.boilerplate) written over "
                        "chunks of every qa row's window")
    p.add_argument("--qa-boilerplate-per-row", type=int, default=d.qa_boilerplate_per_row)
    p.add_argument("--init-lexical", type=float, default=0.0, metavar="DF",
                   help="set the lexical scorer's token weights (config lexical) from the training data's idf "
                        "over chunks, 0 for tokens in more than this share of chunks (e.g. 0.02)")
    p.add_argument("--lexical-lr-mult", type=float, default=d.lexical_lr_mult)
    p.add_argument("--bf16", default="auto", choices=["auto", "on", "off"], help="bf16 autocast")
    p.add_argument("--train-only", default="", help="train only parameters whose names contain one of these "
                   "comma-separated fragments, e.g. encoder.,lmk_norms. (the retrieval scorer)")
    p.add_argument("--target-needle-start", action="store_true",
                   help="single / multikey: a needle written across a chunk boundary also has its first chunk as "
                        "retrieval target (tasks.needles.retrieval_targets needle_start)")
    p.add_argument("--group-targets", action="store_true",
                   help="G >= 2 groups: group g is trained toward target column g alone (2hop: group 1 finds "
                        "hop 1's chunk, group 2 hop 2's) instead of every group toward any target")
    p.add_argument("--max-minutes", type=float, default=0.0,
                   help="stop and save at the first step after this many minutes of training (a time box: "
                        "the learning-rate schedule still runs to --steps, so choose --steps to fit)")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 instead of DDP under torchrun (large presets)")
    p.add_argument("--task", default=None, type=_tasks_arg,
                   help="retrieval fine-tuning task(s): single, multikey, 2hop, repeat (copy warm-up), "
                        "cite (Stacks \\ref -> \\label retrieval targets) or a comma-separated mix")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _at_least_one(s: str) -> float:
    x = float(s)
    if not x >= 1.0:
        raise argparse.ArgumentTypeError(f"{s} is below 1 (M = 1 is the plain loss; M > 1 adds competition)")
    return x


def _tasks_arg(s: str) -> str:
    parts = [p.strip() for p in s.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("single", "multikey", "2hop", "repeat", "cite", "qa")]
    if not parts or bad:
        raise argparse.ArgumentTypeError(f"unknown task(s) {bad or s!r}; use single, multikey, 2hop, repeat, cite, qa")
    return ",".join(parts)
