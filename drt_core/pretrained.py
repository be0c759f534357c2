"""The transformers face of every architecture: `DRTPreTrainedModel`, transformers' PreTrainedModel
with our ModelBase (drt_core/base.py: initialisation, tied head, output, preamble), the base class
of DRTForCausalLM and the baselines (the fixed contract, docs/design.md: `save_pretrained`,
`from_pretrained`, safetensors, AutoModelForCausalLM), and `DRTOutput`, their forward's ModelOutput.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .base import ModelBase
from .hf_config import DRTConfig


@dataclass
class DRTOutput(ModelOutput):
    """base.Output as transformers' ModelOutput (indexable by name and position)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    retrieval: list | None = None  # per group: dict(idx, weights, scores [B, C, C]); row c serves chunk c+1
    retrieval_loss: torch.Tensor | None = None


class DRTPreTrainedModel(ModelBase, PreTrainedModel):
    """ModelBase on transformers' PreTrainedModel: from_pretrained fills what it does not load with
    ModelBase._init_weights (post_init), ties lm_head to embed."""

    config_class = DRTConfig
    base_model_prefix = "drt"
    _no_split_modules = ["Block", "UpperBlock", "EncoderBlock"]
    _tied_weights_keys = {"lm_head.weight": "embed.weight"}
    output_type = DRTOutput
