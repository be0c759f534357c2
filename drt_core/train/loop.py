"""Training: `drt-reader train --preset tiny --data DIR --out DIR` (DRT and the baselines).

AdamW; linear warm-up then cosine decay to a minimum learning rate that is honoured (unlike the
reference code, spec §5.2); gradient clipping; bf16 autocast where the hardware has it; periodic
validation loss on fixed held-out windows; atomic checkpoints (write, fsync, rename) with exact
resume (the batch of step s is a pure function of (seed, s), so resuming replays the same data);
a stop on a non-finite loss; one log line per step. Data parallel through torchrun: gloo on CPU,
NCCL on GPU, FSDP2 (`--fsdp`) for the large presets. Each rank takes its slice of the same global
batch, so N processes follow the loss curve of one process on the global batch.

Fine-tuning for retrieval (`--task single|multikey|2hop --init CKPT`) mixes synthetic NIAH examples
over real haystacks (drt_core.train.tasks.needles) into the LM stream, answer tokens weighted by `--answer-weight`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import sys
import time
from types import SimpleNamespace
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .objective import scorer_loss, training_forward
from .options import TrainConfig, add_args  # noqa: F401  (TrainConfig, add_args: kept importable from loop)

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr at the last step (min_lr is reached)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - 1 - cfg.warmup)
    t = min(max(t, 0.0), 1.0)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * t))


def use_bf16(cfg: TrainConfig, device: torch.device) -> bool:
    if cfg.bf16 == "on":
        return True
    if cfg.bf16 == "off":
        return False
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:  # CPUs with AVX512-BF16 / AMX run bf16 matmuls natively
        flags = open("/proc/cpuinfo").read()
        return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        return False


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary name, fsync, rename: a crash never leaves a torn checkpoint."""
    from store.chunk_store import atomic_write

    atomic_write(path, lambda f: torch.save(obj, f))


def trim_log(path: Path, step: int) -> int:
    """Drop the log records of steps after `step`, the checkpoint a resume starts from: the crashed
    run logged them and the resume replays them, so without this the log holds those steps twice.
    Returns how many records were dropped; a torn last line (a crash mid-write) is dropped too."""
    path = Path(path)
    if not path.exists():
        return 0
    keep, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1
            continue
        if isinstance(rec, dict) and rec.get("step", 0) > step:
            dropped += 1
        else:
            keep.append(line)
    if dropped:
        from store.chunk_store import atomic_write_bytes

        atomic_write_bytes(path, "".join(l + "\n" for l in keep).encode())
    return dropped


