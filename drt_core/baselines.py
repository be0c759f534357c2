"""The baselines that retrieve nothing of their own (config.arch; docs/spec.md §7): their layers and
their forward. They share DRT's checkpoint format (embed, layers, norm, lm_head: no retrieval) and
its constructor (`DRTForCausalLM(config)` builds a `BaselineForCausalLM`), so a baseline trains,
saves, loads and streams through the same code as DRT:

    "sliding_window"  a plain ALiBi sliding-window LM, the paper's "Base LM +2 layers"
    "full_attention"  a causal full-attention LM with RoPE
    "landmark"        Landmark Attention (Mohtashami & Jaggi 2023; drt_core/landmark.py): the
                      sliding_window stack over the stream laid out in DRT's chunks, a landmark
                      after every chunk_size - 1 tokens

The fixed retriever (RPT-style) is DRT with other scores: drt_core/fixed_retriever.py.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .hf_config import DRTConfig
from .landmark import LandmarkAttention
from .layers import Block, RMSNorm
from .base import augment, frozen, unaugment
from .pretrained import DRTOutput, DRTPreTrainedModel


class BaselineForCausalLM(DRTPreTrainedModel):
    """A baseline of config.arch (above): `DRTForCausalLM(config)` and `DRTForCausalLM.from_pretrained`
    build this class for them. The stream preamble (config stream_preamble) comes before the ids of
    the sliding-window and full-attention baselines as before DRT's."""

    def __init__(self, config: DRTConfig):
        super().__init__(config)
        D = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, D)
        self.layers = baseline_layers(config)
        self.norm = RMSNorm(D, config.rms_eps)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, output_retrieval: bool = False,
                chunk_embeddings: torch.Tensor | None = None, steer=None, **kwargs) -> DRTOutput:
        """DRTForCausalLM.forward's logits [B, L, V] and loss; no retrieval."""
        with frozen(steer):
            logits = self.lm_head(self.norm(self.states(input_ids)))
        return self.output(logits, labels, steer)

    def states(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The final states [B, L, D] (before the final norm) of the real tokens of ids [B, L]."""
        cfg = self.config
        if cfg.arch == "landmark":  # blocks of chunk_tokens tokens and a landmark each
            x = self.embed(augment(input_ids, cfg)[0])
            for layer in self.layers:
                x = layer(x)
            return unaugment(x, input_ids.shape[1], cfg.chunk_size)
        x = self.embed(input_ids.clamp_min(0))
        P = cfg.preamble_len
        if P:
            x = self._with_preamble(x)
        for layer in self.layers:
            x = layer(x)
        return x[:, P:]

    @torch.no_grad()
    def preamble_caches(self, caches: list) -> None:
        """The stream preamble through every layer into `caches` (the engine's KVWindow of each
        layer, empty), as DRTForCausalLM.preamble_caches."""
        if self.config.preamble_len:
            x = self._with_preamble(self.embed.weight[:0][None])  # [1, P, D]
            for layer, cache in zip(self.layers, caches):
                x = layer(x, 0, cache)


def baseline_layers(cfg: DRTConfig) -> nn.ModuleList:
    """The baseline's stack: baseline_layers deep, else as deep as DRT's layers plus two (the
    paper's "+2 layers", for the chunk encoder's and GCA's parameters)."""
    depth = cfg.baseline_layers or (cfg.lower_layers + sum(cfg.upper_groups) + 2)
    if cfg.arch == "landmark":
        return nn.ModuleList([Block(cfg, attn=LandmarkAttention(cfg)) for _ in range(depth)])
    full = cfg.arch == "full_attention"
    return nn.ModuleList([Block(cfg, rope=full, window=None if full else cfg.window) for _ in range(depth)])
