"""The copy head (drt_core.copy_head) on a stream: the chunks it reads, from the chunk memory and the
carry's token buffer, laid out as the batch forward lays them out, then `CopyHead.point`.

For a run of positions (Stream.run) that touches n_seg chunks, segment s reads selection s. The
pointer's slots come from `copy_head.copy_slots` over the memory (the keys GCA gathered reused);
its query side from the token ids of each segment's chunk and the chunk before it (`chunk_tokens`:
stored, or the carry's buffer while being filled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from store.chunk_store import ChunkMemory

from .copy_head import copy_selection, copy_slots

if TYPE_CHECKING:
    from .hf_config import DRTConfig


def copy_pointer(model, mem: ChunkMemory, reads: list, pos0: int, x: torch.Tensor, emb: torch.Tensor,
                 tok_buf: list[int]):
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
    return stream_copy(model, mem, gi, gw, pos0, x, emb, mem_k, tok_buf)


def stream_copy(model, mem: ChunkMemory, sel_idx: torch.Tensor, sel_w: torch.Tensor, pos0: int,
                x: torch.Tensor, emb: torch.Tensor, mem_k: torch.Tensor | None, tok_buf: list[int]):
    """CopyHead for a run of positions touching n_seg chunks (segment s reads selection s), for
    each of the Bv rows of x [Bv, T, D] (the variants of a counterfactual fork, else one): gate
    [Bv, T], pointer weights [Bv, T, k*R], their token ids [Bv, T, k*R] (R = copy_lead + N +
    copy_span); sel_idx, sel_w [Bv, n_seg, k]; emb [T, D] the run's token embeddings; `mem_k`
    [Bv * n_seg, k, N, D] the selection's memory keys, as GCA read them (None when every weight
    is 0: GCA read nothing, and the pointer's weights are 0 whatever the keys); `tok_buf` the
    carry's tokens of the chunk not yet complete after this run."""
    c = model.config
    S, D, N = c.chunk_size, c.hidden_size, c.chunk_size - 1
    Bv, n_seg, k = sel_idx.shape
    rows = Bv * n_seg
    T, dev = x.shape[1], x.device

    def ids_of(j: torch.Tensor) -> torch.Tensor:  # on the CPU, as mem.tokens
        if not mem.n:
            return torch.zeros(*j.shape, N, dtype=torch.int64)
        return torch.from_numpy(mem.tokens(j.numpy()).astype(np.int64))

    def keys_of(j: torch.Tensor) -> torch.Tensor:  # zeros where GCA read nothing: the weights are 0
        if mem_k is None or not mem.n:
            return torch.zeros(*j.shape, N, D, device=dev)
        return torch.from_numpy(np.asarray(mem.gather_keys(j.numpy()), dtype=np.float32)).to(dev)

    sel = sel_idx.reshape(rows, k).cpu()
    own = mem_k if mem_k is not None else torch.zeros(rows, k, N, D, device=dev)
    toks, gk = copy_slots(model.copy_head, sel, mem.n, ids_of, keys_of, own)
    R = toks.shape[-1]
    off = pos0 % S
    padded = F.pad(x, (0, 0, off, n_seg * S - off - T)).reshape(rows, S, D)
    emb = F.pad(emb, (0, 0, off, n_seg * S - off - T)).view(n_seg, S, D).repeat(Bv, 1, 1)
    first = pos0 // S
    ctx = torch.from_numpy(np.stack([np.concatenate([chunk_tokens(c, mem, first + i - 1, tok_buf),
                                                     chunk_tokens(c, mem, first + i, tok_buf)])
                                     for i in range(n_seg)])).to(dev).repeat(Bv, 1)
    toks = toks.to(dev)
    gate, p = model.copy_head.point(model.embed, padded, emb, toks, gk, sel_w.reshape(rows, k).float(), ctx)
    toks = toks.view(rows, 1, k * R).expand(rows, S, k * R)
    return (gate.reshape(Bv, n_seg * S)[:, off: off + T], p.reshape(Bv, n_seg * S, k * R)[:, off: off + T],
            toks.reshape(Bv, n_seg * S, k * R)[:, off: off + T])


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
