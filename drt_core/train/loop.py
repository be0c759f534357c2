"""Training: `drt-reader train --preset tiny --data DIR --out DIR` (DRT and the baselines).

AdamW; linear warm-up then cosine decay to a minimum learning rate that is honoured (unlike the
reference code, spec §5.2); gradient clipping; bf16 autocast where the hardware has it; periodic
validation loss on fixed held-out windows; atomic checkpoints (write, fsync, rename) with exact
resume (the batch of step s is a pure function of (seed, s), so resuming replays the same data);
a stop on a non-finite loss; one log line per step. Data parallel through torchrun: gloo on CPU,
NCCL on GPU, FSDP2 (`--fsdp`) for the large presets. Each rank takes its slice of the same global
batch, so N processes follow the loss curve of one process on the global batch.

Fine-tuning for retrieval (`--task single|multikey|2hop --init CKPT`) mixes synthetic NIAH examples
over real haystacks (drt_core.train.tasks.needles) into the LM stream, answer tokens weighted by
`--answer-weight`.

What the loop runs is in the modules beside it: the batches (`batches`), the model and its
optimiser groups (`model`), the checkpoints (`checkpoint`), the plan and memory estimate (`plan`),
the settings (`options`, `recipes`, `flags`) and what training adds to the forward (`objective`).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import resource
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from .batches import Batches
from .checkpoint import resume, save_checkpoint
from .model import build_model, init_lexical, param_groups, shard_model
from .objective import scorer_loss, training_forward
from .flags import add_args, config_from_args
from .options import TrainConfig
from .plan import plan_text, use_bf16

logger = logging.getLogger(__name__)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr at the last step (min_lr is reached)."""
    o = cfg.optim
    if step < o.warmup:
        return o.lr * (step + 1) / o.warmup
    t = (step - o.warmup) / max(1, o.steps - 1 - o.warmup)
    t = min(max(t, 0.0), 1.0)
    return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + math.cos(math.pi * t))


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _start_process() -> tuple[int, int, torch.device]:
    """(world size, rank, device) under torchrun or alone; the process group joined when world > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if device.type == "cuda":  # each process its own GPU (NCCL and FSDP2's device mesh use the current one)
        torch.cuda.set_device(device)
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return world, rank, device


def _emitter(rank: int, log):
    """The step records' printer: rank 0 prints one line and appends the JSON record to the log."""

    def emit(rec: dict):
        if rank != 0:
            return
        line = " | ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rec.items())
        print(line, flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()

    return emit


def train(cfg: TrainConfig) -> dict:
    world, rank, device = _start_process()
    out = Path(cfg.run.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.run.seed)
    model = build_model(cfg).to(device)
    if cfg.model.init_lexical > 0:
        init_lexical(model, Path(cfg.data.dir), cfg.model.init_lexical)
    tokenizer = None
    if cfg.tasks.task:
        from ..tokenizer import load_tokenizer

        tokenizer = load_tokenizer()
    batches = Batches(cfg, world, rank, tokenizer)
    bf16 = use_bf16(cfg.run.bf16, device)
    sharded = cfg.run.fsdp and world > 1
    if sharded:  # FSDP2: shard before the optimizer is built, so that it holds the sharded parameters
        shard_model(model, bf16)
    opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.optim.lr, betas=tuple(cfg.optim.betas))
    start, history = resume(model, opt, cfg, rank, sharded, device)
    dmodel = model
    if world > 1 and not sharded:
        from torch.nn.parallel import DistributedDataParallel as DDP

        # fixed_retriever never uses the landmark query norms (its scores come from MiniLM)
        dmodel = DDP(model, find_unused_parameters=model.config.arch == "fixed_retriever")
    log = open(cfg.run.log_file, "a") if (cfg.run.log_file and rank == 0) else None
    emit = _emitter(rank, log)

    def save(step: int):
        trainer = {"step": step, "history": history, "rng": torch.get_rng_state(), "config": cfg.to_dict()}
        save_checkpoint(model, opt, out, trainer, cfg.run.fsdp, rank, world)

    if cfg.optim.steps == 0 and start == 0:  # --steps 0: the initialised model itself (e.g. --init-lexical)
        save(0)
    model.train()
    step_fn = _Step(model, dmodel, opt, batches, cfg, device, bf16, world, emit)
    t_last = t_begin = time.time()
    for step in range(start, cfg.optim.steps):
        rec, t_last = step_fn(step, t_last)
        if cfg.run.eval_every and (step + 1) % cfg.run.eval_every == 0:
            rec["val_loss"] = evaluate(model, batches, cfg, device, bf16)
            t_last = time.time()
        history.append({k: rec[k] for k in ("step", "loss", "lr", "val_loss") if k in rec})
        emit(rec)
        out_of_time = _out_of_time(cfg, t_begin, world, device)
        if (step + 1) % cfg.run.ckpt_every == 0 or step + 1 == cfg.optim.steps or out_of_time:
            save(step + 1)
        if out_of_time:
            if rank == 0:
                logger.info("--max-minutes %g reached: stopped and saved at step %d of %d",
                            cfg.run.max_minutes, step + 1, cfg.optim.steps)
            break
    if log:
        log.close()
    if world > 1:
        import torch.distributed as dist

        # wait for rank 0's final save, then free everything that holds the group (DDP's reducer, FSDP's
        # sharded parameters and their device mesh, the optimizer's sharded state) while it still exists:
        # destroying the group first left ranks hanging, or aborting, at exit (intermittently, gloo on CPU)
        dist.barrier()
        del dmodel, step_fn, model, opt
        gc.collect()
        dist.destroy_process_group()
    return {"steps": cfg.optim.steps, "history": history, "out": str(out)}


