"""Counterfactuals: what the model does with some of the document's chunks barred from retrieval.

A barred chunk gets -inf in every landmark's scores before top-k, in every group (`bar`; the
stream applies it in Stream.select). A fork of variants (`fork_variants`) runs several sets of
barred chunks side by side, one batch row each, from the retrieval groups on: the lower layers, the
chunk encoder, the memory and the retrieval scores, which no selection changes, are computed once.
On top of them, the answer's teacher-forced log-probability under each set (`answer_logprobs`) and
each chunk's causal effect on an answer (`causal_effects`). The stored document is never changed:
every pass runs on a fork (its memory an overlay).

The functions take the document's state (drt_core.stream.DocState) and feed through its engine.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import torch

from .attention import KVWindow


def check_mask(state, mask: Iterable[int] | None) -> frozenset[int]:
    """`mask` as a set of document chunk ids; ValueError naming the fix for anything else."""
    if not mask:
        return frozenset()
    cfg = state.engine.cfg
    if not cfg.uses_chunks:
        raise ValueError(f"a {cfg.arch} model retrieves nothing: there is nothing to mask")
    out = set()
    for c in mask:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise ValueError(f"mask: chunk ids are integers, got {c!r}")
        if not 0 <= int(c) < state.n_chunks:
            raise ValueError(f"mask: chunk {int(c)} is not a chunk of the document "
                             f"(0 to {state.n_chunks - 1})")
        out.add(int(c))
    return frozenset(out)


def drop_masked(idx: torch.Tensor, w: torch.Tensor, barred: frozenset[int]) -> torch.Tensor:
    """Weights w [..., k] of the selection idx [..., k] with the barred chunks' set to 0 and the
    rest renormalised: the softmax over the selection's other scores, as if theirs were -inf."""
    if not barred:
        return w
    hit = torch.isin(idx, torch.tensor(sorted(barred), dtype=idx.dtype, device=idx.device)) & (w > 0)
    if not bool(hit.any()):
        return w
    w = w.masked_fill(hit, 0.0)
    tot = w.sum(-1, keepdim=True)
    return torch.where(tot > 0, w / tot.clamp_min(1e-30), w)


def apply_mask(scores: torch.Tensor, barred: frozenset[int]) -> torch.Tensor:
    """scores [m', n] with -inf in the barred chunks' columns (a new tensor)."""
    cols = [c for c in sorted(barred) if c < scores.shape[1]]
    if not cols:
        return scores
    return scores.index_fill(1, torch.tensor(cols, device=scores.device), float("-inf"))


def bar(fork, barred: frozenset[int]) -> None:
    """Bar `barred` from every retrieval the fork makes: each landmark's scores give them -inf
    before top-k, in every group (Stream.select). The selection carried into the fork was made at
    prefill time (by the document's last landmark, whose query is not stored): the barred chunks
    lose their weight in it and the others are renormalised, but no next-best chunk takes their
    place. The stored document is untouched (a fork's memory is an overlay)."""
    fork.mask = barred
    fork.carry.sel_w = drop_masked(fork.carry.sel_idx, fork.carry.sel_w, barred)


def masked_fork(state, barred: frozenset[int], bias: torch.Tensor | None = None):
    """A fork of `state` with `barred` barred (`bar`) and `bias` (the question's selection term,
    Engine.question_bias) added to every selection it makes."""
    with state.lock:
        fork = state.fork()
    bar(fork, barred)
    fork.bias = bias
    fork.gated = False  # a generation's selections leave config lexical_gates' term out (DocState.gated)
    return fork


def fork_variants(state, masks: Sequence[frozenset[int]]):
    """A fork that runs len(masks) copies of the stream side by side, copy b with the chunks of
    masks[b] barred (as `bar` bars them): one batch through the retrieval groups, whose windows
    and selections get a row per copy; the lower layers, the chunk encoder, the memory and the
    retrieval scores, which no selection changes, are computed once."""
    with state.lock:
        fork = state.fork()
    car, nl, Bv = fork.carry, len(state.engine.model.lower), len(masks)
    for i in range(nl, len(car.windows)):
        w = car.windows[i]
        car.windows[i] = KVWindow(w.k.expand(Bv, -1, -1, -1).clone(), w.v.expand(Bv, -1, -1, -1).clone(),
                                  w.pos.clone(), w.next_pos)
    car.sel_w = torch.stack([drop_masked(car.sel_idx, car.sel_w, frozenset(m)) for m in masks])
    car.sel_idx = car.sel_idx[None].repeat(Bv, 1, 1)
    fork.variants = [frozenset(m) for m in masks]
    fork.gated = False  # as masked_fork's: the counterfactuals of a generation
    return fork


