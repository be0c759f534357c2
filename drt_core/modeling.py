"""The Differentiable Retrieval Transformer (DRT) and its baselines, top to bottom.

Hu et al., "Efficient Length-Generalizable Attention via Causal Retrieval for Long-Context Language
Modeling", ICML 2025 (arXiv 2410.01651); docs/spec.md §1-§3 is the precise reading.

Layout of a DRT forward pass (B batch, L real tokens, C chunks, S = chunk_size = 64, T = C*S):
    ids [B, L] --pad to C*63, insert a landmark after every 63 tokens--> [B, T]
    lower layers: sliding-window causal self-attention with ALiBi over augmented positions
    chunk encoder: per chunk, bidirectional attention with RoPE over the S slots
        landmark key  l_c = E[:, c, S-1]                  [B, C, D]
        chunk memory  K = E W_K, V = E W_V (real slots)    [B, C, S-1, D], shared by all upper layers
    for each group g: retrieval with q_c = RMSNorm_g(h[:, c, S-1]) against l_e, e < c,
        top-k (+Gumbel noise in training), fusion weights = softmax of clean scores over the selected;
        row c serves chunk c+1; then the group's upper layers:
            a = x + SelfAttn(norm1(x));   y = a + MLP(norm2(a + GCA(a)))   (GCA bypasses the residual)
    final norm, tied LM head; logits returned for real tokens only [B, L, V].

softmax_one: the reference code zeroes the landmark slot of K/V, which is exactly softmax-off-by-one
over the 63 real keys (spec §3.3). We keep only the real keys and pass softmax_one to the operator,
which is the same function without storing the zero slot; softmax_one=False gives vanilla softmax.

Baselines (config.arch): "sliding_window" and "full_attention" run on the raw token stream (no
landmarks); "landmark" is Landmark Attention (drt_core/landmark.py); "fixed_retriever" is this DRT
with the retrieval scores replaced by cosine similarities of a frozen MiniLM embedding of each
chunk's text (RPT-style).
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from kernels.gca import gca

from .config import DRTConfig

NEG_INF = float("-inf")


# ----------------------------------------------------------------------------------------------
# building blocks


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


def smear(k: torch.Tensor, logit: torch.Tensor) -> torch.Tensor:
    """Smeared keys (Olsson et al., 2022, "In-context learning and induction heads"): per head h,
    k'[t] = a_h k[t] + (1 - a_h) k[t-1] with a_h = sigmoid(logit_h) and k[-1] = 0.

    k [B, H, T, d] (or [..., H, T, d]), logit [H]. A head that mixes in the previous position's key
    can match "the token before this one", so one layer can copy (an induction head) instead of two."""
    a = torch.sigmoid(logit.float()).to(k.dtype).view(-1, 1, 1)
    return a * k + (1 - a) * F.pad(k, (0, 0, 1, 0))[..., :-1, :]


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
        # smeared keys: the ring must also hold the predecessor of the oldest key in the window
        self.smear = nn.Parameter(torch.full((H,), cfg.smear_init)) if cfg.smear_keys else None

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
        if self.smear is not None:
            k = smear(k, self.smear)
        if self.rope:  # full causal attention
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = self._attend_blocked(q, k, v)
        return self.o(o.transpose(1, 2).reshape(B, T, D))

    def _attend_blocked(self, q, k, v, block: int = 64):
        B, H, T, d = q.shape
        W = min(self.window, T)  # no key lies further back than T - 1: a wider window is full attention
        nb = -(-T // block)
        pad_r = nb * block - T
        if pad_r:
            q, k, v = (F.pad(t, (0, 0, 0, pad_r)) for t in (q, k, v))
        span = W + block
        # keys for block i: positions [i*block - W, i*block + block)
        kp = F.pad(k, (0, 0, W, 0)).unfold(2, span, block).transpose(-1, -2)  # [B, H, nb, span, d]
        vp = F.pad(v, (0, 0, W, 0)).unfold(2, span, block).transpose(-1, -2)
        qb = q.view(B, H, nb, block, d)
        starts = torch.arange(nb, device=q.device) * block
        q_pos = starts[:, None] + torch.arange(block, device=q.device)  # [nb, block]
        k_pos = starts[:, None] - W + torch.arange(span, device=q.device)  # [nb, span]
        bias = window_bias(q_pos, k_pos, self.slopes.to(q.device), W).to(q.dtype)  # [H, nb, block, span]
        o = F.scaled_dot_product_attention(qb, kp, vp, attn_mask=bias.unsqueeze(0))
        return o.reshape(B, H, nb * block, d)[:, :, :T]

    def _attend_cached(self, q, k, v, pos0: int, cache: KVWindow):
        T = q.shape[2]
        assert cache.next_pos == pos0, f"cache at position {cache.next_pos}, input at {pos0}"
        # until the ring wraps, position p sits in slot p: attend to the filled slots only (a
        # full-attention cache of 64K slots otherwise costs 64K keys per query from the first token)
        n = min(cache.next_pos, cache.k.shape[2])
        ck, cv, cpos = cache.k[:, :, :n], cache.v[:, :, :n], cache.pos[:n]
        if self.smear is not None:  # the ring holds raw keys: put them in position order, then smear
            assert self.window is None or cache.k.shape[2] > self.window, "smeared keys need a ring of window + 1"
            order = cpos.argsort()
            ck, cv, cpos = ck[:, :, order], cv[:, :, order], cpos[order]
        keys = torch.cat([ck, k.to(cache.k.dtype)], dim=2)
        vals = torch.cat([cv, v.to(cache.v.dtype)], dim=2)
        if self.smear is not None:  # the oldest key's predecessor is gone, but no query sees that key
            keys = smear(keys, self.smear)
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
    """Landmark keys and the K/V chunk memory shared by every upper layer (spec §1.3 step 3)."""

    def __init__(self, cfg: DRTConfig, layers: int | None = None, memory: bool = True, context: bool = False):
        super().__init__()
        D = cfg.hidden_size
        self.prenorm = RMSNorm(D, cfg.rms_eps)
        self.context = ContextAttention(cfg) if context else None  # config key_context
        self.layers = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg.encoder_layers if layers is None else layers)])
        self.norm = RMSNorm(D, 1e-6)
        self.memory = memory  # False: a query encoder (config query_encoder), landmark states only
        self.k_proj = nn.Linear(D, D, bias=False) if memory else None
        self.v_proj = nn.Linear(D, D, bias=False) if memory else None
        self.H = cfg.num_heads
        # smeared memory keys: a GCA head can match the slot before the one it reads (copying)
        self.smear = nn.Parameter(torch.full((self.H,), cfg.smear_init)) if cfg.smear_keys and memory else None

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
        k = self.k_proj(real)
        if self.smear is not None:  # within each chunk: [N, S-1, H, d] -> heads first and back
            N, S1, D = k.shape
            k = smear(k.view(N, S1, self.H, D // self.H).transpose(1, 2), self.smear).transpose(1, 2).reshape(N, S1, D)
        return e[:, -1], k, self.v_proj(real)


class GCA(nn.Module):
    """Grouped Cross Attention of one upper layer: per-layer Q/O projections and pre-norm; the
    retrieved chunks, their memory and weights come from the group (shared by its layers)."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D = cfg.hidden_size
        self.H, self.d = cfg.num_heads, D // cfg.num_heads
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.q = nn.Linear(D, D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.softmax_one = cfg.softmax_one
        self.backend = cfg.gca_backend

    def forward(self, x: torch.Tensor, mem_k: torch.Tensor, mem_v: torch.Tensor, w: torch.Tensor):
        """x: [Z, M, D] query rows (one query chunk, or its first M rows while decoding);
        mem_k, mem_v: [Z, H, K, N, d] gathered memory; w: [Z, K]. Returns [Z, M, D]."""
        Z, M, D = x.shape
        q = self.q(self.norm(x)).view(Z, M, self.H, self.d).transpose(1, 2)  # [Z, H, M, d]
        o = gca(q, mem_k.to(q.dtype), mem_v.to(q.dtype), w.to(q.dtype), softmax_one=self.softmax_one,
                backend=self.backend)
        return self.o(o.transpose(1, 2).reshape(Z, M, D))


class UpperBlock(nn.Module):
    """a = x + SelfAttn(norm1(x));  y = a + MLP(norm2(a + GCA(a)))  -- GCA is not on the residual."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.attn = SelfAttention(cfg, window=cfg.window)
        self.gca = GCA(cfg)
        self.norm2 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, gca_fn, pos0: int = 0, cache: KVWindow | None = None):
        """gca_fn(a) -> GCA contribution for every position of a (zeros where nothing is served)."""
        a = x + self.attn(self.norm1(x), pos0, cache)
        return a + self.mlp(self.norm2(a + gca_fn(self.gca, a)))


class CopyHead(nn.Module):
    """Pointer over the tokens of the retrieved chunks (config copy_head; our extension, not in the
    paper). One head attends from a token's final state to the slots of the chunks its retrieval
    row selected, with the same fusion weights as GCA (softmax-one per chunk, times w). Its query
    reads the token's final state and the token's own embedding; the key of slot s reads the chunk
    memory's K[s], K[s-1] and the embedding of the token in slot s-1. So the head can point at "the
    slot after the one holding my token" (an induction head, linear in the embeddings, which unlike
    the contextual states are nearly orthogonal between tokens) as well as at a matching slot. A
    gate g mixes it into the LM:

        p(y) = (1 - g P) softmax(logits)(y) + g * sum of the pointer's weights on slots holding y

    with P the pointer's total weight (< 1: the softmax-one null slots and unused rows give their
    share back to the LM, so p sums to 1 and a chunk with nothing retrieved gets the plain LM).
    The copied token gets the answer gradient directly (pointer-generator networks, See et al.,
    2017), which copying through GCA -> MLP -> residual did not get at our scale
    (docs/history/2026-11-29-to-12-01-model-rounds.md).

    Options: copy_bigram adds the token before the query's (query) and the token two slots back
    (key), so a repeated digit no longer confuses it, and lets the gate read the pointer-weighted
    embedding of what it would copy (an answer's end); copy_global replaces the per-chunk softmaxes
    by one softmax-one over all k * N slots with log w as each chunk's prior, so a sharp match in a
    chunk of small fusion weight can still take the whole pointer.

    copy_match = n > 0 adds what the learned matches only approximate: the exact length L <= n of
    the common suffix of the text ending at the query (its own token first) and the text ending
    just before the slot (within the slot's chunk, or its span with copy_span; pad ids never match), as a learned score bias
    per length, and, for the gate, the longest L among the retrieved slots (a learned gate bias
    per length). Once the first digits of a passkey are written, the slot that continues them is
    the only one with a long match, however many chunks share the fusion weight.

    copy_recall = J > 0 lets the pointer look a value up by its key: for each slot, the longest
    n-gram (<= RECALL_CAP tokens) ending o + 1 slots before it (o < J) that also occurs in the
    query's recent text (the chunk before the query's and its own chunk up to the query: the
    question, then the answer so far), with a learned bias per (o, length); the gate reads the
    largest such bias among the readable slots. "the magic number for amber falcon is 52..." then
    gets the bias of a 5-gram of the question two slots before "5", where a distractor needle
    of another key gets that of a 3-gram. copy_recall_age = A > 0 adds a bias per (o, length, age)
    with the age of the n-gram's latest occurrence on the query side in log2 buckets (0, 1-2,
    3-6, ..., the last open): in a 2-hop answer "v1; v2", v2's slot recalls the v1 just written
    and v1's slot the v0 of the question, longer ago; lengths alone tie the two.

    copy_qk_cap = c > 0 soft-caps the learned query-key scores at +-c (c * tanh(s / c)) before the
    exact-feature biases are added. Trained, those scores spread over tens and saturate the softmax,
    so the right slot got no gradient and the recall biases could never outgrow them (RESULTS.md
    §5, round 10).

    copy_span = E > 0 extends each retrieved chunk, for the pointer only, by the first E slots of
    the chunk after it (always in the past: a selection serving chunk c reads chunks < c - 1), so
    a value written across a chunk boundary can be copied to its end; the slots' contexts (the
    previous tokens, the n-gram features) run on across the boundary. copy_lead = P > 0 does the
    same backwards: the last P slots of the chunk before each retrieved one come first, so the
    first slots of a retrieved chunk have the text that leads into them as context ("... the
    passkey is" | " 894772."), and a value that starts before the chunk can be copied whole."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, d = cfg.hidden_size, cfg.head_dim
        self.d = d
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.q = nn.Linear(D, d, bias=False)
        self.k = nn.Linear(D, d, bias=False)
        self.k_prev = nn.Linear(D, d, bias=False)
        self.tok_norm = RMSNorm(D, cfg.rms_eps)
        self.q_tok = nn.Linear(D, d, bias=False)
        self.k_tok = nn.Linear(D, d, bias=False)
        self.gate = nn.Linear(D, 1)
        self.bigram = cfg.copy_bigram
        self.global_softmax = cfg.copy_global
        if self.bigram:  # config copy_bigram: match (token before, token) against (slot s-2, slot s-1)
            self.q_tok2 = nn.Linear(D, d, bias=False)
            self.k_tok2 = nn.Linear(D, d, bias=False)
            self.gate_tok = nn.Linear(D, 1, bias=False)  # reads the token the pointer would copy
        self.qk_cap = cfg.copy_qk_cap
        self.match = cfg.copy_match
        if self.match:  # config copy_match: biases per exact suffix-match length (0..n), zero at init
            self.match_bias = nn.Parameter(torch.zeros(self.match + 1))
            self.match_gate = nn.Parameter(torch.zeros(self.match + 1))
        self.recall = cfg.copy_recall
        if self.recall:  # config copy_recall: biases per (offset, recalled n-gram length), zero at init
            self.recall_bias = nn.Parameter(torch.zeros(self.recall, RECALL_CAP + 1))
            self.recall_gate = nn.Parameter(torch.zeros(1))
        self.ages = cfg.copy_recall_age
        if self.ages:  # config copy_recall_age: and per (offset, length, age bucket), zero at init
            self.recall_age_bias = nn.Parameter(torch.zeros(self.recall, RECALL_CAP + 1, self.ages))

    def forward(self, h: torch.Tensor, emb: torch.Tensor, mem_k: torch.Tensor, prev_emb: torch.Tensor,
                w: torch.Tensor, bigram: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                match: torch.Tensor | None = None, recall: torch.Tensor | None = None):
        """h [Z, M, D] final states (before the final norm) and emb [Z, M, D] the embeddings of the
        tokens at those positions; mem_k [Z, k, N, D] the memory keys of the slots the pointer reads
        (per selected chunk its N slots, after copy_lead of the chunk before and before copy_span
        of the chunk after) and prev_emb
        [Z, k, N, D] the embeddings of the token before each slot (pad before slot 0); w [Z, k]
        fusion weights. With copy_bigram, `bigram` = (the embeddings of the real token before each
        position [Z, M, D], of the token two slots before each slot [Z, k, N, D], of each slot's own
        token [Z, k, N, D]). With copy_match, `match` [Z, M, k, N] the suffix-match lengths
        (suffix_match); with copy_recall, `recall` [Z, M, k, N] the recalled n-gram lengths ending
        at each slot (recall_lengths; with copy_recall_age, its codes length + (cap + 1) * age). Returns gate logits [Z, M] and pointer weights [Z, M, k, N]
        (float32)."""
        hn = self.norm(h)
        q = self.q(hn) + self.q_tok(self.tok_norm(emb))
        prev = F.pad(mem_k, (0, 0, 1, 0))[..., :-1, :]  # slot s-1's memory key (zero for slot 0)
        keys = self.k(mem_k) + self.k_prev(prev) + self.k_tok(self.tok_norm(prev_emb))
        if self.bigram:
            q_prev_emb, prev2_emb, slot_emb = bigram
            q = q + self.q_tok2(self.tok_norm(q_prev_emb))
            keys = keys + self.k_tok2(self.tok_norm(prev2_emb))
        s = torch.einsum("zmd,zjnd->zmjn", q.float(), keys.float()) / math.sqrt(self.d)
        if self.qk_cap:  # config copy_qk_cap: bounded, so the exact features below can outweigh them
            s = self.qk_cap * torch.tanh(s / self.qk_cap)
        if self.match:
            match = match.long()
            s = s + MATCH_SCALE * self.match_bias.float()[match]
        if self.recall:  # slot s reads the n-gram ending at slot s - 1 - o, for o < J
            J, N = self.recall, recall.shape[-1]
            padded = F.pad(recall.long(), (J, 0))
            table = self.recall_bias.float()
            if self.ages:  # one table over codes length + (cap + 1) * age
                table = (table[:, None, :] + self.recall_age_bias.float().transpose(1, 2)).flatten(1)
            rb = sum(table[o][padded[..., J - 1 - o: J - 1 - o + N]] for o in range(J))
            s = s + MATCH_SCALE * rb
        if self.global_softmax:  # one softmax-one over every slot, each chunk's log weight as a prior
            wf = w.float()[:, None, :, None]
            s = (s + torch.log(wf.clamp_min(1e-30))).masked_fill(wf <= 0, float("-inf"))
            p = _softmax_one(s.flatten(-2)).view_as(s)
        else:  # softmax-one per chunk, times the chunk's fusion weight (as GCA)
            p = _softmax_one(s) * w.float()[:, None, :, None]
        gate = self.gate(hn).squeeze(-1).float()
        if self.bigram:  # the gate also sees the (pointer-weighted) token it would copy
            what = torch.einsum("zmjn,zjnd->zmd", p, self.tok_norm(slot_emb).float())
            gate = gate + self.gate_tok(what.to(hn.dtype)).squeeze(-1).float()
        if self.match:  # the gate sees the longest match among the slots the pointer can read
            longest = (match * (w > 0)[:, None, :, None]).flatten(-2).amax(-1)
            gate = gate + MATCH_SCALE * self.match_gate.float()[longest]
        if self.recall:  # the gate sees the strongest recall among the slots the pointer can read
            strongest = rb.masked_fill((w <= 0)[:, None, :, None], float("-inf")).flatten(-2).amax(-1)
            gate = gate + MATCH_SCALE * self.recall_gate.float() * strongest.clamp_min(0)
        return gate, p


MATCH_SCALE = 10.0  # copy_match biases are stored / 10: Adam then moves them at the pace of the scores


def suffix_match(q_ctx: torch.Tensor, k_ctx: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Exact suffix-match lengths for the copy head (config copy_match).

    q_ctx [Z, M, n]: the tokens ending at each query position, newest first (its own token at 0);
    k_ctx [Z, k, N, n]: the tokens before each slot, newest first (slot s-1's token at 0).
    Returns L [Z, M, k, N] uint8: the largest l <= n with q_ctx[..., :l] == k_ctx[..., :l], a pad
    id matching nothing."""
    Z, M, n = q_ctx.shape
    L = torch.zeros(Z, M, *k_ctx.shape[1:3], dtype=torch.uint8, device=q_ctx.device)
    alive = None
    for i in range(n):
        q = q_ctx[:, :, i][:, :, None, None]
        eq = (q == k_ctx[:, None, :, :, i]) & (q != pad_id)
        alive = eq if alive is None else alive & eq
        if not alive.any():
            break
        L += alive
    return L


RECALL_CAP = 6  # copy_recall: recalled n-grams are counted up to this length


def recall_lengths(slot_toks: torch.Tensor, ctx: torch.Tensor, upto: torch.Tensor, pad_id: int,
                   cap: int = RECALL_CAP, ages: int = 0) -> torch.Tensor:
    """For the copy head's copy_recall: slot_toks [Z, k, N] the retrieved chunks' tokens; ctx [Z, X]
    the query side's text (the chunk before and the query's own chunk); upto [M] the last index of
    ctx each query position may read (-1: none). Returns R [Z, M, k, N] uint8: the length (<= cap)
    of the longest n-gram ending at slot a that occurs in ctx[:upto[m] + 1] (pad ids match nothing).
    Exact and causal: the match ending at ctx index x reads ctx[<= x] only.

    With ages = A > 0 (copy_recall_age), R + (cap + 1) * b instead: b the age upto[m] - x of the
    latest such occurrence (ending at x) in log2 buckets, min(A - 1, floor(log2(age + 1))); b = 0
    where nothing matches."""
    eq = (slot_toks[..., :, None] == ctx[:, None, None, :]) & (slot_toks != pad_id)[..., None]  # [Z, k, N, X]
    run = eq
    total = eq.to(torch.uint8)
    for _ in range(cap - 1):  # a run of t + 1 ends at (a, x) if one of t ends at (a - 1, x - 1)
        run = eq & F.pad(run, (1, 0, 1, 0))[..., :-1, :-1]
        if not run.any():
            break
        total += run
    best = torch.cummax(total, dim=-1).values  # the longest among ctx[: x + 1]
    gather = (upto + 1).clamp_min(0)
    out = F.pad(best, (1, 0))[..., gather]  # [Z, k, N, M]; index 0: nothing readable (upto = -1)
    if ages:  # the latest x holding the running longest: where total reaches it, carried forward
        X = ctx.shape[-1]
        at = torch.arange(X, dtype=torch.int32, device=ctx.device).expand_as(total)
        last = torch.cummax(torch.where((total == best) & (total > 0), at, -1), dim=-1).values
        age = (upto.to(torch.int32)[None, None, None, :] - F.pad(last, (1, 0))[..., gather]).clamp_min(0)
        b = torch.floor(torch.log2(age.float() + 1)).clamp_max(ages - 1).to(torch.uint8)
        out = out + (cap + 1) * (b * (out > 0))
    return out.permute(0, 3, 1, 2).contiguous()


def recall_limits(N: int, device=None) -> torch.Tensor:
    """recall_lengths' `upto` for the S = N + 1 positions of a chunk whose query side is (the chunk
    before, its own chunk), 2N tokens: slot j reads up to index N + j; the landmark reads nothing."""
    return torch.cat([torch.arange(N, 2 * N), torch.tensor([-1])]).to(device)


def slot_contexts(toks: torch.Tensor, pad_id: int, n: int) -> torch.Tensor:
    """toks [..., N] a chunk's token ids -> [..., N, n]: the n tokens before each slot, newest
    first, pad before the chunk's start (the keys' side of suffix_match)."""
    return torch.stack([slot_predecessors(toks, pad_id, i + 1) for i in range(n)], dim=-1)


def _softmax_one(s: torch.Tensor) -> torch.Tensor:
    """exp(s) / (1 + sum exp(s)) over the last dim, stable; rows of -inf give 0."""
    top = s.amax(-1, keepdim=True).clamp_min(0)
    e = torch.exp(s - top)
    return e / (e.sum(-1, keepdim=True) + torch.exp(-top))


def slot_predecessors(toks: torch.Tensor, pad_id: int, n: int = 1) -> torch.Tensor:
    """toks [..., N] a chunk's token ids -> the id n slots before each slot (pad before slot 0)."""
    return F.pad(toks, (n, 0), value=pad_id)[..., :-n]


