"""What training adds to the model's forward: forced retrieval (force_selection), the retrieval loss
toward target chunks (forced_retrieval_loss), per-group targets, the scorer-only step, weighted LM
loss. The serving model (drt_core.modeling) knows none of it: `training_forward` passes a
`Steering` into the forward, which calls it once per retrieval group with that group's scores and
selection (docs/training.md)."""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch

from ..base import lm_loss
from ..drt import NEG_INF, fusion_weights
from ..pretrained import DRTOutput


def force_selection(idx: torch.Tensor, scores: torch.Tensor, forced: torch.Tensor, oracle: bool = False):
    """Teacher-forced retrieval (fine-tuning only): row c's selection becomes the chunks
    forced[..., c, :] (-1 = none) followed by its best natural picks, k in all. The fusion weights
    are recomputed as the softmax of the clean scores over the new selection, so the loss still
    trains the forced chunks' scores against the chunks they compete with.

    With `oracle`, forced rows read ONLY their forced chunks (equal weights, no gradient to the
    scores) and the other rows read nothing (weight 0): a warm-up that trains the copy path (GCA
    projections, chunk memory, MLPs) where retrieval is useful, without the noise of random picks
    elsewhere (against which the model learns to switch GCA off through softmax_one's null slot).

    idx [..., C, k] (descending rank, as from select_topk), scores [..., C, Ce],
    forced [..., C] or [..., C, F]. Returns (idx, w) like select_topk."""
    forced = forced.to(idx.device)
    if forced.dim() == idx.dim() - 1:
        forced = forced.unsqueeze(-1)
    k, F_ = idx.shape[-1], forced.shape[-1]
    cand = torch.cat([forced, idx], dim=-1)  # [..., C, F + k]: forced first, then by rank
    n = F_ + k
    pos = torch.arange(n, device=idx.device)
    dup = ((cand.unsqueeze(-1) == cand.unsqueeze(-2)) & (pos[None, :] < pos[:, None])).any(-1)
    keep = (cand >= 0) & ~dup
    order = torch.where(keep, pos, pos + n).argsort(dim=-1)[..., :k]
    new = cand.gather(-1, order).clamp_min(0)
    w, valid = fusion_weights(scores, new, keep.gather(-1, order))
    if oracle:  # forced rows read only their forced chunks; the other rows read nothing
        is_forced = (order < F_) & valid
        nf = is_forced.sum(-1, keepdim=True)
        w = is_forced.to(w.dtype) / nf.clamp_min(1)
    return new.masked_fill(~valid, 0), w


def _group_column(t: torch.Tensor | None, g: int, per_group: bool) -> torch.Tensor | None:
    """Group g's share of forced / target chunks [B, C, F]: all of them, or with per_group
    (`train --group-targets`) column g alone ([B, C, 1]; all -1 when F <= g)."""
    if t is None or not per_group:
        return t
    if t.dim() == 2:
        t = t.unsqueeze(-1)
    return t[..., g: g + 1] if g < t.shape[-1] else torch.full_like(t[..., :1], -1)


def forced_retrieval_loss(scores: torch.Tensor, forced: torch.Tensor, distractors: float = 1.0) -> torch.Tensor | None:
    """-log P(forced chunks) under the softmax of a row's scores over all eligible chunks, mean over
    the rows with a forced chunk. scores [B, C, Ce], forced [B, C] or [B, C, F] (-1 = none).

    distractors = M (`train --retrieval-distractors`, our extension) counts every other chunk M
    times, as if the haystack were M times longer with text like it: the loss of a row then is
    log(sum_forced e^s + M * sum_others e^s) - log(sum_forced e^s), and a margin that suffices
    against the C chunks of a training row no longer zeroes it, when the engine will rank M*C."""
    if forced.dim() == 2:
        forced = forced.unsqueeze(-1)
    rows = (forced >= 0).any(-1)
    if not bool(rows.any()):
        return None
    s = scores[rows].float()  # [R, Ce]
    f = forced[rows]  # [R, F]
    fs = s.gather(-1, f.clamp_min(0)).masked_fill(f < 0, NEG_INF)
    if distractors != 1.0:
        target = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, f.clamp_min(0), f >= 0)
        s = s + (~target) * math.log(distractors)
    return (torch.logsumexp(s, -1) - torch.logsumexp(fs, -1)).mean()


