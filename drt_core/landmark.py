"""Landmark Attention (Mohtashami & Jaggi, NeurIPS 2023): a baseline, in this framework.

A transformer on the token stream with a landmark token after every 63 tokens: blocks of
S = chunk_size = 64 slots, the layout of DRT's chunks (`base.insert_landmarks`). The reference is
epfml/landmark-attention: lm_benchmark/models/landmark.py (the grouped softmax, training) and
lm_benchmark/models/caches/mem_cache.py (retrieval from the cache, inference).

Batch mode (training, `model(ids)`): query i of block b attends to every earlier position through
the grouped softmax,
    top   = softmax over {tokens t <= i of block b, its own landmark excluded} ∪ {landmarks of blocks < b}
    out_i = sum_{t in b} top_t v_t + sum_{b' < b} top_{landmark b'} * sum_{t in b'} softmax_{t in b'}(s_it) v_t
so a landmark's score is its block's gate and its value is never read.

Cached mode (streaming, the engine): query i attends to its own block and to the k = chunk_topk
earlier blocks that its landmark scores rank first (per token, per head and per layer), through
the same grouped softmax. Positions are stingy, as in the reference's cache: the chosen blocks, in
document order, are laid out at positions 0 .. k*S - 1 and the query's block after them, so no
position exceeds (k + 1) * S however long the stream; landmark keys are scored at the layout
positions of the k most recent blocks, every older landmark at the first block's (the reference
puts all older blocks at index 0 too), and ties go to the more recent block. With at most k
earlier blocks this is the batch computation exactly (tests/drt_core/test_landmark.py checks it,
and the rest against a per-query transcription); beyond, it is what the paper runs at inference.

Positions are ALiBi (SelfAttention's slopes), not the reference's RoPE: so the baseline starts from
`checkpoints/sliding-window-tiny`, pretrained on the same 10.0M tokens as DRT, the way the paper
fine-tunes a pretrained LLaMA with landmarks (`train --init SW --set arch=landmark`; RESULTS §5).

The cache is the layer's `KVWindow` used as a growing array: slot p holds the key and value of
position p (never wrapped; doubled when full), so forks and stored states work unchanged. Cost per
token: its landmark scores against every earlier block (linear in the stream, as in the paper)
plus the union of the blocks its block's queries chose.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .attention import KVWindow, SelfAttention

NEG_INF = float("-inf")


def grouped_softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, S: int,
                              bias: torch.Tensor | None = None) -> torch.Tensor:
    """Batch-mode landmark attention. q, k, v [B, H, T, d], T a multiple of S, the landmark at slot
    S-1 of every block; bias [H, T, T] (positions) is added to the scores. Returns [B, H, T, d].
    O(T^2) time and memory, as in the reference (training lengths only)."""
    B, H, T, d = q.shape
    assert T % S == 0, f"{T} positions are not whole blocks of {S}"
    C = T // S
    dev = q.device
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))  # [B, H, T, T]
    if bias is not None:
        s = s + bias
    pos = torch.arange(T, device=dev)
    blk, slot = pos // S, pos % S
    lmk = slot == S - 1
    same = blk[:, None] == blk[None, :]
    own = same & (pos[None, :] <= pos[:, None]) & ~lmk[None, :]
    earlier = blk[None, :] < blk[:, None]  # key block before the query's
    top = s.masked_fill(~(own | (earlier & lmk[None, :])), NEG_INF).softmax(-1)  # [B, H, T, T]
    top = top.view(B, H, T, C, S)
    gate = top[..., S - 1]  # [B, H, T, C]: 0 for the query's own block and later ones
    within = s.view(B, H, T, C, S)[..., : S - 1].softmax(-1)  # each block's tokens alone
    w = top[..., : S - 1] + within * gate.unsqueeze(-1)  # own tokens + gated earlier blocks
    w = F.pad(w, (0, 1)).view(B, H, T, T)  # landmark values are never read
    return w.to(v.dtype) @ v


def grouped_softmax_reference(q, k, v, S: int, bias=None) -> torch.Tensor:
    """The reference's LandmarkGroupedSoftmaxFunction path, transcribed loop by loop (tests only)."""
    B, H, T, d = q.shape
    out = torch.zeros_like(q)
    for i in range(T):
        b = i // S
        s = (k[:, :, : i + 1] @ q[:, :, i, :, None])[..., 0] / math.sqrt(d)  # [B, H, i+1]
        if bias is not None:
            s = s + bias[:, i, : i + 1]
        cols, kinds = [], []
        for t in range(i + 1):
            if t // S == b and t % S != S - 1:
                cols.append(t), kinds.append("own")
            elif t // S < b and t % S == S - 1:
                cols.append(t), kinds.append("lmk")
        top = s[..., cols].softmax(-1)
        for j, (t, kind) in enumerate(zip(cols, kinds)):
            if kind == "own":
                out[:, :, i] += top[..., j, None] * v[:, :, t]
            else:
                b2 = t // S
                ws = s[..., b2 * S: b2 * S + S - 1].softmax(-1)
                out[:, :, i] += top[..., j, None] * (ws[..., None] * v[:, :, b2 * S: b2 * S + S - 1]).sum(-2)
    return out


