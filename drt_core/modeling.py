"""DRTForCausalLM: the DRT (drt_core/drt.py) as transformers' PreTrainedModel, the model of the
fixed contract (docs/design.md): `save_pretrained`, `from_pretrained`, safetensors weights,
AutoModelForCausalLM knows "drt".

`DRTForCausalLM(config)` (and from_pretrained) builds the class of config.arch: the DRT for "drt",
`FixedRetrieverForCausalLM` for "fixed_retriever" (RPT-style: the chunks chosen by a frozen
MiniLM's cosines, drt_core/fixed_retriever.py), `BaselineForCausalLM` for the baselines
(drt_core/baselines.py); one checkpoint format for all. The engine serves a DRT checkpoint with
drt_core/runtime.py's DRTRuntime instead: the same layers and numbers without transformers' import.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from .baselines import BaselineForCausalLM
from .drt import DRT
from .fixed_retriever import batch_scores
from .hf_config import DRTConfig
from .pretrained import DRTOutput, DRTPreTrainedModel

__all__ = ["DRTForCausalLM", "DRTOutput", "FixedRetrieverForCausalLM"]


class DRTForCausalLM(DRT, DRTPreTrainedModel):
    """The DRT (drt.DRT: `model(input_ids, labels=None)` -> DRTOutput with logits [B, L, V] of the
    real tokens) on transformers' PreTrainedModel; builds the class of config.arch (above)."""

    def __new__(cls, config: DRTConfig | None = None, *args, **kwargs):
        # the class of config.arch (a copy or an unpickling calls this without a config)
        if cls is not DRTForCausalLM or config is None or config.arch == "drt":
            return super().__new__(cls)
        if not config.uses_chunks:
            return BaselineForCausalLM(as_drt_config(config), *args, **kwargs)
        return super().__new__(FixedRetrieverForCausalLM)

    def __init__(self, config: DRTConfig):
        super().__init__(as_drt_config(config))
        self.build(config)
        self.post_init()


class FixedRetrieverForCausalLM(DRTForCausalLM):
    """config.arch "fixed_retriever" (RPT-style, docs/spec.md §7): this DRT with the chunks chosen by
    the cosines of a frozen MiniLM embedding of their texts (drt_core/fixed_retriever.py), without
    Gumbel noise: nothing in its scores is learned."""

    gumbel = False

    def group_scores(self, g: int, h: torch.Tensor, own: torch.Tensor | None, keys: torch.Tensor, aug: torch.Tensor,
                     input_ids: torch.Tensor, chunk_embeddings: torch.Tensor | None = None,
                     gates: tuple | None = None) -> torch.Tensor:
        return batch_scores(input_ids, self.config, chunk_embeddings)

    def landmarks(self, input_ids: torch.Tensor, segment_chunks: int = 1024):
        raise ValueError("landmarks: only DRT models score chunks with landmarks")


def as_drt_config(config) -> DRTConfig:
    """A DRTConfig of `config`: itself, or the same fields from a RunConfig (an engine's model's,
    drt_core/runtime.py), so `DRTForCausalLM(engine.model.config)` builds as before."""
    return config if isinstance(config, DRTConfig) else DRTConfig(**config.to_dict())


AutoModelForCausalLM.register(DRTConfig, DRTForCausalLM, exist_ok=True)  # AutoModelForCausalLM loads "drt"
