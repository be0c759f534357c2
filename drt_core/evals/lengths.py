"""Evaluation lengths: "4k", "64k", "1m", "16m" or plain integers, in tokens, with BINARY units:
k = 1024 and m = 1024 * 1024 (4k = 4096 tokens, 1m = 1,048,576 tokens), the convention of the
paper's 4K/16K/64K tables. Decimals are allowed ("1.5k" = 1536). The one length syntax of `eval
niah`, `eval ppl` and the benches."""

from __future__ import annotations

import math

from ..errors import DRTError

UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
LENGTH_UNIT_NOTE = "k = 1024, m = 1024^2 tokens"


def parse_length(s: str | int) -> int:
    """'4k' -> 4096, '1m' -> 1048576, '1.5k' -> 1536, '4000' -> 4000 (binary units, see the docstring)."""
    if isinstance(s, int):
        n = s
    else:
        t = str(s).strip().lower().replace("_", "")
        suf = t[-1] if t and t[-1] in "kmg" else ""
        num = t[: len(t) - len(suf)]
        try:
            x = float(num) * UNITS[suf]
        except ValueError:
            raise DRTError(f"bad length {s!r}: expected e.g. 4k, 64k, 1m, 16m or a number of tokens") \
                from None
        if not math.isfinite(x) or x != int(x):
            raise DRTError(f"bad length {s!r}: not a whole number of tokens")
        n = int(x)
    if n < 1:
        raise DRTError(f"bad length {s!r}: must be at least 1 token")
    return n


def parse_lengths(s: str) -> list[int]:
    out = [parse_length(x) for x in str(s).split(",") if x.strip()]
    if not out:
        raise DRTError("no lengths given (e.g. --lengths 4k,64k,1m)")
    return out


def format_length(n: int) -> str:
    """4096 -> '4k', 1048576 -> '1m', 4000 -> '4000'."""
    for suf, u in (("m", 1024**2), ("k", 1024)):
        if n % u == 0:
            return f"{n // u}{suf}"
    return str(n)