def _out_of_time(cfg: TrainConfig, t_begin: float, world: int, device) -> bool:
    """--max-minutes spent (every rank stops at the same step: the flag is all-reduced)."""
    out_of_time = bool(cfg.run.max_minutes) and time.time() - t_begin > 60 * cfg.run.max_minutes
    if world > 1 and cfg.run.max_minutes:
        import torch.distributed as dist

        flag = torch.tensor([float(out_of_time)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        out_of_time = bool(flag.item() > 0)
    return out_of_time


class _Step:
    """One optimisation step of the loop: the schedule's rate, the batch, the forward with what
    training adds (forced chunks, the retrieval loss, the scorer alone), the backward, the clipped
    update; returns the step's log record (loss of the global batch, rate, tokens/s, memory...) and
    the time it was taken."""

    def __init__(self, model, dmodel, opt, batches: Batches, cfg: TrainConfig, device, bf16: bool, world: int,
                 emit):
        self.model, self.dmodel, self.opt, self.batches = model, dmodel, opt, batches
        self.cfg, self.device, self.bf16, self.world, self.emit = cfg, device, bf16, world, emit
        obj, mc = cfg.objective, model.config
        # --lm-loss 0 on one group: only the retrieval loss trains, and it does not depend on the upper
        # layers, so they are skipped (objective.scorer_loss; the LM loss is then not logged)
        self.scorer_only = obj.lm_loss == 0 and obj.retrieval_loss > 0 and mc.uses_chunks
        self.scorer_alone = self.scorer_only and world == 1 and mc.arch == "drt" and mc.num_groups == 1

    def __call__(self, step: int, t_last: float) -> tuple[dict, float]:
        cfg = self.cfg
        lr = lr_at(step, cfg)
        for g in self.opt.param_groups:
            g["lr"] = lr * g.get("lr_mult", 1.0)
        ids, labels, weights, forced, targets = self.batches.get(step)
        ids, labels = ids.to(self.device), labels.to(self.device)
        weights = weights.to(self.device) if weights is not None else None
        loss, extra = self._loss(step, ids, labels, weights, forced, targets)
        if not torch.isfinite(loss):
            self.emit({"step": step, "error": f"non-finite loss {loss.item()}; stopped (last checkpoint "
                                              f"kept)"})
            raise FloatingPointError(f"non-finite loss at step {step}")
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.grad_clip)
        if hasattr(gnorm, "full_tensor"):  # FSDP2: a DTensor (the norm over every rank's shards)
            gnorm = gnorm.full_tensor()
        if not torch.isfinite(gnorm):
            self.emit({"step": step, "error": "non-finite gradient norm; stopped"})
            raise FloatingPointError(f"non-finite grad norm at step {step}")
        self.opt.step()
        logged = loss.detach()
        if self.world > 1:
            import torch.distributed as dist

            # log the loss of the global batch (mean of the ranks' equal-sized slices), not rank 0's
            dist.all_reduce(logged)
            logged = logged / self.world
        now = time.time()
        rec = {"step": step + 1, "loss": float(logged.item()), "lr": lr,
               "tok/s": ids.numel() * self.world / (now - t_last), "mem_gb": rss_gb(), "gnorm": float(gnorm),
               **extra}
        if cfg.tasks.task:  # this rank's rows, as ret_loss beside it is this rank's
            rec["task"] = ",".join(self.batches.row_tasks(step))
        return rec, now

    def _loss(self, step: int, ids, labels, weights, forced, targets):
        """(the loss to back-propagate, the extra log fields: answer metrics, LM and retrieval losses)."""
        obj = self.cfg.objective
        kw = {}
        if forced is not None and bool((forced >= 0).any()):
            kw = {"forced_chunks": forced.to(self.device), "forced_oracle": step < obj.oracle_steps}
        if targets is not None and obj.retrieval_loss > 0:
            kw["retrieval_targets"] = targets.to(self.device)
            kw["retrieval_distractors"] = obj.retrieval_distractors
        if obj.group_targets and kw:
            kw["group_targets"] = True
        if self.scorer_only:
            kw["scorer_only"] = True  # no graph through the upper layers: only the scorer learns
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            if self.scorer_alone and "retrieval_targets" in kw:  # the upper layers cannot change this loss
                res = SimpleNamespace(loss=None, logits=None,
                                      retrieval_loss=scorer_loss(self.model, ids, kw["retrieval_targets"],
                                                                 obj.retrieval_distractors))
            else:
                res = training_forward(self.dmodel, ids, labels, weights, **kw)
        # lm_loss 0: the LM loss is logged but not back-propagated
        loss = res.loss * obj.lm_loss if obj.lm_loss > 0 else None
        answers = weights is not None and res.logits is not None
        extra = answer_metrics(res.logits, labels, weights) if answers else {}
        if obj.lm_loss != 1.0 and res.loss is not None:
            extra["lm_loss"] = float(res.loss.detach())
        if res.retrieval_loss is not None:
            extra["ret_loss"] = float(res.retrieval_loss.detach())
            if obj.retrieval_loss > 0:
                rl = obj.retrieval_loss * res.retrieval_loss
                loss = rl if loss is None else loss + rl
        if loss is None or not loss.requires_grad:  # nothing to learn from in this batch
            loss = sum(p.sum() * 0.0 for p in self.model.parameters() if p.requires_grad)
        return loss, extra


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
    for i in range(cfg.run.eval_batches):
        ids = batches.val.batch(i, cfg.data.batch_size).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            tot += float(model(ids, labels=ids).loss)
    model.train()
    return tot / cfg.run.eval_batches


# ----------------------------------------------------------------------------------------------
# command line (the parser is drt_core.train.cli's, or main's under torchrun)


def run(args) -> int:
    cfg = config_from_args(args)
    if int(os.environ.get("RANK", "0")) == 0:
        print(plan_text(cfg), flush=True)
    res = train(cfg)
    if args.json:
        final = res["history"][-1] if res["history"] else None
        print(json.dumps({"out": res["out"], "steps": res["steps"], "final": final}))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for torchrun: `torchrun --nproc-per-node 2 -m drt_core.train.loop --preset tiny ...`."""
    p = argparse.ArgumentParser(prog="drt_core.train.loop")
    add_args(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return run(args)


if __name__ == "__main__":
    code = main()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # a torchrun child ends here, its group destroyed and its files closed: skip the interpreter's
        # finalisation, where gloo's worker threads can still be torn down and abort the process
        # ("terminate called without an active exception", pytorch/pytorch#179291) after a good run
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
