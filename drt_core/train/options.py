"""A training run's settings (`TrainConfig`, in six groups) and their conversion from and to the
dicts that checkpoints hold; the document split's seed (`data --seed`). Standard library only: the
command line (drt_core.train.cli, flags) imports this module for `drt-reader --help`, and the
modules that do the work (loop, data: numpy, torch) import it.

Each `train` flag `--x-y` sets one field `x_y` of one group (`--data`: data.dir; drt_core.train.flags),
and a config's flat dict (`TrainConfig.flat`) is keyed by those names: the shape every config had
before the groups, which the checkpoints written then still hold (`from_dict` reads both). Named
recipes for the presets are in drt_core.train.recipes (`train --recipe`)."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields

SPLIT_SEED = 20261129  # `data --seed`'s default: the seed of the document split (data.make_splits)


@dataclass
class ModelSetup:
    """What is trained: a preset's model (or a baseline's, `arch`), or a checkpoint to fine-tune."""

    preset: str = "tiny"
    arch: str = "drt"
    init: str | None = None  # start from these weights (fine-tuning)
    model_overrides: dict = field(default_factory=dict)  # DRTConfig keys (`--set KEY=VALUE`)
    gca_out_scale: float = 1.0  # with --init: scale the GCA output projections once at the start
    init_lexical: float = 0.0  # > 0: the lexical scorer's token weights from idf (0 above this chunk share)


@dataclass
class DataSetup:
    """The token windows: where they are read, how long, how many a step, the corpora's mix."""

    dir: str = "data"  # `--data`: the directory written by `drt-reader data`
    seq_len: int = 4032  # tokens per sample (64 chunks of 63)
    batch_size: int = 4  # per process
    book_weight: float = 0.7  # mixing weight of books vs mathematics (stacks)


@dataclass
class Optimisation:
    """AdamW, the schedule (warm-up, cosine to min_lr over `steps`) and what trains at which rate."""

    steps: int = 2500
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup: int = 50
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.95)
    grad_clip: float = 1.0
    gca_lr_mult: float = 1.0  # lr multiplier of the retrieval path (GCA, chunk encoder, query norms)
    copy_lr_mult: float = 3.0  # lr multiplier of the copy head (config copy_head), new on a trained model
    copy_bias_lr_mult: float = 1.0  # and on top of it, of the copy head's feature biases (COPY_BIASES)
    lexical_lr_mult: float = 1.0  # lr multiplier of the lexical scorer's weights and scales
    train_only: str = ""  # comma-separated parameter-name fragments to train (others frozen); "" = all


@dataclass
class TaskMix:
    """Retrieval fine-tuning: which task rows (drt_core.train.tasks) a batch holds, and how they are built."""

    task: str | None = None  # single | multikey | 2hop | repeat | cite | qa, or a comma-separated mix
    task_frac: float = 1.0  # fraction of each batch made of task examples
    answer_weight: float = 5.0
    task_pairs: int = 4  # needle/question pairs per training sequence
    task_len_min: int = 504  # haystack grows from this length...
    task_len_ramp: int = 1000  # ...to seq_len over this many steps
    task_margin: int = 320  # needle-free tokens before the questions (> window: retrieval needed)
    task_split: float = 0.0  # share of needles written across a chunk boundary at the value (split_frac)
    cite_rename: float = 0.0  # share of cite rows whose label names are renamed (tasks.cite.rename_labels)
    hard_negatives: str = ""  # .npy of mined hub passages (drt-reader bench mine_hubs) spliced into NIAH rows
    hard_negatives_per_row: int = 32  # how many passages each single / multikey / 2hop row gets
    qa_data: str = ""  # mined questions (drt_core.mine): a directory with train.jsonl, .bin; "" = <data>/qa
    qa_boilerplate: str = ""  # .npy of boilerplate passages (licence pages, contents) spliced into qa rows
    qa_boilerplate_per_row: int = 8  # how many each qa row gets