class Batches:
    """Batch of step s for rank r: slice r of the global batch of (seed, s). Pure function of s."""

    def __init__(self, cfg: TrainConfig, world: int, rank: int, tokenizer=None):
        from .data import WindowSampler

        self.cfg, self.world, self.rank = cfg, world, rank
        d = Path(cfg.data)
        self.train = WindowSampler(self._mix(d, "train"), cfg.seq_len - 1, cfg.seed)
        self.val = WindowSampler(self._mix(d, "val"), cfg.seq_len - 1, cfg.seed + 1)
        self.tokenizer = tokenizer

    def _mix(self, d: Path, split: str):
        parts = []
        for name, wt in (("books", self.cfg.book_weight), ("stacks", 1.0 - self.cfg.book_weight)):
            p = d / name / f"{split}.bin"
            if wt > 0 and p.exists():
                parts.append((str(p), wt))
        if not parts:
            raise FileNotFoundError(f"no token files under {d}/{{books,stacks}}/{split}.bin; run `drt-reader data`")
        return parts

    def get(self, step: int):
        cfg = self.cfg
        G = cfg.batch_size * self.world
        sl = slice(self.rank * cfg.batch_size, (self.rank + 1) * cfg.batch_size)
        if cfg.task:
            ids, labels, weights, forced, targets = self._task_batch(step, G)
            return ids[sl], labels[sl], weights[sl], forced[sl], targets[sl]
        ids = self.train.batch(step, G)[sl]
        return ids, ids, None, None, None

    def row_tasks(self, step: int) -> list[str]:
        """The task of each of this rank's rows at `step` ("lm" for plain text rows), as _task_batch
        draws them: the log names them, so per-task losses can be read back from log.jsonl."""
        cfg = self.cfg
        G = cfg.batch_size * self.world
        return [self._task_of_row(step, i, G) for i in range(self.rank * cfg.batch_size, (self.rank + 1) * cfg.batch_size)]

    def _task_of_row(self, step: int, i: int, G: int) -> str:
        """Row i of the global batch of G rows: the first round(G * task_frac) rows cycle through
        --task, the rest are plain text ("lm")."""
        cfg = self.cfg
        if not cfg.task or i >= round(G * cfg.task_frac):
            return "lm"
        names = cfg.task.split(",")
        return names[(step + i) % len(names)]

    def stacks_window(self, step: int, i: int):
        """Row i of step `step` from the Stacks training chapters only (the "cite" task)."""
        from .data import WindowSampler

        if not hasattr(self, "_stacks"):
            self._stacks = WindowSampler([(str(Path(self.cfg.data) / "stacks" / "train.bin"), 1.0)],
                                         self.cfg.seq_len - 1, self.cfg.seed + 7)
        return self._stacks.batch(step, i + 1)[i]

    def task_length(self, step: int) -> int:
        cfg = self.cfg
        frac = min(1.0, step / max(1, cfg.task_len_ramp))
        return int(cfg.task_len_min + frac * (cfg.seq_len - cfg.task_len_min))

    def force_prob(self, step: int) -> float:
        cfg = self.cfg
        if cfg.force_retrieval <= 0:
            return 0.0
        if cfg.force_steps <= 0:
            return cfg.force_retrieval
        return cfg.force_retrieval * max(0.0, 1.0 - step / cfg.force_steps)

    def label_words(self) -> list[str]:
        """The words of every statement label name in the Stacks training chapters (--cite-rename's
        vocabulary), read once."""
        if getattr(self, "_label_words", None) is None:
            import numpy as np

            from .tasks.cite import statement_label_words
            from .tasks.common import tokenizer_path_of
            from ..tokenizer import decode

            hay = np.memmap(Path(self.cfg.data) / "stacks" / "train.bin", dtype=np.uint16, mode="r")
            words = set()
            for a in range(0, len(hay), 1 << 20):  # label names cut at a boundary add a few partial words
                words.update(statement_label_words(decode(hay[a:a + (1 << 20)].astype(np.int64).tolist(),
                                                          tokenizer_path_of(self.tokenizer))))
            self._label_words = sorted(words)
        return self._label_words

    def hard_negatives(self):
        """The mined hub passages of --hard-negatives, [H, P] int64 (loaded once)."""
        if getattr(self, "_hubs", None) is None:
            import numpy as np

            from ..prompts import CHUNK_TOKENS

            hubs = np.load(self.cfg.hard_negatives)
            if hubs.ndim != 2 or hubs.shape[1] < CHUNK_TOKENS or not len(hubs):
                raise SystemExit(f"--hard-negatives {self.cfg.hard_negatives}: expected [passages, tokens] with "
                                 f"at least {CHUNK_TOKENS} tokens each, got shape {hubs.shape}")
            self._hubs = hubs.astype(np.int64)
        return self._hubs

    def qa_row(self, length: int, rng) -> dict:
        """A "qa" row (tasks.questions.build_qa_example) from the mined training questions, with
        --qa-boilerplate passages written over chunks of its window that hold neither the passage
        nor the question, so that licence pages and contents lists compete with the gold passage."""
        import numpy as np

        from ..prompts import CHUNK_TOKENS
        from .tasks.common import TooShort, encoder, tokenizer_path_of
        from .tasks.questions import QAItems, build_qa_example

        if getattr(self, "_qa", None) is None:
            self._qa = QAItems(self.cfg.qa_data or Path(self.cfg.data) / "qa", "train")
            self._qa_enc = encoder(tokenizer_path_of(self.tokenizer))
        for _ in range(16):
            item, doc = self._qa.draw(rng)
            try:
                ex = build_qa_example(doc, item, length, rng, encode=self._qa_enc, answer_weight=self.cfg.answer_weight,
                                      margin=self.cfg.task_margin)
                break
            except TooShort:
                continue
        else:
            raise RuntimeError("no mined question fits a row of this length")
        if self.cfg.qa_boilerplate:
            if getattr(self, "_boiler", None) is None:
                self._boiler = np.load(self.cfg.qa_boilerplate).astype(np.int64)
            S1 = CHUNK_TOKENS
            keep = set(ex["targets"]) | {ex["targets"][0] - 1, ex["targets"][-1] + 1}
            n_ctx_chunks = ex["row"]  # chunks before the question's
            free = [c for c in range(n_ctx_chunks) if c not in keep]
            rng.shuffle(free)
            for c in free[: self.cfg.qa_boilerplate_per_row]:
                row = self._boiler[rng.randrange(len(self._boiler))][:S1]
                ex["ids"][c * S1:(c + 1) * S1] = row
                ex["labels"][c * S1:(c + 1) * S1] = row
        return ex

    def _task_batch(self, step: int, G: int):
        """G rows of `task_length(step)` tokens: task examples (several needle/question pairs each,
        needles at least `task_margin` tokens before the questions), then plain LM rows. forced
        [G, C, 2] holds the chunks forced into the selection (-1 = none; modeling.force_selection),
        targets [G, C, 2] the chunks each row should retrieve (for the retrieval loss)."""
        import random

        from ..prompts import CHUNK_TOKENS
        from .tasks.cite import citation_targets, rename_labels
        from .tasks.common import tokenizer_path_of
        from .tasks.needles import build_training_example, retrieval_targets, splice_passages
        from .tasks.repeat import build_repeat
        from ..tokenizer import PAD_ID

        cfg = self.cfg
        length = self.task_length(step)
        C = -(-length // CHUNK_TOKENS)
        tok_dir = tokenizer_path_of(self.tokenizer)
        hay = self.train.batch(step, G)
        p_force = self.force_prob(step)
        ids = torch.zeros(G, length, dtype=torch.long)
        labels = torch.full((G, length), -100, dtype=torch.long)
        weights = torch.zeros(G, length)
        forced = torch.full((G, C, 2), -1, dtype=torch.long)
        targets = torch.full((G, C, 2), -1, dtype=torch.long)
        for i in range(G):
            rng = random.Random(cfg.seed * 1_000_003 + step * 1009 + i)
            name = self._task_of_row(step, i, G)
            if name == "lm":
                ids[i] = labels[i] = hay[i][:length]
                weights[i] = 1.0
            elif name == "cite":  # Stacks text: citing chunks should retrieve the cited statement
                ids[i] = labels[i] = self.stacks_window(step, i)[:length]
                weights[i] = 1.0
                if cfg.cite_rename and rng.random() < cfg.cite_rename:
                    ids[i] = torch.from_numpy(rename_labels(ids[i].numpy(), rng, self.label_words(), tok_dir))
                    labels[i] = ids[i].masked_fill(ids[i] == PAD_ID, -100)
                for row, chunks in citation_targets(ids[i].tolist(), tok_dir):
                    if row < C:
                        targets[i, row, : len(chunks)] = torch.tensor(chunks)
            elif name == "repeat":
                ex = build_repeat(hay[i].numpy(), length, rng, copy_weight=cfg.answer_weight)
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                targets[i] = torch.from_numpy(ex["forced"])
                if p_force > 0:
                    forced[i] = targets[i]
            elif name == "qa":  # a window of a real document, a mined question about it, its answer
                ex = self.qa_row(length, rng)
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                if ex["row"] < C:
                    t = torch.tensor(ex["targets"][:2])
                    targets[i, ex["row"], : len(t)] = t
                    if p_force > 0 and rng.random() < p_force:
                        forced[i, ex["row"]] = targets[i, ex["row"]]
            else:
                ex = build_training_example(
                    name, hay[i].tolist(), self.tokenizer, rng,
                    pairs=cfg.task_pairs, answer_weight=cfg.answer_weight, length=length,
                    needle_margin=cfg.task_margin, split_frac=cfg.task_split,
                )
                ids[i], labels[i] = torch.from_numpy(ex["ids"]), torch.from_numpy(ex["labels"])
                weights[i] = torch.from_numpy(ex["weights"])
                for row, chunks in retrieval_targets(ex["example"], tok_dir, needle_start=cfg.target_needle_start):
                    targets[i, row, : len(chunks[:2])] = torch.tensor(chunks[:2])
                    if p_force > 0 and rng.random() < p_force:
                        forced[i, row] = targets[i, row]
                if cfg.hard_negatives:  # mined hubs into the haystack (after the targets: needles untouched)
                    row_ids = ids[i].numpy()
                    splice_passages(ex["example"], row_ids, self.hard_negatives(), cfg.hard_negatives_per_row,
                                    random.Random(f"hubs:{cfg.seed}:{step}:{i}"), CHUNK_TOKENS)
                    labels[i] = torch.where(labels[i] == -100, labels[i], ids[i])
        return ids, labels, weights, forced, targets


def _copy_tokenizer(dst: Path, src: Path | None = None) -> None:
    """A checkpoint directory is complete: weights, config and the tokenizer it was trained with
    (the tokenizer files of `src`, a checkpoint directory; default the shipped tokenizer)."""
    import shutil

    from ..tokenizer import _resolve

    src = _resolve(None) if src is None else Path(src)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists() and not (dst / name).exists():
            shutil.copy2(src / name, dst / name)


def build_model(cfg: TrainConfig):
    from ..config import DRTConfig
    from ..modeling import DRTForCausalLM

    if cfg.init:
        # overrides go into the config before the model is built, so structural ones (copy_head,
        # query_encoder) add their modules, initialised by _init_weights; loaded weights are kept
        model, info = DRTForCausalLM.from_pretrained(cfg.init, output_loading_info=True, **cfg.model_overrides)
        # a query / key encoder added now starts as a copy of the chunk encoder (one the checkpoint
        # has keeps its weights when only a part is new, such as key_context's attention)
        init_retrieval_encoders(model, [n for n in ("query_enc", "key_enc")
                                       if any(k.startswith(n + ".prenorm.") for k in info["missing_keys"])])
        init_added_encoder_layers(model, info["missing_keys"])
        if cfg.gca_out_scale != 1.0 and model.config.uses_chunks:
            # a pretrained DRT whose GCA stayed small next to the residual stream (we measured 4%
            # of its norm in the upper layers) cannot pass retrieved content on;
            # see docs/history/2026-11-29-to-12-01-model-rounds.md
            with torch.no_grad():
                for group in model.groups:
                    for blk in group:
                        blk.gca.o.weight.mul_(cfg.gca_out_scale)
        return model
    mc = DRTConfig.from_preset(cfg.preset, arch=cfg.arch, **cfg.model_overrides)
    return DRTForCausalLM(mc)


def chunk_idf(data: Path, vocab_size: int, chunk_tokens: int = 63) -> tuple[np.ndarray, int]:
    """Document frequency over the training split's 63-token chunks: (df [V] in chunks, chunks)."""
    df, n = np.zeros(vocab_size, np.int64), 0
    for name in ("books", "stacks"):
        p = data / name / "train.bin"
        if not p.exists():
            continue
        ids = np.memmap(p, dtype=np.uint16, mode="r")
        C = len(ids) // chunk_tokens
        for a in range(0, C, 1 << 16):  # blocks of chunks: (chunk, token) pairs, each counted once
            b = min(C, a + (1 << 16))
            blk = np.asarray(ids[a * chunk_tokens: b * chunk_tokens], dtype=np.int64).reshape(b - a, chunk_tokens)
            pairs = np.unique(blk + np.arange(b - a)[:, None] * vocab_size)
            df += np.bincount(pairs % vocab_size, minlength=vocab_size)
        n += C
    if not n:
        raise FileNotFoundError(f"no token files under {data}/{{books,stacks}}/train.bin; run `drt-reader data`")
    return df, n


def init_lexical(model, data: Path, max_df: float) -> None:
    """`train --init-lexical DF`: the lexical scorer's token weights (config lexical) start at
    idf_t - log(1 / DF) = log(DF * chunks / df_t), clipped at 0: a token in more than a share DF
    of the training chunks (function words, common word pieces) starts at 0, where relu keeps it;
    a token in one chunk of a million weighs about 10 (DF = 0.02)."""
    if getattr(model, "lexical", None) is None:
        raise SystemExit("--init-lexical needs a lexical model: --set lexical=true")
    df, n = chunk_idf(data, model.config.vocab_size, model.config.chunk_tokens)
    w = np.log(max_df * n / np.maximum(df, 1)).clip(min=0.0)
    with torch.no_grad():
        model.lexical.weight.copy_(torch.from_numpy(w.astype(np.float32)))
    logger.info("lexical weights from idf over %d chunks: %d of %d tokens > 0", n, int((w > 0).sum()), len(w))


RETRIEVAL_PATH = ("gca.", "encoder.", "lmk_norms.")
# the copy head's scalar biases per exact-feature value (suffix-match and recall lengths, ages): at
# the matrices' rate they move 0.1 a step at most (x MATCH_SCALE), while the pointer's learned
# scores span tens (docs/history/2026-11-29-to-12-01-model-rounds.md)
COPY_BIASES = ("match_bias", "match_gate", "recall_bias", "recall_gate", "recall_age_bias")


def init_retrieval_encoders(model, names=("query_enc", "key_enc")) -> None:
    """Start the query / key encoders named as copies of the chunk encoder's layers (their
    landmark states are then the chunk's landmark key, so scores start as before): `train
    --init M --set query_encoder=n` (or key_encoder=n) calls this for the ones M lacks."""
    src = getattr(model, "encoder", None)  # baselines have none (and no encoders to start)
    for name in names:
        enc = getattr(model, name, None)
        if enc is None:
            continue
        with torch.no_grad():
            enc.prenorm.load_state_dict(src.prenorm.state_dict())
            enc.norm.load_state_dict(src.norm.state_dict())
            for i in range(min(len(enc.layers), len(src.layers))):
                enc.layers[i].load_state_dict(src.layers[i].state_dict())

def init_added_encoder_layers(model, missing_keys) -> list[str]:
    """Layers that `train --init M --set key_encoder=n` (or query_encoder=n) adds to an encoder M
    already has start as the identity (their attention output and MLP down projections zero),
    so the encoder's landmark states, and every score, are unchanged until they train. An
    encoder M lacks altogether is init_retrieval_encoders' case. Returns the layers zeroed."""
    missing, done = set(missing_keys), []
    for name in ("query_enc", "key_enc"):
        enc = getattr(model, name, None)
        if enc is None or f"{name}.prenorm.weight" in missing:
            continue
        for i, layer in enumerate(enc.layers):
            if f"{name}.layers.{i}.o.weight" in missing:
                with torch.no_grad():
                    layer.o.weight.zero_()
                    layer.mlp.down.weight.zero_()
                done.append(f"{name}.layers.{i}")
    return done


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """AdamW groups: weight decay on matrices only; the retrieval path (GCA projections, chunk
    encoder, landmark query norms) at `gca_lr_mult` times the learning rate, the copy head at
    `copy_lr_mult` times (its feature biases, COPY_BIASES, `copy_bias_lr_mult` times more), the
    lexical weights at `lexical_lr_mult` times."""
    groups = {}
    only = [f for f in cfg.train_only.split(",") if f]
    for n, p in model.named_parameters():
        if only and not any(f in n for f in only):
            p.requires_grad_(False)
            continue
        decay = p.dim() >= 2
        mult = cfg.gca_lr_mult if any(s in n for s in RETRIEVAL_PATH) else 1.0
        if n.startswith("copy_head."):
            mult = cfg.copy_lr_mult * (cfg.copy_bias_lr_mult if n.split(".")[-1] in COPY_BIASES else 1.0)
        if n.startswith("lexical."):
            mult = cfg.lexical_lr_mult
        g = groups.setdefault((decay, mult), {"params": [], "weight_decay": cfg.weight_decay if decay else 0.0,
                                              "lr_mult": mult})
        g["params"].append(p)
    return list(groups.values())


# ----------------------------------------------------------------------------------------------
# FSDP2 and sharded checkpoints


def fsdp_units(model) -> list:
    """The modules sharded on their own (each all-gathered just before it runs and freed after):
    the lower blocks and every upper block. The rest (embeddings and head, tied; the chunk encoder;
    norms; the copy head) is the root unit. Baselines: their blocks."""
    blocks = list(getattr(model, "lower", None) or []) + [b for g in (getattr(model, "groups", None) or []) for b in g]
    return blocks + list(getattr(model, "layers", None) or [])


def shard_model(model, bf16: bool):
    """FSDP2 `fully_shard` on each of fsdp_units(model), then on the model. bf16: parameters are
    all-gathered and computed in bf16, gradients reduced in fp32, the sharded master weights and
    AdamW states stay fp32 (MixedPrecisionPolicy)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16
          else MixedPrecisionPolicy())
    for blk in fsdp_units(model):
        fully_shard(blk, mp_policy=mp)
    return fully_shard(model, mp_policy=mp)


SHARDED = "state.dcp"  # the sharded checkpoint directory (torch.distributed.checkpoint)


def find_sharded_checkpoint(out: Path) -> Path | None:
    """OUT/state.dcp, or OUT/state.dcp.old when a crash fell between save_sharded's two renames."""
    for name in (SHARDED, SHARDED + ".old"):
        d = Path(out) / name
        if (d / "trainer.pt").exists() and (d / ".metadata").exists():
            return d
    return None


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


def save_sharded(model, opt, out: Path, trainer: dict, rank: int, world: int) -> Path:
    """Write the model and optimizer state as a torch.distributed.checkpoint directory, each rank
    its own shards, atomically: everything goes to OUT/state.dcp.tmp (DCP fsyncs its files), rank 0
    adds trainer.pt (step, history, RNG, config) last, then renames state.dcp to state.dcp.old,
    state.dcp.tmp to state.dcp, and deletes the old one. A crash at any point leaves a complete
    checkpoint (state.dcp, or state.dcp.old between the renames: find_sharded_checkpoint). The keys
    are parameter names (get_model_state_dict / get_optimizer_state_dict), so the checkpoint loads
    onto any number of processes. On several nodes OUT must be one shared directory."""
    import shutil

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    out = Path(out)
    final, tmp, old = out / SHARDED, out / (SHARDED + ".tmp"), out / (SHARDED + ".old")
    if rank == 0 and tmp.exists():  # a save that crashed
        shutil.rmtree(tmp)
    _barrier(world)
    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.save(state, checkpoint_id=tmp)
    if rank == 0:
        atomic_save(trainer, tmp / "trainer.pt")
        _fsync_dir(tmp)
        if final.exists():
            if old.exists():
                shutil.rmtree(old)
            final.rename(old)
        tmp.rename(final)
        _fsync_dir(out)
        if old.exists():
            shutil.rmtree(old)
    _barrier(world)
    return final


def load_sharded(model, opt, d: Path) -> dict:
    """Load a save_sharded directory into `model` and `opt` (sharded or not, any number of
    processes: DCP reshards by parameter name); returns its trainer state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                         set_model_state_dict, set_optimizer_state_dict)

    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.load(state, checkpoint_id=d)
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, opt, state["optim"])
    return torch.load(Path(d) / "trainer.pt", weights_only=False)


def remove_sharded(out: Path) -> None:
    """After a state.pt save: drop a sharded checkpoint of an earlier (--fsdp) run of OUT, so that a
    resume never picks the older of two checkpoints."""
    import shutil

    for name in (SHARDED, SHARDED + ".old", SHARDED + ".tmp"):
        if (Path(out) / name).exists():
            shutil.rmtree(Path(out) / name)


def full_state_dict(model) -> dict:
    """The full (unsharded) weights of an FSDP model on rank 0, in CPU memory (every rank calls it:
    it all-gathers; the other ranks get {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_pretrained(model, dst: Path, state_dict: dict | None = None) -> None:
    """model.save_pretrained (with `state_dict`, the gathered weights of a sharded model), the
    config naming the model's own class (fully_shard swaps in a subclass, FSDPDRTForCausalLM) and
    the tokenizer."""
    from ..modeling import DRTForCausalLM

    model.save_pretrained(dst, state_dict=state_dict)
    if type(model) is not DRTForCausalLM and isinstance(model, DRTForCausalLM):
        model.config.architectures = [DRTForCausalLM.__name__]
        model.config.save_pretrained(dst)
    _copy_tokenizer(dst)


# ----------------------------------------------------------------------------------------------
# the plan printed before the first step: parameters, tokens, memory per device


def count_parameters(mc) -> int:
    """Parameters of the model a DRTConfig builds (the tied embedding and head counted once),
    built on the meta device: nothing is allocated."""
    return sum(p.numel() for p in _meta_model(mc).parameters())


def _meta_model(mc):
    from ..modeling import DRTForCausalLM

    with torch.device("meta"):
        return DRTForCausalLM(mc)


def activation_bytes(mc, batch_size: int, seq_len: int, bf16: bool = False) -> int | None:
    """Bytes the autograd graph saves for backward in one training forward (with labels) of
    batch_size x seq_len tokens: the forward runs on the meta device (shapes only, nothing
    computed or allocated, well under a second for the paper preset) with saved_tensors_hooks
    counting each distinct storage once. bf16: the parameters in bf16, as FSDP2's mixed precision
    gathers them. On this CPU the fp32 count matches a real forward's (paper preset, 504 tokens:
    1.725 against 1.728 GiB). The lexical term counts tokens with torch.unique, which has no meta
    kernel: it is left out of the count (its tensors are chunks x chunks, a few KiB a sample). None
    where the forward cannot run on meta otherwise (fixed_retriever's MiniLM)."""
    from ..config import PAPER_FLAVOUR, DRTConfig
    from ..modeling import DRTForCausalLM

    if mc.lexical:  # the lexical fields at their "off" values
        mc = DRTConfig(**{**mc.to_dict(), **{k: v for k, v in PAPER_FLAVOUR.items() if k.startswith("lexical")}})
    try:
        with torch.device("meta"):
            m = DRTForCausalLM(mc)
        m = m.to(torch.bfloat16) if bf16 else m
        m.train()
        seen: dict[int, int] = {}

        def pack(t):
            st = t.untyped_storage()
            seen[st._cdata] = max(seen.get(st._cdata, 0), st.nbytes())
            return t

        ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta")
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            m(ids, labels=ids)
    except Exception as e:  # noqa: BLE001 -- an estimate only; the plan says it is missing
        logger.info("activation estimate unavailable: %s", e)
        return None
    return sum(seen.values())


def estimate_memory(mc, batch_size: int, seq_len: int, world: int = 1, fsdp: bool = False,
                    bf16: bool = False) -> dict:
    """Memory per device (GiB) of a training step, batch_size samples of seq_len tokens per process:

        weights 4P, gradients 4P, AdamW 8P bytes (fp32), divided by the world size under FSDP;
        FSDP adds the gathered units: (root + 2 x largest unit) parameters, x 2 (their gradients),
        at 2 bytes in bf16 else 4; DDP adds its gradient buckets, 4P; bf16 autocast without FSDP
        caches a bf16 copy of the weights, 2P;
        activations: the bytes saved for backward, counted on a meta-device forward of the same
        batch_size x seq_len (activation_bytes; bf16: parameters and activations in bf16).

    Not counted: the CUDA context and allocator slack, communication buffers, the data loader."""
    P = count_parameters(mc)
    world = max(1, int(world))
    shard = world if fsdp and world > 1 else 1
    gib = 1024 ** 3
    est = {"params": P, "weights": 4 * P / shard / gib, "grads": 4 * P / shard / gib, "adamw": 8 * P / shard / gib}
    pbytes = 2 if bf16 else 4
    if shard > 1:
        m = _meta_model(mc)
        units = fsdp_units(m)
        unit = max((sum(p.numel() for p in u.parameters()) for u in units), default=0)
        root = P - sum(sum(p.numel() for p in u.parameters()) for u in units)
        est["gathered"] = 2 * (root + 2 * unit) * pbytes / gib
    else:
        est["gathered"] = (4 * P if world > 1 else 0) / gib + (2 * P if bf16 else 0) / gib
    act = activation_bytes(mc, batch_size, seq_len, bf16)
    est["activations"] = float("nan") if act is None else act / gib
    est["total"] = sum(v for k, v in est.items() if k != "params" and not math.isnan(v))  # nan: not estimated
    return est


def fit_batch_size(mc, seq_len: int, memory_bytes: int, world: int = 1, fsdp: bool = False, bf16: bool = False,
                   max_batch: int | None = None, fraction: float = 0.8) -> int:
    """The largest per-device batch of seq_len tokens whose estimate_memory total fits in `fraction`
    of memory_bytes (a device's total memory: torch.cuda.get_device_properties(0).total_memory).
    The rest is for what the estimate leaves out: the CUDA context, the allocator's slack, the
    backward's transient tensors (the logits' gradient alone is 4-8 bytes x vocabulary a token).
    At least 1 (a batch that cannot fit still runs, and fails, where it is asked for), at most
    max_batch. The estimate is linear in the batch but for what every sample shares (the attention
    bias, per-sample padding of the meta count): the batch solved from batches 1 and 2 is checked
    against the estimate itself and moved to the largest that fits."""
    gib = 1024 ** 3
    budget = fraction * memory_bytes / gib
    hi = max_batch if max_batch is not None else 1 << 16

    def total(b: int) -> float:
        return estimate_memory(mc, b, seq_len, world, fsdp, bf16)["total"]

    t1, t2 = total(1), total(2)
    if math.isnan(t1) or t2 <= t1:
        raise ValueError("fit_batch_size: no activation estimate for this model")
    b = max(1, min(hi, int((budget - t1) // (t2 - t1)) + 1))
    while b > 1 and total(b) > budget:
        b -= 1
    while b < hi and total(b + 1) <= budget:
        b += 1
    return b


def model_config(cfg: TrainConfig):
    """The DRTConfig that build_model(cfg) will build (without building it)."""
    from ..config import DRTConfig

    if cfg.init:
        return DRTConfig.from_pretrained(cfg.init, **cfg.model_overrides)
    return DRTConfig.from_preset(cfg.preset, arch=cfg.arch, **cfg.model_overrides)


def plan_text(cfg: TrainConfig) -> str:
    """The paragraph `drt-reader train` prints before it starts (rank 0 under torchrun): the
    model, the tokens per step, the device, dtype and parallelism, and the memory estimate per
    device (estimate_memory)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    bf16 = use_bf16(cfg, device)
    mc = model_config(cfg)
    P = count_parameters(mc)
    sharded = cfg.fsdp and world > 1
    est = estimate_memory(mc, cfg.batch_size, cfg.seq_len, world, sharded, bf16)
    par = (f"FSDP2 over {world} processes (fully_shard per block{', bf16 parameters, fp32 gradient reduction' if bf16 else ''})"
           if sharded else f"DDP over {world} processes" if world > 1 else "one process")
    if cfg.fsdp and world == 1:
        par += " (--fsdp without torchrun: nothing to shard; sharded checkpoints all the same)"
    tok = cfg.batch_size * world * cfg.seq_len
    arch = (f"{mc.lower_layers} lower + {mc.encoder_layers} encoder + {list(mc.upper_groups)} upper layers"
            if mc.uses_chunks else f"{mc.arch}")
    return (f"plan: preset {cfg.preset} ({mc.arch}; {arch}; D {mc.hidden_size}, {mc.num_heads} heads, window "
            f"{mc.window}, top-{mc.chunk_topk} chunks), {P / 1e6:.1f}M parameters; {cfg.batch_size} x {cfg.seq_len} "
            f"tokens per process x {world} = {tok:,} tokens per step, {cfg.steps} steps ({tok * cfg.steps:,} tokens); "
            f"device {device.type}, {'bf16 autocast' if bf16 else 'fp32'}, {par}; estimated memory per device "
            f"{est['total']:.2f} GiB (weights {est['weights']:.2f}, gradients {est['grads']:.2f}, AdamW "
            f"{est['adamw']:.2f}, gathered / buffers {est['gathered']:.2f}, "
            + ("activations not estimated: the total leaves them out" if math.isnan(est["activations"])
               else f"activations {est['activations']:.2f}") + "; docs/training.md)")


def train(cfg: TrainConfig) -> dict:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":  # each process its own GPU (NCCL and FSDP2's device mesh use the current one)
        torch.cuda.set_device(device)
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(device)
    if cfg.init_lexical > 0:
        init_lexical(model, Path(cfg.data), cfg.init_lexical)
    tokenizer = None
    if cfg.task:
        from ..tokenizer import load_tokenizer

        tokenizer = load_tokenizer()
    batches = Batches(cfg, world, rank, tokenizer)
    bf16 = use_bf16(cfg, device)
    sharded = cfg.fsdp and world > 1
    if sharded:  # FSDP2: shard before the optimizer is built, so that it holds the sharded parameters
        shard_model(model, bf16)
    opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr, betas=tuple(cfg.betas))
    start, history = 0, []
    ck = out / "state.pt"
    dcp_dir = find_sharded_checkpoint(out)
    if dcp_dir is not None:  # a sharded checkpoint loads onto any number of processes, FSDP or not
        st = load_sharded(model, opt, dcp_dir)
    elif ck.exists():
        if sharded:
            raise SystemExit(f"{ck} is a single-process / DDP checkpoint: resume it without --fsdp (or with one "
                             "process), which then writes a sharded checkpoint")
        st = torch.load(ck, map_location=device, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
    if dcp_dir is not None or ck.exists():
        start, history = st["step"], st["history"]
        torch.set_rng_state(st["rng"])
        if rank == 0:
            logger.info("resumed from %s at step %d", dcp_dir or ck, start)
            if cfg.log_file and (n := trim_log(Path(cfg.log_file), start)):
                logger.info("dropped %d log records after step %d (they are replayed)", n, start)
    dmodel = model
    if world > 1 and not sharded:
        from torch.nn.parallel import DistributedDataParallel as DDP

        # fixed_retriever never uses the landmark query norms (its scores come from MiniLM)
        dmodel = DDP(model, find_unused_parameters=model.config.arch == "fixed_retriever")
    log = open(cfg.log_file, "a") if (cfg.log_file and rank == 0) else None

    def emit(rec: dict):
        if rank != 0:
            return
        line = " | ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rec.items())
        print(line, flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()

    def save(step: int):
        trainer = {"step": step, "history": history, "rng": torch.get_rng_state(), "config": asdict(cfg)}
        if cfg.fsdp:  # every rank writes its shards (collective), then the full weights go to model/
            save_sharded(model, opt, out, trainer, rank, world)
            full = full_state_dict(model) if sharded else None
            if rank == 0:
                save_pretrained(model, out / "model", full)
                ck.unlink(missing_ok=True)  # one checkpoint per run directory: this one
            return
        if rank != 0:
            return
        atomic_save({"model": model.state_dict(), "opt": opt.state_dict(), **trainer}, ck)
        remove_sharded(out)
        model.save_pretrained(out / "model")
        _copy_tokenizer(out / "model")

    if cfg.steps == 0 and start == 0:  # --steps 0: the initialised model itself (e.g. --init-lexical at step 0)
        save(0)
    model.train()
    # --lm-loss 0 on one group: only the retrieval loss trains, and it does not depend on the upper
    # layers, so they are skipped (objective.scorer_loss; the LM loss is then not logged)
    scorer_only = cfg.lm_loss == 0 and cfg.retrieval_loss > 0 and model.config.uses_chunks
    scorer_alone = scorer_only and world == 1 and model.config.arch == "drt" and model.config.num_groups == 1
    t_last = t_begin = time.time()
    for step in range(start, cfg.steps):
        lr = lr_at(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_mult", 1.0)
        ids, labels, weights, forced, targets = batches.get(step)
        ids, labels = ids.to(device), labels.to(device)
        weights = weights.to(device) if weights is not None else None
        kw = {}
        if forced is not None and bool((forced >= 0).any()):
            kw = {"forced_chunks": forced.to(device), "forced_oracle": step < cfg.oracle_steps}
        if targets is not None and cfg.retrieval_loss > 0:
            kw["retrieval_targets"] = targets.to(device)
            kw["retrieval_distractors"] = cfg.retrieval_distractors
        if cfg.group_targets and kw:
            kw["group_targets"] = True
        if scorer_only:
            kw["scorer_only"] = True  # no graph through the upper layers: only the scorer learns
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if scorer_alone and "retrieval_targets" in kw:  # the upper layers cannot change this loss
                res = SimpleNamespace(loss=None, logits=None,
                                      retrieval_loss=scorer_loss(model, ids, kw["retrieval_targets"],
                                                                 cfg.retrieval_distractors))
            else:
                res = training_forward(dmodel, ids, labels, weights, **kw)
        # lm_loss 0: the LM loss is logged but not back-propagated
        loss = res.loss * cfg.lm_loss if cfg.lm_loss > 0 else None
        extra = answer_metrics(res.logits, labels, weights) if weights is not None and res.logits is not None else {}
        if cfg.lm_loss != 1.0 and res.loss is not None:
            extra["lm_loss"] = float(res.loss.detach())
        if res.retrieval_loss is not None:
            extra["ret_loss"] = float(res.retrieval_loss.detach())
            if cfg.retrieval_loss > 0:
                rl = cfg.retrieval_loss * res.retrieval_loss
                loss = rl if loss is None else loss + rl
        if loss is None or not loss.requires_grad:  # nothing to learn from in this batch
            loss = sum(p.sum() * 0.0 for p in model.parameters() if p.requires_grad)
        if not torch.isfinite(loss):
            emit({"step": step, "error": f"non-finite loss {loss.item()}; stopped (last checkpoint kept)"})
            raise FloatingPointError(f"non-finite loss at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        if hasattr(gnorm, "full_tensor"):  # FSDP2: a DTensor (the norm over every rank's shards)
            gnorm = gnorm.full_tensor()
        if not torch.isfinite(gnorm):
            emit({"step": step, "error": "non-finite gradient norm; stopped"})
            raise FloatingPointError(f"non-finite grad norm at step {step}")
        opt.step()
        logged = loss.detach()
        if world > 1:
            import torch.distributed as dist

            # log the loss of the global batch (mean of the ranks' equal-sized slices), not rank 0's
            dist.all_reduce(logged)
            logged = logged / world
        now = time.time()
        ntok = ids.numel() * world
        rec = {"step": step + 1, "loss": float(logged.item()), "lr": lr, "tok/s": ntok / (now - t_last),
               "mem_gb": rss_gb(), "gnorm": float(gnorm), **extra}
        if cfg.task:  # this rank's rows, as ret_loss beside it is this rank's
            rec["task"] = ",".join(batches.row_tasks(step))
        t_last = now
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0:
            rec["val_loss"] = evaluate(model, batches, cfg, device, bf16)
            t_last = time.time()
        history.append({k: rec[k] for k in ("step", "loss", "lr") if k in rec} | ({"val_loss": rec["val_loss"]} if "val_loss" in rec else {}))
        emit(rec)
        out_of_time = bool(cfg.max_minutes) and time.time() - t_begin > 60 * cfg.max_minutes
        if world > 1 and cfg.max_minutes:  # every rank stops at the same step
            import torch.distributed as dist

            flag = torch.tensor([float(out_of_time)], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            out_of_time = bool(flag.item() > 0)
        if (step + 1) % cfg.ckpt_every == 0 or step + 1 == cfg.steps or out_of_time:
            save(step + 1)
        if out_of_time:
            if rank == 0:
                logger.info("--max-minutes %g reached: stopped and saved at step %d of %d",
                            cfg.max_minutes, step + 1, cfg.steps)
            break
    if world > 1:
        import torch.distributed as dist

        # wait for rank 0's final save, and free DDP's reducer while its process group exists:
        # destroying the group first left ranks hanging at exit (intermittently, gloo on CPU)
        dist.barrier()
        del dmodel
        dist.destroy_process_group()
    return {"steps": cfg.steps, "history": history, "out": str(out)}


@torch.no_grad()
def answer_metrics(logits, labels, weights) -> dict:
    """Teacher-forced accuracy and loss on the up-weighted (answer) targets of a task batch."""
    m = weights[:, 1:] > 1
    if not bool(m.any()):
        return {}
    tgt = labels[:, 1:][m]
    lg = logits[:, :-1][m].float()
    return {"ans_acc": float((lg.argmax(-1) == tgt).float().mean()),
            "ans_loss": float(torch.nn.functional.cross_entropy(lg, tgt))}


@torch.no_grad()
def evaluate(model, batches: Batches, cfg: TrainConfig, device, bf16: bool) -> float:
    model.eval()
    tot = 0.0
    for i in range(cfg.eval_batches):
        ids = batches.val.batch(i, cfg.batch_size).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            tot += float(model(ids, labels=ids).loss)
    model.train()
    return tot / cfg.eval_batches


# ----------------------------------------------------------------------------------------------
# command line


def check_config_keys(keys) -> None:
    """SystemExit naming each key that DRTConfig does not take (`--set copy_heads=true` would
    otherwise train without a copy head and say nothing), with the nearest keys it does take."""
    import difflib

    from ..config import VALID_KEYS

    known = sorted(VALID_KEYS)
    bad = [k for k in keys if k not in known]
    if bad:
        hints = "; ".join(f"{k!r}: did you mean {', '.join(difflib.get_close_matches(k, known, 3)) or 'none close'}?"
                          for k in bad)
        raise SystemExit(f"--set: unknown config key(s) {', '.join(map(repr, bad))} ({hints})")


def config_from_args(args) -> TrainConfig:
    cfg = TrainConfig()
    for k in asdict(cfg):
        if hasattr(args, k) and getattr(args, k) is not None:
            setattr(cfg, k, getattr(args, k))
    check_config_keys([kv.partition("=")[0] for kv in args.set])
    for kv in args.set:
        k, _, v = kv.partition("=")
        try:
            cfg.model_overrides[k] = json.loads(v)
        except json.JSONDecodeError:
            cfg.model_overrides[k] = v
        if k == "stream_preamble" and v == "default":  # prompts.STREAM_PREAMBLE, what the shipped model reads
            from ..prompts import stream_preamble_ids

            cfg.model_overrides[k] = stream_preamble_ids()
    if cfg.group_targets and (cfg.target_needle_start or "cite" in (cfg.task or "").split(",")):
        raise SystemExit("--group-targets gives target column g to group g: it cannot be combined with "
                         "--target-needle-start or the cite task, whose columns are alternatives")
    cfg.log_file = str(Path(cfg.out) / "log.jsonl")
    return cfg


def run(args) -> int:
    cfg = config_from_args(args)
    if int(os.environ.get("RANK", "0")) == 0:
        print(plan_text(cfg), flush=True)
    res = train(cfg)
    if args.json:
        print(json.dumps({"out": res["out"], "steps": res["steps"], "final": res["history"][-1] if res["history"] else None}))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for torchrun: `torchrun --nproc-per-node 2 -m drt_core.train.loop --preset tiny ...`."""
    p = argparse.ArgumentParser(prog="drt_core.train.loop")
    add_args(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