class Steering:
    """Training's hook on the forward's retrieval (model(..., steer=Steering(...))). For each group g
    it forces chunks into the selection (`forced` [B, C] or [B, C, F], -1 for none; `oracle`: see
    force_selection) and adds the retrieval loss toward `targets` (default: the forced chunks;
    forced_retrieval_loss, every other chunk counted `distractors` times), divided by the number of
    groups. per_group (G >= 2, `train --group-targets`): group g reads column g of those tensors
    alone. scorer_only (`train --lm-loss 0` with several groups): the upper layers run without an
    autograd graph, so only the retrieval loss trains.

    A plain class, not a dataclass: FSDP2's mixed precision casts the forward's inputs with
    torch.distributed.utils._apply_to_tensors, which rebuilds every dataclass it meets with
    dataclasses.replace (that failed on the `loss` accumulator, and would hand the forward a copy).
    An object of another class passes through as it is (tests/drt_core/train/test_fsdp.py)."""

    def __init__(self, forced: torch.Tensor | None = None, targets: torch.Tensor | None = None,
                 oracle: bool = False, distractors: float = 1.0, per_group: bool = False,
                 scorer_only: bool = False, groups: int = 1, trains_scorer: bool = True):
        self.forced, self.targets, self.oracle, self.distractors = forced, targets, oracle, distractors
        self.per_group, self.scorer_only, self.groups = per_group, scorer_only, groups
        self.trains_scorer = trains_scorer  # False for the fixed retriever: its scores are not learned
        self.loss: torch.Tensor | None = None

    def __call__(self, g: int, scores: torch.Tensor, idx: torch.Tensor, w: torch.Tensor):
        C = scores.shape[1]
        forced = _group_column(self.forced, g, self.per_group)
        if forced is not None:
            idx, w = force_selection(idx, scores, forced[:, :C], self.oracle)
        targets = _group_column(self.targets if self.targets is not None else self.forced, g, self.per_group)
        if targets is not None and self.trains_scorer:
            rl = forced_retrieval_loss(scores, targets[:, :C], self.distractors)
            if rl is not None:
                rl = rl / self.groups
                self.loss = rl if self.loss is None else self.loss + rl
        return idx, w


def training_forward(model, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                     label_weights: torch.Tensor | None = None, *, forced_chunks: torch.Tensor | None = None,
                     forced_oracle: bool = False, retrieval_targets: torch.Tensor | None = None,
                     retrieval_distractors: float = 1.0, scorer_only: bool = False, group_targets: bool = False,
                     output_retrieval: bool = False) -> DRTOutput:
    """The training step's forward: model (a DRTForCausalLM, or its DDP / FSDP wrapper) with a
    Steering built from the training arguments, and the LM loss weighted by label_weights [B, L]
    (aligned with labels; lm_loss). retrieval_loss is the Steering's (None without targets)."""
    cfg = getattr(model, "module", model).config
    steer = Steering(forced=forced_chunks, targets=retrieval_targets, oracle=forced_oracle,
                     distractors=retrieval_distractors, per_group=group_targets, scorer_only=scorer_only,
                     groups=cfg.num_groups, trains_scorer=cfg.arch == "drt")
    out = model(input_ids, output_retrieval=output_retrieval, steer=steer)
    loss = None
    if labels is not None:
        with torch.no_grad() if scorer_only else nullcontext():
            loss = lm_loss(out.logits, labels, label_weights)
    return DRTOutput(loss=loss, logits=out.logits, retrieval=out.retrieval, retrieval_loss=out.retrieval_loss)


def scorer_loss(model, input_ids: torch.Tensor, retrieval_targets: torch.Tensor,
                retrieval_distractors: float = 1.0) -> torch.Tensor | None:
    """training_forward(model, ids, retrieval_targets=T, retrieval_distractors=M, scorer_only=True).retrieval_loss
    of a one-group model,
    without running the upper layers, whose output that loss does not depend on (G = 1: the
    queries are the lower layers' states). What `train --lm-loss 0` optimises, at the cost of
    the lower layers and the chunk encoder alone. None when no row has a target."""
    cfg = model.config
    if cfg.arch != "drt" or cfg.num_groups != 1:
        raise ValueError("scorer_loss: one-group DRT models only (group g > 0 queries read the upper layers)")
    B, _ = input_ids.shape
    S, D = cfg.chunk_size, cfg.hidden_size
    aug, C = model.augment(input_ids)
    x, _, pre = model.lower_states(aug)
    x = x.view(B, C, S, D)
    lmk_keys, _, _, own = model.encode_chunks(x, model.preamble_tail(pre))
    chunk_ids = torch.arange(C, device=x.device)
    q = model.landmark_query(0, x[:, :, S - 1], own)
    toks = aug.view(B, C, S)[:, :, : S - 1]
    gq, gk = model.word_gates(x[:, :, : S - 1])
    return forced_retrieval_loss(model.chunk_scores(0, q, lmk_keys, chunk_ids, chunk_ids, toks, toks,
                                                    q_gates=gq, k_gates=gk),
                                 retrieval_targets[:, :C], retrieval_distractors)
