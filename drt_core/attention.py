"""Causal self-attention over a token stream, as every model here runs it: ALiBi with a sliding
window (DRT's lower and upper layers, the sliding_window baseline) or RoPE with full causal
attention (full_attention), in two modes that give the same numbers: the batch forward, blockwise
over the window, and the engine's streaming step against a ring buffer of the last keys (KVWindow).
Landmark Attention (landmark.py) subclasses SelfAttention."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

if TYPE_CHECKING:
    from .hf_config import DRTConfig


NEG_INF = float("-inf")


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """2^(-8(i+1)/H) for i = 0..H-1 (the reference's geometric formula, spec §1.3)."""
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / num_heads) for i in range(num_heads)])


def rope_cos_sin(n: int, dim: int, theta: float, device, dtype=torch.float32):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    t = torch.arange(n, device=device, dtype=torch.float32)
    f = torch.outer(t, inv)  # [n, dim/2]
    emb = torch.cat([f, f], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., n, d]; cos/sin [n, d]."""
    x1, x2 = x.chunk(2, dim=-1)
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def window_bias(q_pos: torch.Tensor, k_pos: torch.Tensor, slopes: torch.Tensor, window: int | None):
    """Additive attention bias [H, ..., Tq, Tk]: ALiBi -slope*(i-j) inside the causal window, -inf
    outside (future keys, keys older than `window`, and padding keys at negative positions).

    q_pos [..., Tq], k_pos [..., Tk] are absolute positions. window=None means unlimited."""
    dist = q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)  # [..., Tq, Tk]
    ok = (dist >= 0) & (k_pos.unsqueeze(-2) >= 0)
    if window is not None:
        ok &= dist <= window
    bias = -slopes.view(-1, *([1] * dist.dim())) * dist.unsqueeze(0).float()
    return bias.masked_fill(~ok.unsqueeze(0), NEG_INF)


def _band(H: int, W: int, block: int, slopes: torch.Tensor, device) -> torch.Tensor:
    """The additive bias [H, block, W + block] of a block of queries against the W keys before it and
    its own: ALiBi -slope * (i - j) inside each query's causal window of W keys, -inf outside. The
    same for every block: block b's keys start at b * block - W (blocks nearer the start take its
    right-hand columns)."""
    qi = torch.arange(block, device=device)
    kj = torch.arange(W + block, device=device)
    dist = W + qi[:, None] - kj[None, :]  # query position - key position
    ok = (dist >= 0) & (dist <= W)
    return (-slopes.view(-1, 1, 1).float() * dist.float()).masked_fill(~ok, NEG_INF)


def _window_blocks(T: int, W: int, block: int):
    """(query start, query end, first key, the band's first column) of each block of queries."""
    for a in range(0, T, block):
        k0 = max(0, a - W)
        yield a, min(T, a + block), k0, W - (a - k0)


def _no_autocast(device: torch.device):
    if device.type in ("cpu", "cuda"):
        return torch.autocast(device.type, enabled=False)
    return nullcontext()


class _WindowAttention(torch.autograd.Function):
    """softmax(q k^T / sqrt(d) + ALiBi) v over each query's causal window of W keys, block by block
    of queries against their keys (views: no unfolded copies of k and v). Saves q, k, v, the output
    and its log-sum-exp, as flash attention does, instead of every block's scores and probabilities:
    the backward recomputes them, a block at a time. Scores and softmax in fp32 (at least)."""

    @staticmethod
    def forward(ctx, q, k, v, slopes, W: int, block: int):
        B, H, T, d = q.shape
        scale = 1.0 / math.sqrt(d)
        with _no_autocast(q.device), torch.no_grad():
            band = _band(H, W, block, slopes, q.device)
            acc = torch.promote_types(q.dtype, torch.float32)
            qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
            # the output in [B, T, H, d] memory: the caller's transpose(1, 2).reshape(B, T, D) is a view,
            # and the output projection then saves this same storage
            o = q.new_empty(B, T, H, d)
            lse = torch.empty(B, H, T, 1, dtype=acc, device=q.device)
            for a, e, k0, c0 in _window_blocks(T, W, block):
                s = torch.matmul(qc[:, :, a:e], kc[:, :, k0:e].transpose(-1, -2)).to(acc)
                s = s.mul_(scale).add_(band[:, : e - a, c0: c0 + e - k0])
                m = torch.logsumexp(s, dim=-1, keepdim=True)
                lse[:, :, a:e] = m
                p = s.sub_(m).exp_().to(v.dtype)
                o[:, a:e] = torch.matmul(p, vc[:, :, k0:e]).transpose(1, 2)
        ctx.save_for_backward(q, k, v, o, lse, slopes)
        ctx.W, ctx.block = W, block
        return o.transpose(1, 2)

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse, slopes = ctx.saved_tensors
        W, block = ctx.W, ctx.block
        B, H, T, d = q.shape
        scale = 1.0 / math.sqrt(d)
        acc = lse.dtype
        with _no_autocast(q.device):
            band = _band(H, W, block, slopes, q.device)
            qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
            doc = do.to(v.dtype).contiguous()
            delta = (doc.to(acc) * o.transpose(1, 2).to(acc)).sum(-1, keepdim=True)  # [B, H, T, 1]
            dq = torch.empty_like(qc)
            dk = torch.zeros_like(kc, dtype=acc)
            dv = torch.zeros_like(vc, dtype=acc)
            for a, e, k0, c0 in _window_blocks(T, W, block):
                qa, ka, va, doa = qc[:, :, a:e], kc[:, :, k0:e], vc[:, :, k0:e], doc[:, :, a:e]
                s = torch.matmul(qa, ka.transpose(-1, -2)).to(acc)
                p = s.mul_(scale).add_(band[:, : e - a, c0: c0 + e - k0]).sub_(lse[:, :, a:e]).exp_()
                dv[:, :, k0:e] += torch.matmul(p.to(v.dtype).transpose(-1, -2), doa)
                dp = torch.matmul(doa, va.transpose(-1, -2)).to(acc)
                ds = p.mul_(dp.sub_(delta[:, :, a:e])).mul_(scale).to(q.dtype)
                dq[:, :, a:e] = torch.matmul(ds, ka)
                dk[:, :, k0:e] += torch.matmul(ds.transpose(-1, -2), qa)
        return dq, dk.to(k.dtype), dv.to(v.dtype), None, None, None


def window_attention(q, k, v, slopes: torch.Tensor, W: int, block: int = 64) -> torch.Tensor:
    """Causal ALiBi attention of q [B, H, T, d] over the last W + 1 positions (itself included) of k, v,
    computed per block of `block` queries; the output [B, H, T, d] (a view of [B, T, H, d] memory).
    The same numbers as scaled_dot_product_attention with window_bias as its mask, in O(T * (W +
    block)) time and with O(T) saved for backward (_WindowAttention)."""
    return _WindowAttention.apply(q, k, v, slopes, W, block)


@dataclass
class KVWindow:
    """Sliding-window KV cache of one self-attention layer: a ring of the last `window` positions.

    k, v: [B, H, window, d]; pos: [window] absolute position held by each slot (-1 = empty)."""

    k: torch.Tensor
    v: torch.Tensor
    pos: torch.Tensor
    next_pos: int = 0

    @classmethod
    def empty(cls, B: int, H: int, window: int, d: int, device, dtype) -> "KVWindow":
        z = torch.zeros(B, H, window, d, device=device, dtype=dtype)
        return cls(z, z.clone(), torch.full((window,), -1, dtype=torch.long, device=device))

    def push(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append new keys [B, H, T, d] (in order); only the last `window` are kept."""
        W = self.k.shape[2]
        T = k.shape[2]
        pos = torch.arange(self.next_pos, self.next_pos + T, device=k.device)
        if T > W:
            k, v, pos = k[:, :, -W:], v[:, :, -W:], pos[-W:]
        slots = pos % W
        self.k[:, :, slots] = k.to(self.k.dtype)
        self.v[:, :, slots] = v.to(self.v.dtype)
        self.pos[slots] = pos
        self.next_pos += T


class SelfAttention(nn.Module):
    """Causal self-attention. ALiBi + sliding window (DRT, sliding_window) or RoPE + full (full_attention).

    Batch mode (cache=None) runs the window blockwise in O(T * (window + block)); streaming mode
    (cache given) attends to the ring buffer plus the new positions, so both give the same numbers."""

    def __init__(self, cfg: DRTConfig, rope: bool = False, window: int | None = None):
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_heads
        self.H, self.d = H, D // H
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.rope = rope
        self.rope_theta = cfg.rope_theta
        self.window = window
        self.register_buffer("slopes", alibi_slopes(H), persistent=False)

    def _split(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.H, self.d).permute(2, 0, 3, 1, 4)
        return q, k, v  # each [B, H, T, d]

    def forward(self, x: torch.Tensor, pos0: int = 0, cache: KVWindow | None = None) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self._split(x)
        if self.rope:
            cos, sin = rope_cos_sin(pos0 + T, self.d, self.rope_theta, x.device, q.dtype)
            q, k = apply_rope(q, cos[pos0:], sin[pos0:]), apply_rope(k, cos[pos0:], sin[pos0:])
        if cache is not None:
            o = self._attend_cached(q, k, v, pos0, cache)
            return self.o(o.transpose(1, 2).reshape(B, T, D))
        if self.rope:  # full causal attention
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = self._attend_blocked(q, k, v)
        return self.o(o.transpose(1, 2).reshape(B, T, D))

    def _attend_blocked(self, q, k, v, block: int = 64):
        """Sliding-window ALiBi attention of the whole sequence, blockwise (window_attention): only
        q, k, v, the output and its log-sum-exp are saved for backward, which recomputes the scores."""
        return window_attention(q, k, v, self.slopes.to(q.device), min(self.window, q.shape[2]), block)

    def _attend_cached(self, q, k, v, pos0: int, cache: KVWindow):
        T = q.shape[2]
        assert cache.next_pos == pos0, f"cache at position {cache.next_pos}, input at {pos0}"
        # until the ring wraps, position p sits in slot p: attend to the filled slots only (a
        # full-attention cache of 64K slots otherwise costs 64K keys per query from the first token)
        n = min(cache.next_pos, cache.k.shape[2])
        ck, cv, cpos = cache.k[:, :, :n], cache.v[:, :, :n], cache.pos[:n]
        keys = torch.cat([ck, k.to(cache.k.dtype)], dim=2)
        vals = torch.cat([cv, v.to(cache.v.dtype)], dim=2)
        q_pos = torch.arange(pos0, pos0 + T, device=q.device)
        k_pos = torch.cat([cpos, q_pos])
        if self.rope:
            ok = (k_pos[None, :] <= q_pos[:, None]) & (k_pos[None, :] >= 0)
            bias = torch.zeros(ok.shape, device=q.device).masked_fill(~ok, NEG_INF)[None]
        else:
            bias = window_bias(q_pos, k_pos, self.slopes.to(q.device), self.window)
        o = F.scaled_dot_product_attention(q, keys.to(q.dtype), vals.to(q.dtype), attn_mask=bias.to(q.dtype)[None])
        cache.push(k, v)
        return o