def mix_copy(logits: torch.Tensor, gate: torch.Tensor, p: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
    """log p(y) of the LM/pointer mixture (CopyHead): logits [..., V]; gate [...]; p [..., R] the
    pointer's weights on R slots; toks [..., R] their token ids (broadcastable to p).
    Returns log-probabilities [..., V] float32 (valid logits: softmax gives back p)."""
    V = logits.shape[-1]
    copy = torch.zeros(*p.shape[:-1], V, device=p.device, dtype=torch.float32)
    copy = copy.scatter_add(-1, toks.expand(p.shape).long(), p.float())
    g = torch.sigmoid(gate.float()).unsqueeze(-1)
    keep = (1 - g * p.float().sum(-1, keepdim=True)).clamp_min(1e-30)
    return torch.logaddexp(torch.log(keep) + torch.log_softmax(logits.float(), -1),
                           torch.log(g * copy + 1e-30))


# ----------------------------------------------------------------------------------------------
# retrieval


def retrieval_scores(query: torch.Tensor, keys: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor):
    """Scores [..., Cq, Ck] = <q, l> / sqrt(D), -inf unless key chunk < query chunk (strictly).

    query [B, Cq, D] landmark states (normed), keys [B, Ck, D]; q_chunk [Cq], k_chunk [Ck] global ids."""
    D = query.shape[-1]
    s = torch.einsum("bcd,bed->bce", query.float(), keys.float()) / math.sqrt(D)
    causal = k_chunk[None, :] < q_chunk[:, None]
    return s.masked_fill(~causal, NEG_INF)


class LexicalScorer(nn.Module):
    """Exact token overlap between a landmark's own chunk and each past chunk (config `lexical`, our
    extension): lex(c, e) = scale_g * sum of w_t over the distinct tokens t that chunks c and e share,
    with w_t = relu(weight_t) learned per vocabulary entry (started from inverse document frequency
    by `train --init-lexical`, so function words start at 0 and stay there) and 0 for the special
    tokens. It is added to the landmark scores of every group, in training and in the engine.

    Why: a 192-wide dense key cannot hold which rare words a chunk contains, and a reader's question
    ("Who is Mr. Darcy?") is answered by the passage that shares its rare words. BM25 finds those;
    the landmark scores alone did not (RESULTS, real questions). A chunk's tokens are already stored
    beside its memory, so the term costs no state; it stays causal (the query reads only the chunk
    its landmark closes, every token of which precedes the landmark).

    Config lexical_doc_df adds, per shared token, doc_g * relu(log((n + 1) / (1 + df))): its
    inverse document frequency over the n chunks before the query (df of them hold it; doc_df).
    Global weights learned on the training corpora cannot know that "Knightley" is on every page
    of Emma; BM25's idf, computed on the document itself, does (measured: docs/history)."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.scale = nn.Parameter(torch.ones(cfg.num_groups))
        # config lexical_doc_df > 0: a shared token also weighs doc_g * relu(log((n + 1) / (1 + df))),
        # its inverse document frequency in this document so far: n past chunks, df of them holding it
        # (a name on every page of this book counts little, a word found in one passage a lot)
        self.doc = nn.Parameter(torch.full((cfg.num_groups,), cfg.lexical_doc_df)) if cfg.lexical_doc_df > 0 else None
        # config lexical_words > 0: a shared WHOLE WORD (drt_core/words.py: case folded, however the
        # BPE cut it) also weighs words_g * relu(log((n + 1) / (1 + df_word))), its idf in the document
        self.words = (nn.Parameter(torch.full((cfg.num_groups,), cfg.lexical_words))
                      if cfg.lexical_words > 0 else None)
        # config lexical_window: the share of that weight given to a query word found not in the key
        # chunk but in the chunk before or after it (word_overlap's neighbours; a plain float, not learned)
        self.window = float(cfg.lexical_window)
        # config lexical_word_carry: a word cut by a chunk boundary is whole in the chunk where it ends
        self.carry = bool(cfg.lexical_word_carry)
        self.pad_id = cfg.pad_token_id
        # a plain tuple, not a buffer: from_pretrained leaves non-persistent buffers uninitialised
        self.special = tuple(sorted({cfg.pad_token_id, cfg.eos_token_id, cfg.lmk_token_id}))
        self._word_tables = None  # (hash, power, start) [V] each: a function of the tokenizer (set_word_tables)

    def set_word_tables(self, tables) -> None:
        """The tokenizer's per-token word tables (drt_core.words.word_tables); by default those of
        the shipped tokenizer, which every checkpoint of this repository uses."""
        self._word_tables = tables

    def word_ids(self, toks: torch.Tensor, chunk: torch.Tensor | None = None, ctx_toks: torch.Tensor | None = None,
                 ctx_chunk: torch.Tensor | None = None) -> torch.Tensor:
        """toks [B, C, N] -> [B, C, N] whole-word ids (drt_core.words.word_ids; 0 where no word ends).

        Config lexical_word_carry, with the rows' chunk indices `chunk` [C]: a word cut by a chunk
        boundary is whole in the chunk where it ends; its first part is read from the row of chunk
        c - 1 in (ctx_toks [B, Ck, N], ctx_chunk [Ck] sorted; default: toks and chunk themselves).
        A row whose chunk before is not there gets no carry."""
        from .words import default_word_tables, word_ids, word_tail

        if self._word_tables is None:
            self._word_tables = default_word_tables(self.weight.shape[0])
        if not self.carry or chunk is None:
            return word_ids(toks, *self._word_tables)
        if ctx_toks is None:
            ctx_toks, ctx_chunk = toks, chunk
        chunk, ctx_chunk = chunk.to(toks.device), ctx_chunk.to(toks.device)
        carry = torch.zeros(toks.shape[:-1], dtype=torch.int64, device=toks.device)
        if ctx_chunk.numel():
            j = torch.searchsorted(ctx_chunk, chunk - 1).clamp(max=ctx_chunk.numel() - 1)  # [C]
            there = ctx_chunk[j] == chunk - 1
            if there.any():
                tails = word_tail(ctx_toks[:, j[there]], *self._word_tables)  # [B, C']
                carry[:, there] = tails
        return word_ids(toks, *self._word_tables, carry=carry)

    def token_weights(self) -> torch.Tensor:
        """w [V]: relu(weight), 0 for the pad, end-of-text and landmark ids."""
        return F.relu(self.weight).index_fill(0, torch.tensor(self.special, device=self.weight.device), 0.0)

    def query_table(self, q_toks: torch.Tensor) -> torch.Tensor:
        """q_toks [..., Cq, N] -> [..., Cq, V]: w_t where t occurs in the query chunk, else 0."""
        V = self.weight.shape[0]
        present = torch.zeros(*q_toks.shape[:-1], V, device=q_toks.device).scatter_(-1, q_toks.long(), 1.0)
        return present * self.token_weights()

    def scores(self, g: int, q_toks: torch.Tensor, k_toks: torch.Tensor, q_chunk: torch.Tensor | None = None,
               k_chunk: torch.Tensor | None = None, block: int = 4096, stats=None) -> torch.Tensor:
        """[B, Cq, Ck] lexical scores of group g; q_toks [B, Cq, N], k_toks [B, Ck, N] token ids
        (keys deduplicated here: each distinct token counts once). Key chunks in blocks of `block`.
        With config lexical_doc_df (and lexical_words), q_chunk [Cq] and k_chunk [Ck] (chunk indices)
        give each query the key chunks before it, over which doc_df counts its tokens (and
        word_overlap its words): the in-document idf terms.

        `stats` (the engine, B = 1, keys = chunks 0..Ck-1): what the streaming engine keeps per
        memory instead of recomputing it over every past chunk at every landmark: `key_tokens` and
        `key_words` [1, Ck, N] (each chunk's distinct token and word ids), and `token_df(items,
        q_chunk)` / `word_df(items, q_chunk)`, the running in-document counts (engine.LexicalStats).
        Same numbers, in time linear in the new chunks rather than in all the past ones."""
        ku = stats.key_tokens if stats is not None else distinct_tokens(k_toks, self.pad_id)
        table = self.query_table(q_toks)  # [B, Cq, V]
        if (self.doc is not None or self.words is not None) and (q_chunk is None or k_chunk is None):
            raise ValueError("config lexical_doc_df and lexical_words need the chunk indices q_chunk and k_chunk")
        if self.doc is not None:
            qd = distinct_tokens(q_toks, self.pad_id)
            q_chunk, k_chunk = q_chunk.to(qd.device), k_chunk.to(qd.device)
            df = stats.token_df(qd, q_chunk) if stats is not None else doc_df(qd, q_chunk, ku, k_chunk)  # [B, Cq, N]
            n = (k_chunk[None, :] < q_chunk[:, None]).sum(-1).to(df.dtype)  # [Cq] past chunks
            idf = F.relu(torch.log((n[None, :, None] + 1.0) / (1.0 + df)))
            V = self.weight.shape[0]
            doc = torch.zeros(*qd.shape[:-1], V, device=qd.device, dtype=idf.dtype).scatter(-1, qd, idf)
            # the special ids count for nothing, as in token_weights
            doc = doc.index_fill(-1, torch.tensor(self.special, device=qd.device), 0.0)
            table = table + self.doc[g] * doc
        s = self.scale[g] * bag_sums(table, ku, block)
        if self.words is not None:
            from .words import template_word_ids

            if stats is not None:
                kw = stats.key_words
            else:
                kw = distinct_tokens(self.word_ids(k_toks, k_chunk), 0)
            qw = self.word_ids(q_toks, q_chunk, k_toks, k_chunk)  # a query chunk's chunk before is a key
            qw = qw.masked_fill(torch.isin(qw, template_word_ids().to(qw.device)), 0)  # not "question", "answer"
            s = s + self.words[g] * word_overlap(qw, q_chunk.to(s.device), kw.to(s.device), k_chunk.to(s.device),
                                                 k_distinct=True, df_fn=None if stats is None else stats.word_df,
                                                 neighbours=self.window)
        return s


def bag_sums(table: torch.Tensor, items: torch.Tensor, block: int = 1 << 16) -> torch.Tensor:
    """table [B, Cq, U], items [B, Ck, N] ids in [0, U) -> [B, Cq, Ck]: for each query row and key
    chunk, the sum of the table's entries at the chunk's N items (repeats counted each time). One
    embedding_bag per row (~10x the speed of gathering a [Cq, Ck * N] index at Ck = 65K), key
    chunks in blocks of `block`; differentiable in the table."""
    B, Cq, _ = table.shape
    Ck = items.shape[1]
    if Ck == 0:
        return table.new_zeros(B, Cq, 0)
    out = []
    for b in range(B):
        w = table[b].transpose(0, 1).contiguous()  # [U, Cq]
        out.append(torch.cat([F.embedding_bag(items[b, a: a + block].long(), w, mode="sum")
                              for a in range(0, Ck, block)]).transpose(0, 1))  # [Cq, Ck]
    return torch.stack(out)


def doc_df(q_toks: torch.Tensor, q_chunk: torch.Tensor, k_toks: torch.Tensor, k_chunk: torch.Tensor) -> torch.Tensor:
    """In how many key chunks before each query chunk each of its tokens occurs: q_toks [B, Cq, N],
    q_chunk [Cq], k_toks [B, Ck, N] (distinct per row: distinct_tokens), k_chunk [Ck] -> [B, Cq, N]
    float, counting key chunk e for query q when k_chunk[e] < q_chunk[q] (causal: only the past).
    Only the query tokens are counted (a presence matrix over their union), so the cost is
    Ck x (distinct query tokens), not Ck x V."""
    B, Cq, N = q_toks.shape
    U, inv = torch.unique(q_toks, return_inverse=True)
    lut = torch.full((int(U.max()) + 1 if len(U) else 1,), -1, dtype=torch.long, device=q_toks.device)
    lut[U] = torch.arange(len(U), device=q_toks.device)
    kt = k_toks.long()
    ki = torch.where(kt < len(lut), lut[kt.clamp(max=len(lut) - 1)], -1)  # [B, Ck, N]: index in U, -1 if none
    Ck = kt.shape[1]
    P = torch.zeros(B, Ck, len(U) + 1, device=q_toks.device).scatter_(-1, ki + 1, 1.0)[..., 1:]
    return past_counts(P, q_chunk, k_chunk).gather(-1, inv.reshape(B, Cq, N))


def past_counts(P: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor) -> torch.Tensor:
    """P [B, Ck, U]: whether key chunk e holds item u -> [B, Cq, U], in how many key chunks before
    each query chunk (k_chunk[e] < q_chunk[q]) it occurs: the df of doc_df and word_overlap."""
    Ck = P.shape[1]
    if Ck and bool((k_chunk == torch.arange(Ck, device=k_chunk.device)).all()):
        # keys are chunks 0..Ck-1 (the batch forward and the engine): a running count, Ck x U
        last = q_chunk.clamp(max=Ck) - 1  # the last key chunk before each query
        return P.cumsum(1)[:, last.clamp(min=0)] * (last >= 0).to(P.dtype)[None, :, None]
    return torch.matmul((k_chunk[None, :] < q_chunk[:, None]).to(P.dtype), P)  # [Cq, Ck] @ [B, Ck, U]


def word_overlap(q_words: torch.Tensor, q_chunk: torch.Tensor, k_words: torch.Tensor, k_chunk: torch.Tensor,
                 *, k_distinct: bool = False, df_fn=None, neighbours: float = 0.0) -> torch.Tensor:
    """[B, Cq, Ck]: for each query chunk and key chunk, the sum over the distinct words they share of
    relu(log((n + 1) / (1 + df))), where n is the number of key chunks before the query
    (k_chunk < q_chunk) and df how many of them hold the word. q_words [B, Cq, N], k_words
    [B, Ck, N]: word ids (LexicalScorer.word_ids; 0 = no word), already distinct per chunk when
    k_distinct. df_fn(U, q_chunk) -> [B, Cq, |U|]: the counts of the sorted query words U when the
    caller keeps them (the engine's running counts); else counted here over the keys. Pairs whose
    key is not before the query get a finite score too: retrieval_scores' -inf masks them. Cost
    Ck x (distinct query words).

    neighbours > 0 (config lexical_window): a key chunk also gets, at this share of their weight,
    the query words that it lacks and that the chunk just before it or just after it holds: a
    passage is wider than one 63-token chunk, and a question's words spread over two or three of
    them. Causal: the chunk after key e counts only for queries after it (k_chunk[e] + 1 <
    q_chunk); neighbours are key rows whose chunk indices follow on (k_chunk sorted)."""
    B, Cq, N = q_words.shape
    Ck = k_words.shape[1]
    qd = distinct_tokens(q_words, 0)
    kd = k_words if k_distinct else distinct_tokens(k_words, 0)
    U, inv = torch.unique(qd, return_inverse=True)  # sorted; the query words (and 0)
    pos = torch.searchsorted(U, kd.reshape(-1)).clamp(max=len(U) - 1).view_as(kd)
    hit = (U[pos] == kd) & (kd != 0)
    Q = torch.zeros(B, Cq, len(U) + 1, device=kd.device).scatter_(
        -1, torch.where(qd != 0, inv.view_as(qd) + 1, 0), 1.0)[..., 1:]
    if df_fn is not None:
        df = df_fn(U, q_chunk).to(Q.dtype)  # [B, Cq, |U|]
    else:
        P = torch.zeros(B, Ck, len(U) + 1, device=kd.device).scatter_(-1, torch.where(hit, pos + 1, 0), 1.0)[..., 1:]
        df = past_counts(P, q_chunk, k_chunk)  # [B, Cq, |U|]
    n = (k_chunk[None, :] < q_chunk[:, None]).sum(-1).to(Q.dtype)  # [Cq] past chunks
    idf = F.relu(torch.log((n[None, :, None] + 1.0) / (1.0 + df)))
    # item 0 is "no query word" (weight 0); a key chunk's distinct words each count once
    table, items = F.pad(Q * idf, (1, 0)), torch.where(hit, pos + 1, 0)  # items [B, Ck, N]: 0 = none
    own = bag_sums(table, items)
    if not neighbours or Ck == 0:
        return own
    # the rows next to each key row, when they hold the next chunk index (item lists, as bag_sums reads
    # them: no [Ck, |U|] matrix, whose size at 16M tokens and a prefill batch's query words is GBs)
    follows = (k_chunk[1:] == k_chunk[:-1] + 1)[None, :, None].to(items.device)
    prev = torch.cat([torch.zeros_like(items[:, :1]), items[:, :-1] * follows], 1)
    nxt = torch.cat([items[:, 1:] * follows, torch.zeros_like(items[:, :1])], 1)
    only_prev = bag_sums(table, distinct_tokens(torch.cat([prev, items], -1), 0)) - own
    both = bag_sums(table, distinct_tokens(torch.cat([prev, items, nxt], -1), 0)) - own
    after_next = (k_chunk[None, :] + 1 < q_chunk[:, None])  # [Cq, Ck]: the chunk after the key is past too
    return own + neighbours * torch.where(after_next[None], both, only_prev)


def distinct_tokens(toks: torch.Tensor, pad_id: int) -> torch.Tensor:
    """toks [..., N] -> the same ids with every repeat within a row replaced by pad_id (sorted)."""
    s = toks.long().sort(-1).values
    rep = torch.zeros_like(s, dtype=torch.bool)
    rep[..., 1:] = s[..., 1:] == s[..., :-1]
    return s.masked_fill(rep, pad_id)


def select_topk(scores: torch.Tensor, k: int, gumbel: bool, generator: torch.Generator | None = None):
    """Top-k chunks per row and their fusion weights.

    Selection uses scores + Gumbel(0,1) noise when `gumbel` (training); the weights are always the
    softmax of the CLEAN scores over the selected (spec §2). Rows with fewer than k eligible chunks
    fill the rest with index 0 and weight 0; a row with none gets all-zero weights (no NaN).
    Returns idx [..., k] (long), w [..., k] (float32, differentiable through scores)."""
    k = min(k, scores.shape[-1])
    sel = scores
    if gumbel:
        u = torch.rand(scores.shape, device=scores.device, generator=generator).clamp_(1e-20, 1.0)
        sel = scores - torch.log(-torch.log(u))
    idx = sel.detach().topk(k, dim=-1).indices
    w, valid = fusion_weights(scores, idx)
    return idx.masked_fill(~valid, 0), w


def fusion_weights(scores: torch.Tensor, idx: torch.Tensor, keep: torch.Tensor | None = None):
    """Softmax of the clean scores over the selected chunks idx [..., k]; slots that are not
    eligible (score -inf) or not kept get weight 0. Returns (w, valid)."""
    picked = scores.gather(-1, idx)
    valid = torch.isfinite(picked) if keep is None else torch.isfinite(picked) & keep
    return torch.softmax(picked.masked_fill(~valid, -1e30), dim=-1) * valid, valid


def force_selection(idx: torch.Tensor, scores: torch.Tensor, forced: torch.Tensor, oracle: bool = False):
    """Teacher-forced retrieval (fine-tuning only): row c's selection becomes the chunks
    forced[..., c, :] (-1 = none) followed by its best natural picks, k in all. The fusion weights
    are recomputed as the softmax of the clean scores over the new selection, so the loss still
    trains the forced chunks' scores against the chunks they compete with.

    With `oracle`, forced rows read ONLY their forced chunks (equal weights, no gradient to the
    scores) and the other rows read nothing (weight 0): a warm-up that trains the copy path (GCA
    projections, chunk memory, MLPs) where retrieval is useful, without the noise of random picks
    elsewhere (against which the model learns to switch GCA off through softmax_one's null slot).

    idx [..., C, k] (descending rank, as from select_topk), scores [..., C, Ce],
    forced [..., C] or [..., C, F]. Returns (idx, w) like select_topk."""
    forced = forced.to(idx.device)
    if forced.dim() == idx.dim() - 1:
        forced = forced.unsqueeze(-1)
    k, F_ = idx.shape[-1], forced.shape[-1]
    cand = torch.cat([forced, idx], dim=-1)  # [..., C, F + k]: forced first, then by rank
    n = F_ + k
    pos = torch.arange(n, device=idx.device)
    dup = ((cand.unsqueeze(-1) == cand.unsqueeze(-2)) & (pos[None, :] < pos[:, None])).any(-1)
    keep = (cand >= 0) & ~dup
    order = torch.where(keep, pos, pos + n).argsort(dim=-1)[..., :k]
    new = cand.gather(-1, order).clamp_min(0)
    w, valid = fusion_weights(scores, new, keep.gather(-1, order))
    if oracle:  # forced rows read only their forced chunks; the other rows read nothing
        is_forced = (order < F_) & valid
        nf = is_forced.sum(-1, keepdim=True)
        w = is_forced.to(w.dtype) / nf.clamp_min(1)
    return new.masked_fill(~valid, 0), w


def _group_column(t: torch.Tensor | None, g: int, per_group: bool) -> torch.Tensor | None:
    """Group g's share of forced / target chunks [B, C, F]: all of them, or with per_group
    (`train --group-targets`) column g alone ([B, C, 1]; all -1 when F <= g)."""
    if t is None or not per_group:
        return t
    if t.dim() == 2:
        t = t.unsqueeze(-1)
    return t[..., g: g + 1] if g < t.shape[-1] else torch.full_like(t[..., :1], -1)


def copy_selection(sels: list[tuple[torch.Tensor, torch.Tensor]], mode: str = "last"):
    """The chunks the copy head reads, from each group's (idx [..., k], w [..., k]): the last
    group's (config copy_groups "last"), or with "all" every group's side by side ([..., G*k]),
    each group's fusion weights divided by G, so the pointer's total weight stays <= 1 and a chunk
    two groups select weighs the mean of their weights (copy_global: exactly, as one read)."""
    if mode == "last" or len(sels) == 1:
        return sels[-1]
    G = len(sels)
    return torch.cat([i for i, _ in sels], dim=-1), torch.cat([w for _, w in sels], dim=-1) / G


def forced_retrieval_loss(scores: torch.Tensor, forced: torch.Tensor, distractors: float = 1.0) -> torch.Tensor | None:
    """-log P(forced chunks) under the softmax of a row's scores over all eligible chunks, mean over
    the rows with a forced chunk. scores [B, C, Ce], forced [B, C] or [B, C, F] (-1 = none).

    distractors = M (`train --retrieval-distractors`, our extension) counts every other chunk M
    times, as if the haystack were M times longer with text like it: the loss of a row then is
    log(sum_forced e^s + M * sum_others e^s) - log(sum_forced e^s), and a margin that suffices
    against the C chunks of a training row no longer zeroes it, when the engine will rank M*C."""
    if forced.dim() == 2:
        forced = forced.unsqueeze(-1)
    rows = (forced >= 0).any(-1)
    if not bool(rows.any()):
        return None
    s = scores[rows].float()  # [R, Ce]
    f = forced[rows]  # [R, F]
    fs = s.gather(-1, f.clamp_min(0)).masked_fill(f < 0, NEG_INF)
    if distractors != 1.0:
        target = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, f.clamp_min(0), f >= 0)
        s = s + (~target) * math.log(distractors)
    return (torch.logsumexp(s, -1) - torch.logsumexp(fs, -1)).mean()


# ----------------------------------------------------------------------------------------------
# the model


@dataclass
class DRTOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    # per group: dict(idx [B, C, k], weights [B, C, k], scores [B, C, C]); row c serves chunk c+1
    retrieval: list | None = None
    # with forced_chunks: mean cross-entropy of the retrieval scores of the forced rows against the
    # forced chunk (over all eligible chunks), averaged over groups; an optional training signal
    retrieval_loss: torch.Tensor | None = None


class DRTPreTrainedModel(PreTrainedModel):
    config_class = DRTConfig
    base_model_prefix = "drt"
    _no_split_modules = ["Block", "UpperBlock", "EncoderBlock"]

    def _init_weights(self, module):
        std = self.config.init_std
        if isinstance(module, ZeroLinear):  # a no-op until trained
            nn.init.zeros_(module.weight)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if self.config.pad_token_id is not None:
                with torch.no_grad():
                    module.weight[self.config.pad_token_id].zero_()
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)
        elif isinstance(module, SelfAttention):
            # non-persistent buffer: from_pretrained materialises it with torch.empty_like and relies
            # on _init_weights to fill it, so without this line loaded models had garbage ALiBi slopes
            with torch.no_grad():
                module.slopes.copy_(alibi_slopes(module.H))
        if isinstance(module, CopyHead) and module.match:
            nn.init.zeros_(module.match_bias)
            nn.init.zeros_(module.match_gate)
        if isinstance(module, CopyHead) and module.recall:
            nn.init.zeros_(module.recall_bias)
            nn.init.zeros_(module.recall_gate)
        if isinstance(module, CopyHead) and module.ages:
            nn.init.zeros_(module.recall_age_bias)
        if isinstance(module, LexicalScorer):  # inert until `train --init-lexical` sets the weights
            nn.init.zeros_(module.weight)
            nn.init.ones_(module.scale)
            if module.doc is not None:
                nn.init.constant_(module.doc, self.config.lexical_doc_df)
            if module.words is not None:
                nn.init.constant_(module.words, self.config.lexical_words)
        if isinstance(module, (SelfAttention, ChunkEncoder)) and module.smear is not None:
            # nn.init, not fill_: transformers guards it so that a loaded value is not overwritten
            nn.init.constant_(module.smear, self.config.smear_init)


class DRTForCausalLM(DRTPreTrainedModel):
    """`model(input_ids, labels=None)`: ids WITHOUT landmarks, any length; logits [B, L, V] for the
    real tokens; loss = mean next-token cross-entropy over real tokens (labels as input_ids, -100
    ignored). The baselines of config.arch share this class and its checkpoint format."""

    _tied_weights_keys = {"lm_head.weight": "embed.weight"}

    def __init__(self, config: DRTConfig):
        super().__init__(config)
        cfg = config
        D = cfg.hidden_size
        self.embed = nn.Embedding(cfg.vocab_size, D)
        if cfg.uses_chunks:
            self.lower = nn.ModuleList([Block(cfg, window=cfg.window) for _ in range(cfg.lower_layers)])
            self.encoder = ChunkEncoder(cfg)
            self.lmk_norms = nn.ModuleList([RMSNorm(D, cfg.rms_eps) for _ in cfg.upper_groups])
            # query_key / query_encoder: q += P_g(own-chunk features), P_g zero at init (landmark_query)
            self.query_enc = ChunkEncoder(cfg, layers=cfg.query_encoder, memory=False) if cfg.query_encoder else None
            # key_encoder: the landmark keys come from their own encoder, so that retrieval can be
            # trained without moving the memory K/V that the upper layers and the copy head read
            self.key_enc = (ChunkEncoder(cfg, layers=cfg.key_encoder, memory=False,
                                         context=cfg.key_context > 0) if cfg.key_encoder else None)
            self.query_projs = (nn.ModuleList([ZeroLinear(D, D, bias=False) for _ in cfg.upper_groups])
                                if cfg.query_key or cfg.query_encoder else None)
            self.groups = nn.ModuleList(
                [nn.ModuleList([UpperBlock(cfg) for _ in range(n)]) for n in cfg.upper_groups]
            )
            self.copy_head = CopyHead(cfg) if cfg.copy_head else None
            self.lexical = LexicalScorer(cfg) if cfg.lexical else None
        else:
            depth = cfg.baseline_layers or (cfg.lower_layers + sum(cfg.upper_groups) + 2)
            full = cfg.arch == "full_attention"
            if cfg.arch == "landmark":
                from .landmark import LandmarkAttention

                self.layers = nn.ModuleList([Block(cfg, attn=LandmarkAttention(cfg)) for _ in range(depth)])
            else:
                self.layers = nn.ModuleList(
                    [Block(cfg, rope=full, window=None if full else cfg.window) for _ in range(depth)]
                )
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.lm_head = nn.Linear(D, cfg.vocab_size, bias=False)
        self._fixed_retriever = None
        self.post_init()

    def get_input_embeddings(self):
        return self.embed

    def set_input_embeddings(self, value):
        self.embed = value

    def get_output_embeddings(self):
        return self.lm_head

    def own_chunk_features(self, h: torch.Tensor, keys: torch.Tensor) -> torch.Tensor | None:
        """What a landmark query reads of the chunk it closes (our extension; None without it):
        config query_key, the chunk's landmark key keys [N, D]; query_encoder, the landmark state of
        a separate encoder over the chunk's lower-layer states h [N, S, D]. Every token of a chunk
        precedes its landmark, so either keeps the query causal."""
        if self.query_projs is None:
            return None
        if self.query_enc is not None:
            return self.query_enc(h)[0]
        return keys

    def landmark_query(self, g: int, h: torch.Tensor, own: torch.Tensor | None) -> torch.Tensor:
        """Group g's landmark queries: the group's input at the landmark slots h [..., D], normed
        (spec §1.3), plus, with config query_key or query_encoder, a learned projection of the
        features own [..., D] of the chunk the landmark closes (own_chunk_features). The projection
        starts at zero, so a model given the option scores as before until it is trained."""
        q = self.lmk_norms[g](h)
        if self.query_projs is not None:
            q = q + self.query_projs[g](own.to(q.dtype))
        return q

    def chunk_scores(self, g: int, q: torch.Tensor, keys: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor,
                     q_toks: torch.Tensor | None = None, k_toks: torch.Tensor | None = None,
                     stats=None) -> torch.Tensor:
        """Group g's retrieval scores [B, Cq, Ck]: retrieval_scores(q, keys, ...) (-inf unless the key
        chunk precedes the query's), plus with config lexical the LexicalScorer term, which reads the
        chunks' tokens q_toks [B, Cq, N] and k_toks [B, Ck, N] (chunk_token_ids;
        stats: the engine's running counts, LexicalScorer.scores).
        The one scoring function of the batch forward, scorer_loss, the engine and the benches."""
        s = retrieval_scores(q, keys, q_chunk, k_chunk)
        if self.lexical is not None:
            if q_toks is None or k_toks is None:
                raise ValueError("a lexical model scores chunks with their tokens: pass q_toks and k_toks")
            s = s + self.lexical.scores(g, q_toks.to(s.device), k_toks.to(s.device), q_chunk, k_chunk, stats=stats)
        return s

    def chunk_token_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Real ids [B, L] (or [L]) -> each chunk's token ids [B, C, N] (pads after the last token)."""
        ids = input_ids.view(1, -1) if input_ids.dim() == 1 else input_ids
        aug, C = self.augment(ids)
        S = self.config.chunk_size
        return aug.view(ids.shape[0], C, S)[:, :, : S - 1]

    def lower_states(self, aug: torch.Tensor, start: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Augmented ids [B, T] -> (lower-layer states, token embeddings), each [B, T, D]: what the
        batch forward, model.landmarks and scorer_loss run before the chunk encoder. `start`: the
        ids begin a stream, so the stream preamble (config stream_preamble) comes before them."""
        x, emb, _ = self._lower(aug, start)
        return x, emb

    def _lower(self, aug: torch.Tensor, start: bool = True):
        """lower_states, and the preamble's lower-layer states [B, P, D] (None without one)."""
        emb = self.embed(aug)
        P = self.config.preamble_len if start else 0
        x = self._with_preamble(emb) if P else emb
        for layer in self.lower:
            x = layer(x)
        return (x[:, P:], emb, x[:, :P]) if P else (x, emb, None)

    def _with_preamble(self, emb: torch.Tensor) -> torch.Tensor:
        """[B, T, D] embeddings -> [B, P + T, D], the stream preamble's embeddings first."""
        pre = torch.tensor(self.config.stream_preamble, device=emb.device)
        return torch.cat([self.embed(pre)[None].expand(emb.shape[0], -1, -1).to(emb.dtype), emb], dim=1)

    def preamble_tail(self, pre: torch.Tensor | None) -> torch.Tensor | None:
        """The preamble's lower-layer states [B, P, D] -> what the key encoder reads as the chunk
        before the stream's first chunk (config key_context = m: the last m, zeros before them if
        P < m; encode_chunks' `first`). None without a preamble or without key context."""
        m = self.config.key_context
        if pre is None or not m or self.key_enc is None:
            return None
        tail = pre[:, -m:]
        return F.pad(tail, (0, 0, m - tail.shape[1], 0))

    @torch.no_grad()
    def preamble_caches(self, caches: list) -> torch.Tensor | None:
        """Run the stream preamble through every self-attention layer into `caches` (the engine's
        KVWindow of each layer, lower then upper, empty): what a new stream holds before its first
        token, exactly as the batch forward computes it (no GCA: the preamble belongs to no chunk).
        Returns the key encoder's context of the stream's first chunk ([m, D], preamble_tail) or None."""
        P = self.config.preamble_len
        if not P:
            return None
        x = self._with_preamble(self.embed.weight[:0][None])  # [1, P, D]
        if not self.config.uses_chunks:
            for layer, cache in zip(self.layers, caches):
                x = layer(x, 0, cache)
            return None
        nl = len(self.lower)
        for layer, cache in zip(self.lower, caches[:nl]):
            x = layer(x, 0, cache)
        tail = self.preamble_tail(x)
        uppers = [b for g in self.groups for b in g]
        for layer, cache in zip(uppers, caches[nl:]):
            x = layer(x, _no_gca, 0, cache)
        return None if tail is None else tail[0]

    def encode_chunks(self, h: torch.Tensor, first: torch.Tensor | None = None):
        """h [B, C, S, D] (or [C, S, D]: one run): lower-layer states of runs of C consecutive
        complete chunks; first [B, m, D]: with config key_context = m, the last m real slots of
        the chunk before each run (the stream's carry; zeros if None: the stream's first chunk).
        Returns their landmark keys [..., C, D] (the chunk encoder's, or with config key_encoder
        its own encoder's, which also reads each chunk's predecessor: key_context_of), memory K
        and V [..., C, S-1, D], and what their landmarks' queries read of them ([..., C, D] or
        None, own_chunk_features). The one place the batch forward, model.landmarks, scorer_loss
        and the streaming engine encode chunks."""
        lead, (C, S, D) = h.shape[:-3], h.shape[-3:]
        h4 = h.reshape(-1, C, S, D)
        flat = h4.reshape(-1, S, D)
        keys, mem_k, mem_v = self.encoder(flat)
        if self.key_enc is not None:
            keys = self.key_enc(flat, self.key_context_of(h4, first))[0]
        own = self.own_chunk_features(flat, keys)
        return tuple(None if t is None else t.view(*lead, C, *t.shape[1:]) for t in (keys, mem_k, mem_v, own))

    def key_context_of(self, h: torch.Tensor, first: torch.Tensor | None = None) -> torch.Tensor | None:
        """h [B, C, S, D]: lower-layer states of B runs of C consecutive chunks. Returns what the
        key encoder reads of the chunk before each, [B*C, m, D] (config key_context = m: its last m
        real slots; the landmark slot is not one), or None without the option. first [B, m, D]:
        the context of each run's first chunk (the stream's chunk before it); zeros if None."""
        m = self.config.key_context
        if not m:
            return None
        B, C, S, D = h.shape
        tails = h[:, :, S - 1 - m: S - 1]
        first = h.new_zeros(B, 1, m, D) if first is None else first.view(B, 1, m, D).to(h.dtype)
        return torch.cat([first, tails[:, :-1]], dim=1).reshape(B * C, m, D)

    def init_retrieval_encoders(self, names=("query_enc", "key_enc")) -> None:
        """Start the query / key encoders named as copies of the chunk encoder's layers (their
        landmark states are then the chunk's landmark key, so scores start as before): `train
        --init M --set query_encoder=n` (or key_encoder=n) calls this for the ones M lacks."""
        src = getattr(self, "encoder", None)  # baselines have none (and no encoders to start)
        for name in names:
            enc = getattr(self, name, None)
            if enc is None:
                continue
            with torch.no_grad():
                enc.prenorm.load_state_dict(src.prenorm.state_dict())
                enc.norm.load_state_dict(src.norm.state_dict())
                for i in range(min(len(enc.layers), len(src.layers))):
                    enc.layers[i].load_state_dict(src.layers[i].state_dict())

    def init_added_encoder_layers(self, missing_keys) -> list[str]:
        """Layers that `train --init M --set key_encoder=n` (or query_encoder=n) adds to an encoder M
        already has start as the identity (their attention output and MLP down projections zero),
        so the encoder's landmark states, and every score, are unchanged until they train. An
        encoder M lacks altogether is init_retrieval_encoders' case. Returns the layers zeroed."""
        missing, done = set(missing_keys), []
        for name in ("query_enc", "key_enc"):
            enc = getattr(self, name, None)
            if enc is None or f"{name}.prenorm.weight" in missing:
                continue
            for i, layer in enumerate(enc.layers):
                if f"{name}.layers.{i}.o.weight" in missing:
                    with torch.no_grad():
                        layer.o.weight.zero_()
                        layer.mlp.down.weight.zero_()
                    done.append(f"{name}.layers.{i}")
        return done

    # -- layout helpers ---------------------------------------------------------------------------

    def augment(self, input_ids: torch.Tensor):
        """Pad [B, L] to C*63 and insert a landmark after every 63 tokens -> [B, C*64] and C."""
        cfg = self.config
        B, L = input_ids.shape
        S1 = cfg.chunk_tokens
        C = max(1, -(-L // S1))
        ids = F.pad(input_ids, (0, C * S1 - L), value=cfg.pad_token_id)
        ids = ids.masked_fill(ids < 0, cfg.pad_token_id).view(B, C, S1)
        lmk = torch.full((B, C, 1), cfg.lmk_token_id, dtype=ids.dtype, device=ids.device)
        return torch.cat([ids, lmk], dim=2).view(B, C * cfg.chunk_size), C

    def unaugment(self, x: torch.Tensor, L: int) -> torch.Tensor:
        """augment's inverse on states: [B, C*64, D] -> the real tokens' [B, L, D] (landmark slots
        and padding dropped)."""
        B, T, D = x.shape
        S = self.config.chunk_size
        return x.view(B, T // S, S, D)[:, :, : S - 1].reshape(B, -1, D)[:, :L]

    # -- forward ------------------------------------------------------------------------------------

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        label_weights: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,  # accepted for HF compatibility; ids are unpadded
        output_retrieval: bool = False,
        chunk_embeddings: torch.Tensor | None = None,
        forced_chunks: torch.Tensor | None = None,
        forced_oracle: bool = False,
        retrieval_targets: torch.Tensor | None = None,
        retrieval_distractors: float = 1.0,
        scorer_only: bool = False,
        group_targets: bool = False,
        **kwargs,
    ) -> DRTOutput:
        """forced_chunks [B, C] or [B, C, F] (optional, DRT fine-tuning): chunk(s) to force into
        the selection of retrieval row c (which serves chunk c + 1), -1 for none; see
        force_selection. retrieval_targets (same shape, default: forced_chunks) are the chunks the
        output's retrieval_loss asks those rows to rank first (forced_retrieval_loss, with every other
        chunk counted retrieval_distractors times). group_targets (G >= 2, `train --group-targets`):
        group g is forced and trained toward column g of those tensors only (2-hop rows: group 0
        toward hop 1's chunk, group 1 toward hop 2's), instead of every group toward any of them.

        scorer_only (training the retrieval scorer alone, `drt-reader train --lm-loss 0`): the upper
        layers run without an autograd graph, so the loss and logits carry no gradient and only
        retrieval_loss trains (the landmark keys through the chunk encoder, the query norms). The
        memory of a step no longer grows with the upper layers' activations. With several groups,
        the retrieval loss of group g > 0 then no longer reaches the encoder through the content
        that earlier groups read (only through the landmark keys)."""
        B, L = input_ids.shape
        retrieval_loss = None
        copy = None
        if self.config.uses_chunks:
            h, retrieval, retrieval_loss, copy = self._forward_drt(input_ids, output_retrieval, chunk_embeddings,
                                                                   forced_chunks, forced_oracle, retrieval_targets,
                                                                   scorer_only, retrieval_distractors, group_targets)
        else:
            h, retrieval = self._forward_plain(input_ids), None
        with torch.no_grad() if scorer_only else nullcontext():
            logits = self.lm_head(self.norm(h))
            if copy is not None:  # log-probabilities of the LM/pointer mixture (CopyHead)
                logits = mix_copy(logits, *copy)
            loss = None
            if labels is not None:
                loss = lm_loss(logits, labels, label_weights)
        return DRTOutput(loss=loss, logits=logits, retrieval=retrieval, retrieval_loss=retrieval_loss)

    def hidden_states(self, input_ids: torch.Tensor, chunk_embeddings: torch.Tensor | None = None) -> torch.Tensor:
        """Final hidden states [B, L, D] of the real tokens, after the final norm: `logits =
        lm_head(hidden_states(ids))`, for callers that apply the head in slices (long windows)."""
        if self.config.copy_head:
            raise NotImplementedError("hidden_states: a copy_head model's output is not lm_head(states); use forward")
        if self.config.uses_chunks:
            h = self._forward_drt(input_ids, False, chunk_embeddings)[0]
        else:
            h = self._forward_plain(input_ids)
        return self.norm(h)

    @torch.no_grad()
    def landmarks(self, input_ids: torch.Tensor, segment_chunks: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
        """Landmark keys [C, D] and group-0 landmark queries [C, D] of one sequence of ids [L]:
        everything group 0's retrieval depends on (embeddings, lower layers, chunk encoder, query
        norm), without the upper layers. The lower layers run in segments of `segment_chunks`
        chunks, each with the chunks before it that their sliding windows reach as context, so
        the result equals the full forward's (and the engine's) at any length, in memory bounded
        by the segment. Scores as in retrieval_scores(queries, keys, ...)."""
        cfg = self.config
        if cfg.arch != "drt":
            raise ValueError("landmarks: only DRT models score chunks with landmarks")
        aug, C = self.augment(input_ids.view(1, -1))
        S, D = cfg.chunk_size, cfg.hidden_size
        # position p of layer l sees p - window .. p of layer l - 1: lower_layers * window back in all,
        # from the segment's first slot, or (key_context = m) from the chunk before's last m slots
        reach = cfg.lower_layers * cfg.window + (cfg.key_context + 1 if cfg.key_context else 0)
        ctx = -(-reach // S)
        keys, queries = [], []
        for a in range(0, C, segment_chunks):
            b = min(C, a + segment_chunks)
            a0 = max(0, a - ctx)  # chunks a0 .. a - 1: context (the key encoder reads chunk a - 1)
            x, _, pre = self._lower(aug[:, a0 * S: b * S], start=a0 == 0)
            x = x.view(b - a0, S, D)
            tail = self.preamble_tail(pre)
            k, _, _, own = self.encode_chunks(x, None if tail is None else tail[0])
            # copies: a key is a view of its encoder's [chunks, S, D] states, and a held view keeps the
            # whole segment alive (16M tokens: ~17 GB of them by the end instead of two segments')
            keys.append(k[a - a0:].clone())
            queries.append(self.landmark_query(0, x[a - a0:, S - 1], own[a - a0:] if own is not None else None).clone())
        return torch.cat(keys), torch.cat(queries)

    def scorer_loss(self, input_ids: torch.Tensor, retrieval_targets: torch.Tensor,
                    retrieval_distractors: float = 1.0) -> torch.Tensor | None:
        """forward(..., retrieval_targets=T, retrieval_distractors=M, scorer_only=True).retrieval_loss of a one-group model,
        without running the upper layers, whose output that loss does not depend on (G = 1: the
        queries are the lower layers' states). What `train --lm-loss 0` optimises, at the cost of
        the lower layers and the chunk encoder alone. None when no row has a target."""
        cfg = self.config
        if cfg.arch != "drt" or cfg.num_groups != 1:
            raise ValueError("scorer_loss: one-group DRT models only (group g > 0 queries read the upper layers)")
        B, _ = input_ids.shape
        S, D = cfg.chunk_size, cfg.hidden_size
        aug, C = self.augment(input_ids)
        x, _, pre = self._lower(aug)
        x = x.view(B, C, S, D)
        lmk_keys, _, _, own = self.encode_chunks(x, self.preamble_tail(pre))
        chunk_ids = torch.arange(C, device=x.device)
        q = self.landmark_query(0, x[:, :, S - 1], own)
        toks = aug.view(B, C, S)[:, :, : S - 1]
        return forced_retrieval_loss(self.chunk_scores(0, q, lmk_keys, chunk_ids, chunk_ids, toks, toks),
                                     retrieval_targets[:, :C], retrieval_distractors)

    def _forward_plain(self, input_ids):
        if self.config.arch == "landmark":  # blocks of chunk_tokens tokens + a landmark each
            x = self.embed(self.augment(input_ids)[0])
            for layer in self.layers:
                x = layer(x)
            return self.unaugment(x, input_ids.shape[1])
        x = self.embed(input_ids.clamp_min(0))
        P = self.config.preamble_len
        if P:
            x = self._with_preamble(x)
        for layer in self.layers:
            x = layer(x)
        return x[:, P:]

    def _forward_drt(self, input_ids, output_retrieval: bool, chunk_embeddings=None, forced_chunks=None,
                     forced_oracle: bool = False, retrieval_targets=None, scorer_only: bool = False,
                     retrieval_distractors: float = 1.0, group_targets: bool = False):
        cfg = self.config
        B, L = input_ids.shape
        S, D, H, d = cfg.chunk_size, cfg.hidden_size, cfg.num_heads, cfg.head_dim
        aug, C = self.augment(input_ids)
        x, emb, pre = self._lower(aug)  # emb: kept for the copy head's queries; pre: the preamble's states
        lmk_keys, mem_k, mem_v, own = self.encode_chunks(x.view(B, C, S, D), self.preamble_tail(pre))
        N = S - 1
        flat_k = mem_k.view(B, C, N, D)
        # [B, C, N, H, d] -> per chunk, heads first
        mem_k = mem_k.view(B, C, N, H, d).permute(0, 1, 3, 2, 4)
        mem_v = mem_v.view(B, C, N, H, d).permute(0, 1, 3, 2, 4)
        chunk_ids = torch.arange(C, device=x.device)
        retrieval, retrieval_loss, sels = [], None, []
        for g, group in enumerate(self.groups):
            if cfg.arch == "fixed_retriever":
                scores = self._fixed_scores(input_ids, C, chunk_embeddings)
            else:
                q_lmk = self.landmark_query(g, x.view(B, C, S, D)[:, :, S - 1], own)
                toks = aug.view(B, C, S)[:, :, : S - 1]
                scores = self.chunk_scores(g, q_lmk, lmk_keys, chunk_ids, chunk_ids, toks, toks)
            idx, w = select_topk(scores, cfg.chunk_topk, gumbel=self.training and cfg.arch == "drt")
            forced_g = _group_column(forced_chunks, g, group_targets)
            if forced_g is not None:
                idx, w = force_selection(idx, scores, forced_g[:, :C], forced_oracle)
            targets = _group_column(retrieval_targets if retrieval_targets is not None else forced_chunks, g,
                                    group_targets)
            if targets is not None and cfg.arch == "drt":
                rl = forced_retrieval_loss(scores, targets[:, :C], retrieval_distractors)
                if rl is not None:
                    rl = rl / cfg.num_groups
                    retrieval_loss = rl if retrieval_loss is None else retrieval_loss + rl
            if cfg.arch == "fixed_retriever" or cfg.detach_fusion_weights:
                w = w.detach()  # constants: the LM loss no longer reaches the scorer
            if output_retrieval:
                retrieval.append({"idx": idx, "weights": w.detach(), "scores": scores.detach()})
            sels.append((idx, w))
            with torch.no_grad() if scorer_only else nullcontext():
                gca_fn = self._batch_gca_fn(idx, w, mem_k, mem_v, B, C)
                for layer in group:
                    if pre is None:
                        x = layer(x, gca_fn)
                    else:  # the preamble's positions attend and are attended to, and get no GCA
                        P = pre.shape[1]
                        y = layer(torch.cat([pre, x], dim=1), _after_preamble(gca_fn, P))
                        pre, x = y[:, :P], y[:, P:]
        copy = None
        if self.copy_head is not None:
            idx, w = copy_selection(sels, cfg.copy_groups)
            copy = self._batch_copy(x, emb, aug, flat_k, idx, w, B, C, L)
        x = self.unaugment(x, L)
        return x, (retrieval if output_retrieval else None), retrieval_loss, copy

    def _batch_copy(self, x, emb, aug, flat_k, idx, w, B, C, L):
        """CopyHead over the selections idx / w [B, C, k'] (copy_selection), in the real-token layout: (gate [B, L],
        p [B, L, k*N], toks [B, L, k*N]); chunk 0 reads nothing (p = 0)."""
        S, D, N = self.config.chunk_size, self.config.hidden_size, self.config.chunk_size - 1
        k = idx.shape[-1]
        gate = torch.zeros(B, C, S, device=x.device)
        E, P = self.config.copy_span, self.config.copy_lead
        R = P + N + E  # slots the pointer reads per retrieved chunk
        p = torch.zeros(B, C, S, k * R, device=x.device)
        toks = torch.zeros(B, C, S, k * R, dtype=torch.long, device=x.device)
        if C > 1:
            bi = torch.arange(B, device=x.device).view(B, 1, 1)
            sel = idx[:, :-1]  # rows 0..C-2 serve chunks 1..C-1
            ids = aug.view(B, C, S)[:, :, :N]
            pad = self.config.pad_token_id
            slot_ids, slot_k = ids[bi, sel], flat_k[bi, sel]  # [B, C-1, k, N(, D)]
            if E:  # and the first E slots of the chunk after each (< C; unused picks are 0 and weigh 0)
                nxt = (sel + 1).clamp_max(C - 1)
                slot_ids = torch.cat([slot_ids, ids[bi, nxt][..., :E]], dim=-1)
                slot_k = torch.cat([slot_k, flat_k[bi, nxt][..., :E, :]], dim=-2)
            if P:  # and, before them, the last P slots of the chunk before each (pads before chunk 0)
                prv = (sel - 1).clamp_min(0)
                none = (sel == 0)[..., None]
                slot_ids = torch.cat([ids[bi, prv][..., N - P:].masked_fill(none, pad), slot_ids], dim=-1)
                slot_k = torch.cat([flat_k[bi, prv][..., N - P:, :].masked_fill(none[..., None], 0), slot_k], dim=-2)
            slot_ids = slot_ids.reshape(B * (C - 1), k, R)
            prev_emb = self.embed(slot_predecessors(slot_ids, pad))  # [Z, k, R, D]
            bigram = None
            if self.copy_head.bigram:
                # the real token before each position (the landmark slot: its chunk's last token)
                before = F.pad(ids.reshape(B, C * N), (1, 0), value=pad)[:, :-1].view(B, C, N)
                before = torch.cat([before, ids[:, :, N - 1:]], dim=-1)  # [B, C, S]
                bigram = (self.embed(before[:, 1:]).reshape(B * (C - 1), S, D),
                          self.embed(slot_predecessors(slot_ids, pad, 2)), self.embed(slot_ids))
            match = None
            if self.copy_head.match:
                n = self.copy_head.match
                flat = ids.reshape(B, C * N)  # the real tokens in order (the landmark rows get pads)
                hist = torch.stack([F.pad(flat, (i, 0), value=pad)[:, :C * N] for i in range(n)], dim=-1)
                hist = F.pad(hist.view(B, C, N, n), (0, 0, 0, 1), value=pad)[:, 1:].reshape(B * (C - 1), S, n)
                match = suffix_match(hist, slot_contexts(slot_ids, pad, n), pad)
            recall = None
            if self.copy_head.recall:  # chunk c's query side: chunks c - 1 and c; slot j reads up to N + j
                ctx = torch.cat([ids[:, :-1], ids[:, 1:]], dim=-1).reshape(B * (C - 1), 2 * N)
                recall = recall_lengths(slot_ids, ctx, recall_limits(N, x.device), pad,
                                        ages=self.config.copy_recall_age)
            g_, p_ = self.copy_head(x.view(B, C, S, D)[:, 1:].reshape(B * (C - 1), S, D),
                                    emb.view(B, C, S, D)[:, 1:].reshape(B * (C - 1), S, D),
                                    slot_k.reshape(B * (C - 1), k, R, D), prev_emb, w[:, :-1].reshape(B * (C - 1), k),
                                    bigram, match, recall)
            gate = torch.cat([gate[:, :1], g_.view(B, C - 1, S)], dim=1)
            p = torch.cat([p[:, :1], p_.reshape(B, C - 1, S, k * R)], dim=1)
            toks = torch.cat([toks[:, :1], slot_ids.reshape(B, C - 1, 1, k * R).expand(B, C - 1, S, k * R)], dim=1)

        def real(t):
            return t[:, :, :N].reshape(B, C * N, *t.shape[3:])[:, :L]

        return real(gate), real(p), real(toks)

    def _batch_gca_fn(self, idx, w, mem_k, mem_v, B, C):
        """GCA closure for the whole sequence: chunk c >= 1 uses row c-1's selection; chunk 0 gets 0."""
        cfg = self.config
        S, D = cfg.chunk_size, cfg.hidden_size
        if C < 2:
            return lambda gca_mod, a: torch.zeros_like(a)
        k = idx.shape[-1]
        sel = idx[:, :-1]  # [B, C-1, k] rows 0..C-2 serve chunks 1..C-1
        flat = (sel + torch.arange(B, device=idx.device).view(B, 1, 1) * C).reshape(-1)
        Hh, N, d = mem_k.shape[2], mem_k.shape[3], mem_k.shape[4]
        gk = mem_k.reshape(B * C, Hh, N, d)[flat].view(B * (C - 1), k, Hh, N, d).transpose(1, 2)
        gv = mem_v.reshape(B * C, Hh, N, d)[flat].view(B * (C - 1), k, Hh, N, d).transpose(1, 2)
        gw = w[:, :-1].reshape(B * (C - 1), k)

        def fn(gca_mod, a):
            av = a.view(B, C, S, D)
            out = gca_mod(av[:, 1:].reshape(B * (C - 1), S, D), gk, gv, gw).view(B, C - 1, S, D)
            return torch.cat([torch.zeros_like(av[:, :1]), out], dim=1).view(B, C * S, D)

        return fn

    # -- fixed retriever (RPT-style baseline) -------------------------------------------------------

    def _fixed_scores(self, input_ids, C, chunk_embeddings=None):
        """Cosine similarity of frozen MiniLM embeddings of each chunk's text, / temperature, causal."""
        cfg = self.config
        if chunk_embeddings is None:
            from .fixed_retriever import embed_chunks

            chunk_embeddings = embed_chunks(input_ids, cfg)  # [B, C, E], L2-normalised
        e = chunk_embeddings.to(input_ids.device).float()
        s = torch.einsum("bce,bfe->bcf", e, e) / cfg.retriever_temperature
        ids = torch.arange(C, device=input_ids.device)
        return s.masked_fill(~(ids[None, :] < ids[:, None]), NEG_INF)


def _no_gca(gca_mod, a: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(a)


def _after_preamble(gca_fn, P: int):
    """gca_fn for a sequence that starts with the P preamble positions (which get no GCA)."""
    def fn(gca_mod, a):
        return torch.cat([torch.zeros_like(a[:, :P]), gca_fn(gca_mod, a[:, P:])], dim=1)

    return fn


def lm_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None):
    """Mean next-token cross-entropy: position i predicts labels[i+1]; -100 ignored.

    With `weights` [B, L] (aligned with labels), a weighted mean: sum(w*ce)/sum(w) over targets."""
    V = logits.shape[-1]
    lg = logits[:, :-1].reshape(-1, V).float()
    tg = labels[:, 1:].reshape(-1)
    ce = F.cross_entropy(lg, tg.clamp_min(0), reduction="none")
    mask = (tg != -100).float()
    if weights is not None:
        mask = mask * weights[:, 1:].reshape(-1).float()
    return (ce * mask).sum() / mask.sum().clamp_min(1e-9)
