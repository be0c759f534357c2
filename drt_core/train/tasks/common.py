"""What the task builders share: `TooShort`, the ignored label, a `random.Random` from a seed (never
the global RNG), the tokenizer's directory and an encoder for it."""

from __future__ import annotations

import random
from pathlib import Path


class TooShort(ValueError):
    """The requested length cannot hold the haystack margin, the needles and the questions."""


IGNORE = -100


def rng_of(seed_or_rng) -> random.Random:
    if isinstance(seed_or_rng, random.Random):
        return seed_or_rng
    if seed_or_rng is None:
        raise ValueError("pass a seed or a random.Random (the global RNG is never used)")
    return random.Random(seed_or_rng)


def tokenizer_dir(tokenizer_path) -> str:
    from ...tokenizer import _resolve

    return str(_resolve(tokenizer_path))


def encoder(tok_path: str):
    from ...tokenizer import encode

    return lambda text: encode(text, tok_path)


def tokenizer_path_of(tokenizer):
    """None, a path, or an HF tokenizer loaded from a directory -> a tokenizer directory (or None)."""
    if tokenizer is None or isinstance(tokenizer, (str, Path)):
        return tokenizer
    p = getattr(tokenizer, "name_or_path", None)
    return p or None
