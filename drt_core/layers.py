"""The layers every block is made of: RMSNorm, the SwiGLU MLP, a linear layer that starts at zero
(an added path that leaves a loaded model's outputs as they were until it trains), the pre-norm
transformer block, and `OwnInit`, the mark of a module that initialises its own parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import KVWindow, SelfAttention

if TYPE_CHECKING:
    from .hf_config import DRTConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).to(x.dtype)


class ZeroLinear(nn.Linear):
    """A linear map initialised to zero (_init_weights): an added path that starts as a no-op."""


class MLP(nn.Module):
    """SwiGLU feed-forward, no bias."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class OwnInit(nn.Module):
    """A module with parameters of its own beside its layers (an extension's biases, gates,
    scales): `reset_parameters` gives them their initial values, and the model's `_init_weights`
    calls it; its Linear and RMSNorm layers are initialised as every other."""

    def reset_parameters(self) -> None:
        raise NotImplementedError


class Block(nn.Module):
    """Pre-norm transformer block: x += Attn(norm(x)); x += MLP(norm(x))."""

    def __init__(self, cfg: DRTConfig, rope: bool = False, window: int | None = None, attn: nn.Module | None = None):
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.attn = attn if attn is not None else SelfAttention(cfg, rope=rope, window=window)
        self.norm2 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, pos0: int = 0, cache: KVWindow | None = None):
        x = x + self.attn(self.norm1(x), pos0, cache)
        return x + self.mlp(self.norm2(x))