def answer_lp(fork, prompt_ids: Sequence[int], answer_ids: Sequence[int],
              record: list | None = None) -> torch.Tensor:
    """Teacher-forced log p(answer_ids[i] | prompt, answer_ids[:i]) on `fork` ([len(answer)], or
    [Bv, len(answer)] on a fork of fork_variants). Logits are made only where they predict an
    answer token: the prompt but its last token is fed without (and, when a `record` is kept,
    the answer's last token, whose selections it then lists)."""
    feed = fork.engine.feed
    p, a = [int(t) for t in prompt_ids], [int(t) for t in answer_ids]
    feed(fork, p[:-1], record=record)
    lg = feed(fork, p[-1:] + a[:-1], want_logits=True, record=record)
    if record is not None:
        feed(fork, a[-1:], record=record)
    # the feed's logits are log-probabilities with a copy head (mix_copy), logits without:
    # log_softmax fits both
    lp = torch.log_softmax(lg.float(), -1)
    tgt = torch.tensor(a, device=lp.device).expand(lp.shape[:-1])
    return lp.gather(-1, tgt[..., None])[..., 0]


@torch.no_grad()
def answer_logprobs(state, prompt_ids: Sequence[int], answer_ids: Sequence[int],
                    masks: Sequence[frozenset[int]], bias: torch.Tensor | None = None) -> list[float]:
    """The answer's log-probability (answer_logprob) for each set of barred chunks in `masks`, in one
    batched teacher-forced pass (fork_variants) over prompt + answer; `bias`: the question's
    selection term (Engine.question_bias)."""
    if not answer_ids or not masks:
        return [0.0] * len(masks)
    fork = fork_variants(state, masks)
    fork.bias = bias
    return answer_lp(fork, prompt_ids, answer_ids).sum(-1).tolist()


@torch.no_grad()
def answer_logprob(state, prompt_ids: Sequence[int], answer_ids: Sequence[int], barred: frozenset[int],
                   bias: torch.Tensor | None = None) -> tuple[float, set[int]]:
    """(sum of log p(answer_ids) after prompt_ids on a fork with `barred` masked, the document
    chunks any selection serving those positions picked with weight > 0)."""
    fork = masked_fork(state, barred, bias)
    n = fork.memory.n
    car = fork.carry
    # the carried selection serves the first positions: its picks count too
    picked = {int(i) for i, w in zip(car.sel_idx.reshape(-1).tolist(), car.sel_w.reshape(-1).tolist())
              if w > 0}
    if not answer_ids:
        return 0.0, picked
    record: list[dict] = []
    lp = answer_lp(fork, prompt_ids, answer_ids, record)
    picked |= {int(i) for r in record for i, w in zip(r["idx"], r["weights"]) if w > 0}
    return float(lp.sum()), {c for c in picked if c < n}


def causal_effects(state, prompt_ids: Sequence[int], answer_ids: Sequence[int], chunks: Sequence[int],
                   bias: torch.Tensor | None = None) -> dict[int, float]:
    """Engine.causal_effects on checked chunk ids: one pass unmasked (which says which chunks its
    selections picked), one batched pass for the picked ones; an unpicked chunk gets 0.0."""
    base, picked = answer_logprob(state, prompt_ids, answer_ids, frozenset(), bias)
    hit = [c for c in chunks if c in picked]
    lps = answer_logprobs(state, prompt_ids, answer_ids, [frozenset({c}) for c in hit], bias)
    masked = dict(zip(hit, lps))
    return {c: base - masked[c] if c in masked else 0.0 for c in chunks}
