"""The copy warm-up task (`train --task repeat`): passages repeated beyond the self-attention
window, the chunks they come from named as the teacher-forced selection."""

from __future__ import annotations

import numpy as np

from ...prompts import CHUNK_TOKENS
from .common import TooShort, rng_of


def build_repeat(
    tokens,
    length: int,
    rng,
    *,
    n_passages: int = 2,
    span_chunks: int = 3,
    gap: int = 320,
    copy_weight: float = 5.0,
    chunk_tokens: int = CHUNK_TOKENS,
) -> dict:
    """A copy example: text whose passages come back later, farther than the self-attention window.

    ``tokens`` (>= `length` real tokens of running text) is laid out as
    ``t[:o + P + g] + t[o : o + P] + t[o + P + g :]`` cut to `length`: P = n_passages *
    span_chunks * 63 tokens (fewer if `length` is short) starting at a random offset o < 63 (so
    copies do not line up with chunk boundaries), a gap g in [gap, gap + 63) of ordinary text,
    then the same text again.
    Every copied token is predictable from a chunk that only retrieval can reach; ``forced`` [C, 2]
    names, for each retrieval row, the (one or two) source chunks of the chunk it serves (-1 =
    none), i.e. the teacher-forced selection of a copy-path warm-up (objective.force_selection).
    Weights: `copy_weight` on copied tokens, 1 elsewhere.
    """
    rng = rng_of(rng)
    t = np.asarray(tokens, dtype=np.int64)
    # the copied text: n_passages * span_chunks chunks, less when `length` is short
    P = min(span_chunks * chunk_tokens * n_passages, (length - gap - 2 * chunk_tokens) // 2)
    if P < chunk_tokens:
        raise TooShort(f"length {length} cannot hold a copied chunk and a {gap}-token gap")
    o = rng.randrange(chunk_tokens)
    g = gap + rng.randrange(chunk_tokens)
    start = o + P + g  # where the copy begins
    if start + P > length or t.size < length:
        raise TooShort(f"length {length} cannot hold {n_passages} passages of {span_chunks} chunks "
                       f"and a {gap}-token gap")
    ids = np.concatenate([t[:start], t[o : o + P], t[start:]])[:length]
    weights = np.ones(length, np.float32)
    weights[start : start + P] = copy_weight
    C = -(-length // chunk_tokens)
    forced = np.full((C, 2), -1, np.int64)
    shift = start - o
    for c in range(start // chunk_tokens, min(C, -(-(start + P) // chunk_tokens))):
        lo, hi = max(c * chunk_tokens, start), min((c + 1) * chunk_tokens, start + P)
        if c >= 1 and lo < hi:
            src = sorted({(lo - shift) // chunk_tokens, (hi - 1 - shift) // chunk_tokens})
            forced[c - 1, : len(src)] = src
    return {"task": "repeat", "ids": ids, "labels": ids.copy(), "weights": weights, "forced": forced,
            "copy_span": (start, start + P), "source_span": (o, o + P)}
