"""The chunk encoders: the paper's (landmark keys and the K/V memory of every complete chunk, spec
§1.3 step 3) and, as our extensions, a key encoder of their own (config key_encoder) that may read
the end of the chunk before (key_context: `ContextAttention`), and a query encoder (query_encoder)
whose features of a chunk its landmark query adds.

What the key encoder reads of the chunk before is `key_tail` of that chunk's lower-layer states:
the batch forward takes it of every chunk at once (`key_contexts`), the engine carries the last
one from run to run (drt_core/stream.py, `Carry.key_tail`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import apply_rope, rope_cos_sin
from .layers import MLP, RMSNorm, ZeroLinear

if TYPE_CHECKING:
    from .hf_config import DRTConfig


class EncoderBlock(nn.Module):
    """Chunk encoder block: bidirectional attention within one chunk, RoPE over slots 0..S-1."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_heads
        self.H, self.d = H, D // H
        self.rope_theta = cfg.rope_theta
        self.norm1 = RMSNorm(D, 1e-6)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.norm2 = RMSNorm(D, 1e-6)
        self.mlp = MLP(D, cfg.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [N, S, D], N = number of chunks
        N, S, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(N, S, 3, self.H, self.d).permute(2, 0, 3, 1, 4)
        cos, sin = rope_cos_sin(S, self.d, self.rope_theta, x.device, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(o.transpose(1, 2).reshape(N, S, D))
        return x + self.mlp(self.norm2(x))


class ContextAttention(nn.Module):
    """The key encoder's view of what leads into a chunk (config key_context, our extension):
    every slot of the chunk attends to the last slots of the chunk before (its lower-layer states,
    complete before this chunk's landmark, so keys stay causal). The output projection starts at
    zero, so a model given the option keys its chunks as before until it is trained; a zero
    context (the first chunk) adds exactly nothing."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_heads
        self.H, self.d = H, D // H
        self.q = nn.Linear(D, D, bias=False)
        self.kv = nn.Linear(D, 2 * D, bias=False)
        self.o = ZeroLinear(D, D, bias=False)

    def forward(self, e: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:  # e [N, S, D], ctx [N, m, D]
        N, S, D = e.shape
        q = self.q(e).view(N, S, self.H, self.d).transpose(1, 2)
        k, v = self.kv(ctx).view(N, -1, 2, self.H, self.d).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return e + self.o(o.transpose(1, 2).reshape(N, S, D))


class ChunkEncoder(nn.Module):
    """Landmark keys and the K/V chunk memory shared by every upper layer (spec §1.3 step 3); with
    memory=False, landmark states only (the key and query encoders)."""

    def __init__(self, cfg: DRTConfig, layers: int | None = None, memory: bool = True, context: bool = False):
        super().__init__()
        D = cfg.hidden_size
        self.prenorm = RMSNorm(D, cfg.rms_eps)
        self.context = ContextAttention(cfg) if context else None  # config key_context
        self.layers = nn.ModuleList([EncoderBlock(cfg)
                                     for _ in range(cfg.encoder_layers if layers is None else layers)])
        self.norm = RMSNorm(D, 1e-6)
        self.memory = memory  # False: a query or key encoder, landmark states only
        self.k_proj = nn.Linear(D, D, bias=False) if memory else None
        self.v_proj = nn.Linear(D, D, bias=False) if memory else None

    def forward(self, h: torch.Tensor, ctx: torch.Tensor | None = None):
        """h: [N, S, D] lower-layer states of N complete chunks (landmark in the last slot); ctx
        [N, m, D]: with a context attention, the last m slots of the chunk before each (zeros
        for the first chunk).

        Returns landmark keys [N, D] and memory K, V [N, S-1, D] (the real slots only); without
        memory, (landmark states [N, D], None, None)."""
        e = self.prenorm(h)
        if self.context is not None:
            e = self.context(e, self.prenorm(ctx))
        for layer in self.layers:
            e = layer(e)
        e = self.norm(e)
        if not self.memory:
            return e[:, -1], None, None
        real = e[:, :-1]
        return e[:, -1], self.k_proj(real), self.v_proj(real)


def key_encoder(cfg: DRTConfig) -> ChunkEncoder | None:
    """config key_encoder = n > 0: the landmark keys come from an encoder of n layers of their own
    (reading key_context slots of the chunk before), so that retrieval can be trained without
    moving the memory K/V that the upper layers and the copy head read. None: the chunk encoder's."""
    return (ChunkEncoder(cfg, layers=cfg.key_encoder, memory=False, context=cfg.key_context > 0)
            if cfg.key_encoder else None)


def query_encoder(cfg: DRTConfig) -> ChunkEncoder | None:
    """config query_encoder = n > 0: an encoder of n layers over the chunk a landmark closes, whose
    features the landmark queries add (query_projections). None without the option."""
    return ChunkEncoder(cfg, layers=cfg.query_encoder, memory=False) if cfg.query_encoder else None


def query_projections(cfg: DRTConfig) -> nn.ModuleList | None:
    """With config query_encoder, per group the projection of the query encoder's features added
    to the landmark query, zero at init (a loaded model scores as before until trained)."""
    D = cfg.hidden_size
    return nn.ModuleList([ZeroLinear(D, D, bias=False) for _ in cfg.upper_groups]) if cfg.query_encoder else None


def key_tail(h: torch.Tensor, m: int) -> torch.Tensor:
    """h [..., S, D] lower-layer states of chunks -> [..., m, D]: the last m real slots of each (the
    landmark slot is not one), what the key encoder of the chunk after reads (config key_context)."""
    S = h.shape[-2]
    return h[..., S - 1 - m: S - 1, :]


def key_contexts(h: torch.Tensor, m: int, first: torch.Tensor | None = None) -> torch.Tensor:
    """h [B, C, S, D]: lower-layer states of B runs of C consecutive chunks -> [B*C, m, D], the
    key_tail of the chunk before each; first [B, m, D]: that of each run's first chunk (the
    stream's chunk before it), zeros if None."""
    B, C, _, D = h.shape
    first = h.new_zeros(B, 1, m, D) if first is None else first.view(B, 1, m, D).to(h.dtype)
    return torch.cat([first, key_tail(h, m)[:, :-1]], dim=1).reshape(B * C, m, D)
