"""DRTRuntime: a DRT checkpoint served without transformers.

The engine answers questions from a new process (`drt-reader ask`), and importing transformers'
modeling code costs seconds before any work (docs/cli.md, "Start-up"). A DRT checkpoint folder is a
config.json and safetensors weights, so the engine reads them itself: `load(folder)` builds
`DRTRuntime`, the same layers as DRTForCausalLM (drt.DRT and base.ModelBase, the same parameter
names) on torch's nn.Module alone, with its config as config.RunConfig, and loads the weights.
Same numbers as `DRTForCausalLM.from_pretrained(folder)` (tests/drt_core/test_runtime.py). Other
architectures (the baselines, the fixed retriever) load through transformers (Engine.from_pretrained).
"""

from __future__ import annotations

from pathlib import Path

import torch.nn as nn

from .base import ModelBase
from .config import RunConfig
from .drt import DRT


class DRTRuntime(DRT, ModelBase, nn.Module):
    """The DRT of `config` (a RunConfig, or a DRTConfig) on nn.Module: DRTForCausalLM's forward and
    stages, its weights by name, the LM head tied to the embeddings as there."""

    def __init__(self, config):
        nn.Module.__init__(self)
        self.config = config
        self.build(config)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.embed.weight


def load(folder: str | Path) -> DRTRuntime | None:
    """The DRT checkpoint in `folder` (config.json, model.safetensors) in eval mode, or None when its
    architecture is not "drt" (the caller loads it through transformers). A weight missing or left
    over is refused with their names; a damaged file raises safetensors' SafetensorError."""
    from safetensors.torch import load_file

    p = Path(folder)
    cfg = RunConfig.from_json(p / "config.json")
    if cfg.arch != "drt":
        return None
    model = DRTRuntime(cfg)
    missing, unexpected = model.load_state_dict(load_file(str(p / "model.safetensors")), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"{p / 'model.safetensors'} does not fit its config.json: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()
