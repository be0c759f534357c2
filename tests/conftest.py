"""Shared fixtures: a fresh DRT_HOME per test, deterministic seeds, the gpu marker."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "assets"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def drt_home(tmp_path, monkeypatch):
    home = tmp_path / "drt-home"
    monkeypatch.setenv("DRT_HOME", str(home))
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture(autouse=True)
def _seed():
    import torch

    random.seed(0)
    torch.manual_seed(0)


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip)


@pytest.fixture
def assets() -> Path:
    return ASSETS