@dataclass
class RetrievalObjective:
    """What training adds to the LM loss (drt_core.train.objective): the retrieval loss, forced chunks."""

    lm_loss: float = 1.0  # weight of the LM loss (0 with --retrieval-loss: train the scorer alone)
    retrieval_loss: float = 0.0  # weight of the forced rows' retrieval cross-entropy (0 = LM loss only)
    retrieval_distractors: float = 1.0  # the retrieval loss counts every other chunk this many times
    force_retrieval: float = 0.0  # P(answer's needle chunk forced into the selection) at step 0...
    force_steps: int = 0  # ...decaying linearly to 0 over this many steps (teacher-forced retrieval)
    oracle_steps: int = 0  # first steps: forced rows read only the needle chunk (copy-path warm-up)
    target_needle_start: bool = False  # a needle written across chunks: its first chunk is a target too
    group_targets: bool = False  # G >= 2: group g is trained (and forced) toward target column g


@dataclass
class Runtime:
    """Where the run writes, its seed, validation and checkpoints, dtype, parallelism, time box."""

    out: str = "runs/tiny"
    seed: int = 1234
    eval_every: int = 100
    eval_batches: int = 4
    ckpt_every: int = 50
    bf16: str = "auto"  # auto | on | off
    fsdp: bool = False
    max_minutes: float = 0.0  # stop (and save) at the first step after this much training time; 0 = no limit
    log_file: str | None = None


GROUPS = {"model": ModelSetup, "data": DataSetup, "optim": Optimisation, "tasks": TaskMix,
          "objective": RetrievalObjective, "run": Runtime}
# every flat name (a flag's, and a key of the configs saved before the groups) -> (group, field)
FLAT: dict[str, tuple[str, str]] = {("data" if g == "data" and f.name == "dir" else f.name): (g, f.name)
                                    for g, cls in GROUPS.items() for f in fields(cls)}
# keys of configs saved by earlier versions that no setting replaces: dropped when read
RETIRED_KEYS = {
    "smear_lr_mult": "the lr multiplier of the smeared keys (config smear_keys, retired): no model has them "
                     "now",
}


@dataclass
class TrainConfig:
    """A training run's settings, in groups: `cfg.optim.lr`, `cfg.data.seq_len`, `cfg.run.out`."""

    model: ModelSetup = field(default_factory=ModelSetup)
    data: DataSetup = field(default_factory=DataSetup)
    optim: Optimisation = field(default_factory=Optimisation)
    tasks: TaskMix = field(default_factory=TaskMix)
    objective: RetrievalObjective = field(default_factory=RetrievalObjective)
    run: Runtime = field(default_factory=Runtime)

    def replace(self, **flat) -> TrainConfig:
        """A copy with the settings named by their flat names (`replace(lr=1e-3, data="DIR")`)."""
        bad = sorted(k for k in flat if k not in FLAT)
        if bad:
            raise TypeError(f"unknown training setting(s) {', '.join(bad)}")
        new = copy.deepcopy(self)
        for k, v in flat.items():
            g, f = FLAT[k]
            setattr(getattr(new, g), f, v)
        return new

    def flat(self) -> dict:
        """{flat name: value}: the flags' names, the shape of the configs saved before the groups."""
        return {k: getattr(getattr(self, g), f) for k, (g, f) in FLAT.items()}

    def to_dict(self) -> dict:
        """The nested dict a checkpoint saves (trainer state "config"); from_dict reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """A config from a saved dict: nested ({"optim": {"lr": ...}, ...}: to_dict's), or flat
        ({"lr": ..., "data": "DIR", ...}: every config saved before the groups, in the checkpoints'
        trainer state), or a mix. Missing settings take their defaults (older versions had fewer);
        retired ones (RETIRED_KEYS) are dropped; any other unknown key is refused (ValueError)."""
        flat: dict = {}
        for k, v in d.items():
            if k in GROUPS and isinstance(v, dict):
                names = {f.name for f in fields(GROUPS[k])}
                bad = sorted(set(v) - names)
                if bad:
                    raise ValueError(f"training config: unknown key(s) {', '.join(bad)} in {k!r}")
                flat.update({("data" if k == "data" and f == "dir" else f): x for f, x in v.items()})
            elif k in FLAT:
                flat[k] = v
            elif k not in RETIRED_KEYS:
                raise ValueError(f"training config: unknown key {k!r}")
        if "betas" in flat:
            flat["betas"] = tuple(flat["betas"])  # a JSON round trip makes it a list
        return cls().replace(**flat)
