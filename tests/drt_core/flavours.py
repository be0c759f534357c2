"""The two flavours of the model that the causality, streaming and save/load tests run on: `paper`
(the `paper` preset: every extension off, docs/spec.md) and `shipped` (the extensions that
checkpoints/drt-tiny/config.json switches on, read from it, so the tests follow what ships). The
tests give both their own small sizes. And the toy word tables their `lexical_words` models use."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from drt_core.config import EXTENSIONS

FLAVOURS = ("paper", "shipped")
SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny" / "config.json"


def flavour_kw(name: str) -> dict:
    """Keywords for a test's model builder: the preset, and for `shipped` its extensions."""
    if name == "paper":
        return {"preset": "paper", "lower_layers": 2, "encoder_layers": 1}  # the paper's 6 and 2: slow here
    shipped = json.loads(SHIPPED_CONFIG.read_text())
    kw = {k: shipped[k] for k in EXTENSIONS if k in shipped}
    if kw.get("stream_preamble"):  # token ids of the real vocabulary: the same length in a toy one's
        kw["stream_preamble"] = [3 + i for i in range(len(kw["stream_preamble"]))]
    return {"preset": "tiny", **kw}


def toy_word_tables(vocab: int):
    """Word tables (drt_core.words.word_tables) for a toy vocabulary: every third token starts a
    word, and tokens share letters (hash id % 53), so random chunks share whole words of 1-3 tokens."""
    ids = torch.arange(vocab)
    return (ids % 53 + 1).long(), (ids % 5 + 2).long(), (ids % 3 == 0)
