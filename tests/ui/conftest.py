"""Fixtures for the web UI tests: a tiny randomly initialised model (fast, and independent of the
checkpoint being trained), a UIContext over a fresh library, a free port."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "drt-tiny"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random `tiny` DRT saved like a checkpoint, with the shipped tokenizer."""
    if not (SHIPPED / "tokenizer.json").exists():
        pytest.skip("no shipped tokenizer in checkpoints/drt-tiny")
    import torch

    from drt_core.hf_config import DRTConfig
    from drt_core.modeling import DRTForCausalLM

    out = tmp_path_factory.mktemp("drt-tiny-random")
    torch.manual_seed(0)
    DRTForCausalLM(DRTConfig.from_preset("tiny", vocab_size=8192)).save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (SHIPPED / name).exists():
            shutil.copy(SHIPPED / name, out / name)
    return out


@pytest.fixture
def free_port() -> int:
    from ui.screenshots import free_port as pick

    return pick()


def fake_upload(ctx, src: Path) -> Path:
    """Copy a fixture where Gradio puts uploads (<upload_root>/<hash>/<name>)."""
    d = ctx.upload_root / "0123abcd"
    d.mkdir(parents=True, exist_ok=True)
    dst = d / src.name
    shutil.copy(src, dst)
    return dst
