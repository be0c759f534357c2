"""The copy head (drt_core.copy_head) on a stream: what it reads gathered from the chunk memory and
the carry's token buffer, laid out as the batch forward lays them out, then `CopyHead.point`.

For a run of positions (Stream.run) that touches n_seg chunks, segment s reads selection s. The
pointer's slots are the selected chunks' token ids and memory keys (the keys GCA gathered, reused),
with copy_span's first slots of the chunk after each and copy_lead's last slots of the chunk
before; its query side is the real token before each position (copy_bigram), the n real tokens
ending at each (copy_match) and the tokens of each segment's chunk and the chunk before
(copy_recall). The stream's own chunks are read from the memory once stored, from the carry's
buffer while being filled.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from store.chunk_store import ChunkMemory

from .config import DRTConfig
from .copy_head import copy_selection


def copy_queries(cfg: DRTConfig, head, mem: ChunkMemory, tok_buf: list[int], pos0: int, aug: list[int],
                 real: list[bool]) -> dict:
    """The copy head's query-side tokens of a run from stream position pos0, from the carry's token
    buffer before the run moves it on: the real token before each position (copy_bigram) and the n
    real tokens ending at each (copy_match)."""
    return {"before": tokens_before(cfg, mem, tok_buf, pos0, aug, real) if head.bigram else None,
            "history": token_history(cfg, mem, tok_buf, pos0, aug, real, head.match) if head.match else None}


def copy_pointer(model, mem: ChunkMemory, reads: list, pos0: int, x: torch.Tensor, emb: torch.Tensor,
                 queries: dict, tok_buf: list[int]):
    """The copy head over the groups' selections it reads (copy_selection of `reads`, one (sel_idx,
    sel_w, memory keys GCA read) per group) with their memory keys: stream_copy's (gate, pointer
    weights, their token ids)."""
    c = model.config
    dev = x.device
    if c.copy_groups == "all" and len(reads) > 1:
        N, D = c.chunk_size - 1, c.hidden_size
        ks = [mk if mk is not None else torch.zeros(si.numel() // si.shape[-1], si.shape[-1], N, D,
                                                    device=dev) for si, _, mk in reads]
        mem_k = None if all(mk is None for *_, mk in reads) else torch.cat(ks, dim=1)
    else:
        mem_k = reads[-1][2]
    gi, gw = copy_selection([(si, sw) for si, sw, _ in reads], c.copy_groups)
    return stream_copy(model, mem, gi, gw, pos0, x, emb, queries["before"], mem_k, queries["history"],
                       tok_buf)


def stream_copy(model, mem: ChunkMemory, sel_idx: torch.Tensor, sel_w: torch.Tensor, pos0: int,
                x: torch.Tensor, emb: torch.Tensor, before: list[int] | None,
                mem_k: torch.Tensor | None = None, history: list[list[int]] | None = None,
                tok_buf: list[int] | None = None):
    """CopyHead for a run of positions touching n_seg chunks (segment s reads selection s, of
    the last group), for each of the Bv rows of x [Bv, T, D] (the variants of a counterfactual
    fork, else one): gate [Bv, T], pointer weights [Bv, T, k*R], their token ids [Bv, T, k*R]
    (R = copy_lead + N + copy_span); sel_idx, sel_w [Bv, n_seg, k];
    `before` the real token before each position (copy_bigram only, else None); `mem_k`
    [Bv * n_seg, k, N, D] the selection's memory keys, as GCA read them (None when every weight
    is 0: GCA read nothing, and the pointer's weights are 0 whatever the keys); `history` the
    suffix-match queries (token_history; copy_match only, else None); `tok_buf` the carry's tokens
    of the chunk not yet complete after this run (copy_recall reads them). Everything but x and
    the selections is the same for every row."""
    c = model.config
    S, D, N = c.chunk_size, c.hidden_size, c.chunk_size - 1
    Bv, n_seg, k = sel_idx.shape
    rows = Bv * n_seg
    T, dev = x.shape[1], x.device
    idx = sel_idx.reshape(rows, k).cpu().numpy()
    sel_w = sel_w.reshape(rows, k)
    gk = mem_k if mem_k is not None else torch.zeros(rows, k, N, D, device=dev)
    toks = torch.from_numpy(mem.tokens(idx).astype(np.int64) if mem.n else np.zeros((rows, k, N), np.int64))
    E, P = c.copy_span, c.copy_lead
    if E:  # copy_span: and the first E slots of the chunk after each (stored: a selection serving
        # chunk c reads chunks < c - 1; only unused picks, of weight 0, have none)
        nt, nk = neighbour_slots(c, mem, idx, 1, slice(0, E), mem_k is not None, dev)
        toks, gk = torch.cat([toks, nt], dim=-1), torch.cat([gk, nk], dim=-2)
    if P:  # copy_lead: and, first, the last P slots of the chunk before each (pads before chunk 0)
        lt, lk = neighbour_slots(c, mem, idx, -1, slice(N - P, N), mem_k is not None, dev)
        toks, gk = torch.cat([lt, toks], dim=-1), torch.cat([lk, gk], dim=-2)
    R = P + N + E
    off = pos0 % S

    def segments(t: torch.Tensor) -> torch.Tensor:  # [T, ...] of the run -> [rows, S, ...], every row alike
        t = F.pad(t, (0, 0) * (t.dim() - 1) + (off, n_seg * S - off - T))
        return t.view(n_seg, S, *t.shape[1:]).repeat(Bv, *[1] * t.dim())

    padded = F.pad(x, (0, 0, off, n_seg * S - off - T)).reshape(rows, S, D)
    emb = segments(emb)  # the run's token embeddings
    toks = toks.to(dev)
    head, pad = model.copy_head, c.pad_token_id

    def id_segments(ids) -> torch.Tensor:  # the run's [T, ...] token ids -> [rows, S, ...], pads around
        t = torch.full((n_seg * S, *ids.shape[1:]), pad, dtype=torch.long, device=dev)
        t[off: off + T] = ids
        return t.view(n_seg, S, *ids.shape[1:]).repeat(Bv, *[1] * ids.dim())

    q_before = id_segments(torch.tensor(before, device=dev)) if head.bigram else None
    q_hist = id_segments(torch.tensor(history, dtype=torch.long, device=dev)) if history is not None else None
    ctx = None
    if head.recall:  # segment i's query side: its chunk before and its own chunk
        first = pos0 // S
        ctx = torch.from_numpy(np.stack([np.concatenate([chunk_tokens(c, mem, first + i - 1, tok_buf),
                                                         chunk_tokens(c, mem, first + i, tok_buf)])
                                         for i in range(n_seg)]).astype(np.int64)).to(dev).repeat(Bv, 1)
    gate, p = head.point(model.embed, padded, emb, toks, gk, sel_w.float(), q_before, q_hist, ctx)
    toks = toks.view(rows, 1, k * R).expand(rows, S, k * R)
    return (gate.reshape(Bv, n_seg * S)[:, off: off + T], p.reshape(Bv, n_seg * S, k * R)[:, off: off + T],
            toks.reshape(Bv, n_seg * S, k * R)[:, off: off + T])


def tokens_until(cfg: DRTConfig, mem: ChunkMemory, tok_buf: list[int], pos0: int, n: int) -> list[int]:
    """The last n real tokens before stream position pos0, oldest first, pad-filled: the
    carry's token buffer (the chunk being filled) and, when it holds fewer than n, the chunk
    stored before it."""
    hist = list(tok_buf)
    if len(hist) < n and pos0 >= cfg.chunk_size:
        hist = [int(t) for t in mem.tokens(np.array([pos0 // cfg.chunk_size - 1]))[0]] + hist
    return ([cfg.pad_token_id] * n + hist)[-n:]


def tokens_before(cfg: DRTConfig, mem: ChunkMemory, tok_buf: list[int], pos0: int, aug: list[int],
                  real: list[bool]) -> list[int]:
    """The real token before each position of a run (the copy head's bigram query; a landmark
    gets its chunk's last token), as the batch forward lays them out."""
    last = tokens_until(cfg, mem, tok_buf, pos0, 1)[0]
    out = []
    for t, r in zip(aug, real):
        out.append(last)
        if r:
            last = t
    return out


def token_history(cfg: DRTConfig, mem: ChunkMemory, tok_buf: list[int], pos0: int, aug: list[int],
                  real: list[bool], n: int) -> list[list[int]]:
    """The copy head's suffix-match queries (copy_match): for each position of a run, the n real
    tokens ending at it, newest first, pad-filled (a landmark gets pads), as the batch forward
    lays them out."""
    hist = tokens_until(cfg, mem, tok_buf, pos0, n)
    out = []
    for t, r in zip(aug, real):
        if r:
            hist = hist[1:] + [t]
            out.append(hist[::-1])
        else:
            out.append([cfg.pad_token_id] * n)
    return out


def chunk_tokens(cfg: DRTConfig, mem: ChunkMemory, chunk: int, tok_buf: list[int]) -> np.ndarray:
    """The N token ids of stream chunk `chunk`: stored, or (the chunk being filled) the carry's
    buffer pad-filled, or pads before the stream's start (as the batch forward's layout)."""
    N, pad = cfg.chunk_size - 1, cfg.pad_token_id
    if 0 <= chunk < mem.n:
        return np.asarray(mem.tokens(np.array([chunk]))[0], dtype=np.int64)
    out = np.full(N, pad, dtype=np.int64)
    if chunk >= 0:
        out[: len(tok_buf)] = tok_buf[:N]
    return out


def neighbour_slots(cfg: DRTConfig, mem: ChunkMemory, idx: np.ndarray, d: int, slots: slice, want_keys: bool,
                    device: torch.device):
    """Token ids [..., n] and memory keys [..., n, D] (zeros unless want_keys) of the slots
    `slots` of the chunk d after each chunk of idx (copy_span: d = 1; copy_lead: d = -1): pad
    ids and zero keys where that chunk is not stored (before chunk 0; past the stream, which
    only unused picks of weight 0 reach)."""
    n = len(range(cfg.chunk_size - 1)[slots])
    j = idx + d
    ok = (j >= 0) & (j < mem.n)
    toks = np.full((*idx.shape, n), cfg.pad_token_id, np.int64)
    keys = np.zeros((*idx.shape, n, cfg.hidden_size), np.float32)
    if mem.n:
        j = np.clip(j, 0, mem.n - 1)
        toks = np.where(ok[..., None], mem.tokens(j)[..., slots], cfg.pad_token_id).astype(np.int64)
        if want_keys:
            keys = np.where(ok[..., None, None], mem.gather_keys(j)[..., slots, :], 0.0).astype(np.float32)
    return torch.from_numpy(toks), torch.from_numpy(keys).to(device)  # ids on the CPU (as mem.tokens)