class LandmarkAttention(SelfAttention):
    """Causal self-attention with landmark tokens (module docstring), ALiBi positions. Parameters
    as SelfAttention's; config.chunk_size is the block (S), config.chunk_topk the blocks each token
    retrieves."""

    def __init__(self, cfg):
        super().__init__(cfg, rope=False, window=None)
        self.S = cfg.chunk_size
        self.topk = cfg.chunk_topk

    def alibi(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """-slope_h * (q_pos - k_pos): [H, *q_pos.shape, *k_pos.shape] (no causal mask)."""
        dist = (q_pos.reshape(*q_pos.shape, *([1] * k_pos.dim())) - k_pos).float()
        return -self.slopes.to(q_pos.device).view(-1, *([1] * dist.dim())) * dist

    def forward(self, x: torch.Tensor, pos0: int = 0, cache: KVWindow | None = None) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self._split(x)
        if cache is not None:
            o = self._attend_memory(q, k, v, pos0, cache)
        else:
            assert pos0 == 0, "batch mode starts a stream"
            pos = torch.arange(T, device=x.device)
            o = grouped_softmax_attention(q, k, v, self.S, self.alibi(pos, pos).to(q.dtype))
        return self.o(o.transpose(1, 2).reshape(B, T, D))

    # -- cached mode ----------------------------------------------------------------------------

    @staticmethod
    def _store(cache: KVWindow, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append keys and values at slots next_pos..; the array doubles when full."""
        p, T = cache.next_pos, k.shape[2]
        cap = cache.k.shape[2]
        if p + T > cap:
            grow = max(2 * cap, p + T) - cap
            cache.k = F.pad(cache.k, (0, 0, 0, grow))
            cache.v = F.pad(cache.v, (0, 0, 0, grow))
            cache.pos = F.pad(cache.pos, (0, grow), value=-1)
        cache.k[:, :, p: p + T] = k.to(cache.k.dtype)
        cache.v[:, :, p: p + T] = v.to(cache.v.dtype)
        cache.pos[p: p + T] = torch.arange(p, p + T, device=cache.pos.device)
        cache.next_pos = p + T

    def _attend_memory(self, q, k, v, pos0: int, cache: KVWindow) -> torch.Tensor:
        assert cache.next_pos == pos0, f"cache at position {cache.next_pos}, input at {pos0}"
        assert q.shape[0] == 1, "the engine streams one sequence"
        T = q.shape[2]
        self._store(cache, k, v)
        S = self.S
        out = torch.empty_like(q)
        i = pos0
        while i < pos0 + T:  # one block at a time: the queries of block b share its candidates
            b = i // S
            j = min(pos0 + T, (b + 1) * S)
            out[:, :, i - pos0: j - pos0] = self._attend_block(q[0, :, i - pos0: j - pos0], cache, b, i)[None]
            i = j
        return out

    def _block_scores(self, q: torch.Tensor, blocks_k: torch.Tensor, kk: int, qpos: torch.Tensor) -> torch.Tensor:
        """The landmark scores [H, m, b] of queries q [H, m, d] (layout positions qpos [m]) against
        the b earlier blocks' landmark keys (blocks_k [H, b, S, d]): the kk most recent landmarks at
        their layout positions, older ones at block 0's. What top-k ranks."""
        b, S = blocks_k.shape[1], self.S
        lay = torch.zeros(b, dtype=torch.long, device=q.device)
        lay[b - kk:] = torch.arange(kk, device=q.device)
        lk = blocks_k[:, :, S - 1].to(q.dtype)  # [H, b, d]
        return (q @ lk.transpose(-1, -2)) * (1.0 / math.sqrt(self.d)) + self.alibi(qpos, lay * S + S - 1).to(q.dtype)

    @staticmethod
    def top_blocks(raw: torch.Tensor, kk: int) -> torch.Tensor:
        """The kk best blocks of scores raw [..., b] (block indices, best first), ties to the more
        recent block. At layer 0 every landmark key is the same vector (the landmark token's
        embedding), so the older blocks' scores tie up to the last bits that a matmul's blocking
        changes: scores are compared in steps of 2^-10, so the selection does not depend on how the
        stream was cut into runs. The engine's choice."""
        order = raw.mul(1024.0).round().flip(-1).sort(dim=-1, descending=True, stable=True).indices[..., :kk]
        return raw.shape[-1] - 1 - order

    def _attend_block(self, q: torch.Tensor, cache: KVWindow, b: int, i0: int) -> torch.Tensor:
        """Queries q [H, m, d] at positions i0.. of block b -> outputs [H, m, d]."""
        S, H, d = self.S, self.H, self.d
        m = q.shape[1]
        kk = min(b, self.topk)  # blocks retrieved (all of them while there are at most k)
        dev, dt = q.device, q.dtype
        scale = 1.0 / math.sqrt(d)
        s0 = i0 - b * S  # slot of the first query
        n_own = s0 + m  # own-block keys up to the last query (its landmark is never attended)
        qpos = kk * S + torch.arange(s0, s0 + m, device=dev)  # layout: after the chosen blocks
        own_pos = kk * S + torch.arange(n_own, device=dev)
        own_k = cache.k[0, :, b * S: b * S + n_own].to(dt)
        own_v = cache.v[0, :, b * S: b * S + n_own].to(dt)
        s_own = (q @ own_k.transpose(-1, -2)) * scale + self.alibi(qpos, own_pos).to(dt)  # [H, m, n_own]
        ok = (own_pos[None, :] <= qpos[:, None]) & (own_pos[None, :] % S != S - 1)
        s_own = s_own.masked_fill(~ok, NEG_INF)
        if kk == 0:
            return s_own.softmax(-1) @ own_v
        blocks_k = cache.k[0, :, : b * S].view(H, b, S, d)
        blocks_v = cache.v[0, :, : b * S].view(H, b, S, d)
        raw = self._block_scores(q, blocks_k, kk, qpos)  # [H, m, b]
        idx = self.top_blocks(raw, kk).sort(-1).values  # [H, m, kk], document order = layout order
        # the union of the blocks this block's queries chose, per head (padded to the largest),
        # read once; each query then masks the blocks it did not choose. Its chosen blocks sit in
        # the layout at their rank in its own selection.
        pres = torch.zeros(H, b, dtype=torch.bool, device=dev).scatter_(1, idx.reshape(H, -1), True)
        U = int(pres.sum(-1).max())
        cand = torch.where(pres, torch.arange(b, device=dev), b).sort(-1).values[:, :U]  # [H, U], b = padding
        sel = (idx[:, :, None, :] == cand[:, None, :, None]).any(-1)  # [H, m, U]
        rank = sel.long().cumsum(-1) - 1
        hsel = torch.arange(H, device=dev)[:, None]
        uk = blocks_k[hsel, cand.clamp_max(b - 1)].to(dt)  # [H, U, S, d]
        uv = blocks_v[hsel, cand.clamp_max(b - 1)].to(dt)
        s_mem = (q @ uk.reshape(H, U * S, d).transpose(-1, -2)).view(H, m, U, S) * scale
        kpos = rank[..., None] * S + torch.arange(S, device=dev)  # [H, m, U, S] layout positions
        dist = (qpos[None, :, None, None] - kpos).to(dt)
        s_mem = s_mem - self.slopes.to(dev, dt).view(H, 1, 1, 1) * dist
        lmk = s_mem[..., S - 1].masked_fill(~sel, NEG_INF)
        top = torch.cat([s_own, lmk], -1).softmax(-1)
        p_own, gate = top[..., :n_own], top[..., n_own:]  # gate [H, m, U]: 0 where not chosen
        within = s_mem[..., : S - 1].softmax(-1) * gate.unsqueeze(-1)  # [H, m, U, S-1]
        vals = uv[:, :, : S - 1].reshape(H, U * (S - 1), d)
        return p_own @ own_v + within.reshape(H, m, U * (S - 1)) @ vals
