"""The stream core: a document's state (`Carry`, `DocState`) and the computation that moves it on
(`Stream`), the batch model's forward laid out chunk by chunk.

A document is a token stream processed left to right in memory that does not grow with its length:
    - every self-attention layer keeps a ring buffer of its last `window` keys/values (KVWindow);
    - every completed chunk hands its landmark key and K/V memory to a ChunkMemory (store.chunk_store:
      RAM tier, or memory-mapped files on disk), together with what its landmark retrieved;
    - retrieval runs once per chunk against all past landmark keys (exact top-k by a matrix product;
      a faiss inner-product index optionally), and the selection made by chunk c's landmark is
      carried to chunk c+1 even across calls, so no chunk loses its GCA at a segment boundary
      (unlike the reference code, spec §6.1);
    - the query RMSNorm is applied on every path (unlike the reference decode path, spec §6.2);
    - with config stream_preamble, a new state's windows already hold the preamble's keys/values at
      attention positions 0..P-1 (computed once per stream, `preamble_windows`): stream position p
      attends at p + P, chunks and token counts are unchanged;
    - the fixed_retriever baseline streams too: its chunk scores are the frozen MiniLM's cosines of
      the stored chunks' texts (MemoryIndex.embeddings), not landmark scores;
    - with one retrieval group, a feed may defer the group's layers (feed upper=False): what a chunk
      stores and what its landmark selects come from the lower layers alone, and the group's outputs
      reach later positions only through its sliding windows, so they are run once, over the last
      n_upper x window positions, when the state is next forked or fed (`catch_up`): about half a
      prefill's work, with the same numbers (tests/drt_core/test_engine.py).

The stream is processed in runs of positions (`Stream.run`): a run may start and end anywhere in a
chunk (a prefill block of many chunks, a prompt, one decoded token). Inside a run the computation is
exactly the batch model's (tests/drt_core/test_engine.py checks logits against DRTForCausalLM), in
named stages: the lower layers; the chunks the run completes, encoded and stored (`store_chunks`);
per retrieval group, the landmarks' selections (`select`) and the group's layers with GCA over them
(`run_group`); the logits, through the copy head's mixture where there is one (drt_core.stream_copy).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from store.chunk_store import ChunkMemory, MemmapChunkMemory, RamChunkMemory

from .attention import KVWindow
from .copy_head import mix_copy
from .base import insert_landmarks
from .counterfactual import apply_mask
from .encoders import key_tail
from .fixed_retriever import fixed_scores
from .drt import heads_first, no_gca, read_chunks, select_topk
from .memory_index import MemoryIndex, OverlayMemory
from .state_io import save_carry
from .stream_copy import copy_pointer

if TYPE_CHECKING:
    from .hf_config import DRTConfig
    from .drt import DRT


# ----------------------------------------------------------------------------------------------
# state


@dataclass
class Carry:
    """Everything besides the chunk memory needed to continue a stream."""

    pos: int  # augmented positions consumed (landmarks included)
    n_tokens: int  # real tokens consumed
    windows: list[KVWindow]  # one per self-attention layer, in model order
    sel_idx: torch.Tensor  # [G, k] selection serving the current chunk (made by the last landmark)
    sel_w: torch.Tensor  # [G, k] its weights (all zero: nothing served)
    h_buf: torch.Tensor  # [p, D] lower-layer states of the current partial chunk
    tok_buf: list[int] = field(default_factory=list)  # its real-token ids
    # config key_context = m: lower-layer states of the last m real slots of the last completed
    # chunk ([m, D]; zeros before the first), what the key encoder reads of the chunk before
    key_tail: torch.Tensor | None = None
    # deferred retrieval groups (Stream.feed upper=False): the groups' windows are exact for the
    # positions before `upper_pos`; `mid` holds the lower layers' outputs [r, D] of the last r
    # positions (r <= Stream.catch_up_span), from which Stream.catch_up rebuilds them exactly
    upper_pos: int = 0
    mid: torch.Tensor | None = None

    @property
    def upper_stale(self) -> bool:
        return self.upper_pos < self.pos

    def clone(self) -> "Carry":
        return Carry(
            self.pos, self.n_tokens,
            [KVWindow(w.k.clone(), w.v.clone(), w.pos.clone(), w.next_pos) for w in self.windows],
            self.sel_idx.clone(), self.sel_w.clone(), self.h_buf.clone(), list(self.tok_buf),
            None if self.key_tail is None else self.key_tail.clone(),
            self.upper_pos, None if self.mid is None else self.mid.clone(),
        )

    def tensors(self) -> dict[str, torch.Tensor]:
        t = {"sel_idx": self.sel_idx, "sel_w": self.sel_w, "h_buf": self.h_buf,
             "tok_buf": torch.tensor(self.tok_buf, dtype=torch.long)}
        if self.key_tail is not None:
            t["key_tail"] = self.key_tail
        if self.upper_stale and self.mid is not None:
            t["mid"] = self.mid
        for i, w in enumerate(self.windows):
            t[f"w{i}.k"], t[f"w{i}.v"], t[f"w{i}.pos"] = w.k, w.v, w.pos
        return {k: v.contiguous() for k, v in t.items()}


@dataclass
class Transfers:
    """Chunk-memory reads onto the engine's device (`Stream.gca_fn`): how many gathers of a group's
    selected chunks, how many chunk K/V pairs and bytes they moved, and how many runs reused the
    last gather instead."""

    gathers: int = 0
    chunks: int = 0
    bytes: int = 0
    reused: int = 0


class DocState:
    """The stream state of one document under one model: chunk memory + its index + carry (+ a
    directory)."""

    def __init__(self, engine, memory: ChunkMemory, carry: Carry, directory: Path | None,
                 base_index: MemoryIndex | None = None):
        self.engine, self.memory, self.carry, self.directory = engine, memory, carry, directory
        self.index = MemoryIndex(memory, engine.device, base_index)
        self.lock = threading.Lock()
        # document chunks barred from retrieval (Engine.generate's `mask`; set on generation forks only)
        self.mask: frozenset[int] = frozenset()
        # a fork of counterfactual.fork_variants: one row per set of barred chunks, run side by side
        # (batched) from the retrieval groups on; None for every other state
        self.variants: list[frozenset[int]] | None = None
        # [n_doc_chunks] added to every selection's scores of the document's chunks (a question's
        # BM25 term, Engine.question_bias; set on generation forks only)
        self.bias: torch.Tensor | None = None
        # whether the selections add config lexical_gates' term: the prefill's do; a generation fork's
        # (an answer, its causal effects and likelihoods: counterfactual) do not, the gates being
        # trained on how a passage cites an earlier one
        self.gated = True
        # per retrieval group, the last K/V gathered from the chunk memory onto the engine's device,
        # reused while the selection stays (a whole chunk when decoding: G transfers every S tokens)
        self.gathered: dict[int, tuple] = {}
        self.transfers = Transfers()

    @property
    def n_tokens(self) -> int:
        return self.carry.n_tokens

    @property
    def n_chunks(self) -> int:
        return self.memory.n

    def fork(self) -> "DocState":
        """A copy to write on (an overlay of the memory, a clone of the carry). Deferred retrieval
        groups are caught up first, on this state, so every fork starts exact (Stream.catch_up)."""
        self.engine.stream.catch_up(self)
        out = DocState(self.engine, OverlayMemory(self.memory), self.carry.clone(), None, self.index)
        out.mask, out.variants, out.bias, out.gated = self.mask, self.variants, self.bias, self.gated
        return out

    def dependency_map(self) -> list[dict]:
        """For each document chunk c >= 1: the chunks it retrieved (selected by landmark c-1) and
        their fusion weights, per retrieval group; chunk 0 and 1 retrieve nothing."""
        si, sw = self.memory.selections()
        out = []
        # chunk n exists (partially) when tokens follow the last completed chunk; its selection is stored
        S1 = self.engine.cfg.chunk_size - 1
        last = self.memory.n + 1 if self.carry.n_tokens > self.memory.n * S1 else self.memory.n
        for c in range(1, last):
            idx, w = si[c - 1], sw[c - 1]
            groups = []
            for g in range(idx.shape[0]):
                keep = w[g] > 0
                groups.append({"retrieved": idx[g][keep].tolist(),
                               "weights": [round(float(x), 5) for x in w[g][keep]]})
            out.append({"chunk": c, "retrieved": groups[0]["retrieved"], "weights": groups[0]["weights"],
                        "groups": groups})
        return out

    def checkpoint(self) -> None:
        """Commit the state to its directory (no-op in RAM)."""
        if self.directory is None:
            return
        save_carry(self.directory, self.memory, self.carry, self.engine.fingerprint, self.engine.cfg.arch)


# ----------------------------------------------------------------------------------------------
# the stream


class Stream:
    """The model run over a stream of positions, chunk by chunk (see the module's docstring)."""

    full_attention_capacity = 65536  # positions a full-attention baseline can hold while streaming

    def __init__(self, model: DRT, device: torch.device, use_faiss: bool = False):
        self.model, self.cfg, self.device, self.use_faiss = model, model.config, device, use_faiss
        c: DRTConfig = self.cfg
        if c.uses_chunks:
            self.attn_layers = [b.attn for b in model.lower] + [b.attn for g in model.groups for b in g]
        else:
            self.attn_layers = [b.attn for b in model.layers]
        self._preamble: tuple[list[KVWindow], torch.Tensor | None] | None = None

    # -- a new stream --------------------------------------------------------------------------------

    def new_memory(self, directory: Path | None, dtype) -> ChunkMemory:
        c = self.cfg
        G = c.num_groups
        if directory is None:
            return RamChunkMemory(c.hidden_size, c.chunk_size - 1, G, c.chunk_topk, np.float32)
        return MemmapChunkMemory(directory, c.hidden_size, c.chunk_size - 1, G, c.chunk_topk, dtype)

    def new_carry(self) -> Carry:
        c, dev = self.cfg, self.device
        G = c.num_groups if c.uses_chunks else 1
        k = c.chunk_topk
        win = c.window if c.arch != "full_attention" else self.full_attention_capacity + c.preamble_len
        if c.arch == "landmark":  # every position is kept (LandmarkAttention grows the array)
            win = 64 * c.chunk_size
        windows, tail = self.preamble_windows(win)
        if tail is None and c.uses_chunks and c.key_context:
            tail = torch.zeros(c.key_context, c.hidden_size, device=dev)
        return Carry(0, 0, windows, torch.zeros(G, k, dtype=torch.long, device=dev),
                     torch.zeros(G, k, device=dev), torch.zeros(0, c.hidden_size, device=dev),
                     key_tail=None if tail is None else tail.clone())

    def preamble_windows(self, win: int) -> tuple[list[KVWindow], torch.Tensor | None]:
        """Every layer's KVWindow as a stream starts: holding the stream preamble (config
        stream_preamble, computed once per stream) at attention positions 0..P-1, else empty; and
        the key encoder's context of chunk 0 that the preamble gives (None: none)."""
        c, dev = self.cfg, self.device
        if self._preamble is None:
            wins = [KVWindow.empty(1, c.num_heads, win, c.head_dim, dev, torch.float32)
                    for _ in self.attn_layers]
            self._preamble = (wins, self.model.preamble_caches(wins))
        wins, tail = self._preamble
        return [KVWindow(w.k.clone(), w.v.clone(), w.pos.clone(), w.next_pos) for w in wins], tail

    # -- feeding -------------------------------------------------------------------------------------

    def augment(self, carry: Carry, ids: Sequence[int]) -> tuple[list[int], list[bool]]:
        """The run's ids laid out as the batch forward lays out a stream (base.insert_landmarks),
        continuing from carry.pos: a landmark after every completed chunk."""
        c = self.cfg
        if not c.inserts_landmarks:
            return list(ids), [True] * len(ids)
        S = c.chunk_size
        aug, real = insert_landmarks(torch.tensor(list(ids), dtype=torch.long), c.lmk_token_id, S,
                                     carry.pos - carry.pos // S)
        return aug.tolist(), real.tolist()

    @torch.no_grad()
    def feed(self, state: DocState, ids: Sequence[int], want_logits: bool = False, record: list | None = None,
             block_chunks: int = 16, upper: bool = True, select: bool = True) -> torch.Tensor | None:
        """Engine.feed: append real tokens to the stream, in runs that end on chunk boundaries."""
        aug, real = self.augment(state.carry, ids)
        defer = not upper and not want_logits and self.can_defer and state.variants is None
        if not select and not defer:
            raise ValueError("select=False needs a deferred feed (upper=False on an engine that can_defer)")
        S = self.cfg.chunk_size if self.cfg.uses_chunks else 64
        step = block_chunks * S
        outs = []
        i = 0
        while i < len(aug):
            # runs end on chunk boundaries so long prefills work on whole chunks
            pos = state.carry.pos
            n = min(len(aug) - i, step - (pos % S) if pos % S else step)
            lg = self.run(state, aug[i:i + n], real[i:i + n], want_logits, record, defer, select)
            if want_logits:
                outs.append(lg)
            i += n
        state.carry.n_tokens += len(ids)
        if want_logits:  # [len(ids), V], or [Bv, len(ids), V] on a fork of fork_variants
            return torch.cat(outs, dim=-2) if outs else torch.zeros(0, self.cfg.vocab_size)
        return None

    @property
    def can_defer(self) -> bool:
        """Can the retrieval groups be deferred (feed upper=False)? With one group its selections
        depend on the lower layers alone, and its outputs at a position reach later positions only
        through its sliding windows: n_upper x window positions back at most (`catch_up_span`)."""
        return self.cfg.uses_chunks and self.cfg.num_groups == 1

    @property
    def catch_up_span(self) -> int:
        """Positions of lower-layer outputs kept while the groups are deferred: each upper layer's
        window reaches `window` positions back, so the last layer's keys are exact after n_upper x
        window positions from anywhere; +1 each for safety."""
        n_up = sum(len(g) for g in self.model.groups)
        return n_up * (self.cfg.window + 1)

    def catch_up(self, state: DocState) -> None:
        """Run the deferred retrieval groups over the positions kept in carry.mid, rebuilding their
        windows exactly (see `can_defer`); the windows' older positions, beyond what reaches the
        future, are emptied. Each chunk's GCA reads what its predecessor's landmark selected, as
        stored in the memory (the carried selection is the last of those)."""
        car = state.carry
        if not car.upper_stale:
            return
        c, mem, dev = self.cfg, state.memory, self.device
        S, nl = c.chunk_size, len(self.model.lower)
        r = 0 if car.mid is None else car.mid.shape[0]
        start = max(car.upper_pos, car.pos - r)
        if start > car.upper_pos:  # positions before `start` no longer reach the future
            for w in car.windows[nl:]:
                w.pos.fill_(-1)
                w.next_pos = start + c.preamble_len
        T = car.pos - start
        if T == 0:  # nothing kept (a state committed without its mid): the windows start empty
            car.upper_pos = car.pos
            return
        x = car.mid[r - T:][None]  # [1, T, D]
        ch0, ch1 = start // S, (car.pos - 1) // S
        si, sw = mem.selections()
        k = c.chunk_topk
        gi = torch.zeros(ch1 - ch0 + 1, k, dtype=torch.long)
        gw = torch.zeros(ch1 - ch0 + 1, k)
        for j, ch in enumerate(range(ch0, ch1 + 1)):
            if ch >= 1:
                gi[j], gw[j] = torch.from_numpy(np.asarray(si[ch - 1, 0], np.int64)), torch.from_numpy(
                    np.asarray(sw[ch - 1, 0], np.float32))
        if torch.isnan(gw).any():
            raise RuntimeError("the catch-up reaches chunks fed with select=False: feed the last "
                               f"{self.catch_up_span} positions before it with select=True")
        gca_fn = self.gca_fn(state, gi[None].to(dev), gw[None].to(dev), start, 0)
        apos = start + c.preamble_len
        for layer, win in zip(self.model.groups[0], car.windows[nl:]):
            x = layer(x, gca_fn, apos, win)
        car.upper_pos, car.mid = car.pos, None

    # -- one run -------------------------------------------------------------------------------------

    def run(self, state: DocState, aug: list[int], real: list[bool], want_logits: bool, record: list | None,
            defer: bool = False, select: bool = True):
        """One run of augmented positions (inside one block of chunks) through the model, in stages:
        the lower layers; the chunks the run completes, encoded and stored (store_chunks); the
        retrieval groups (groups); the logits, through the copy head's mixture where there is one.
        With `defer`, the groups' layers wait for catch_up. Returns logits [T', V] of the real
        positions (want_logits; [Bv, T', V] on a fork of fork_variants), else None."""
        model, c, car = self.model, self.cfg, state.carry
        if not defer:
            self.catch_up(state)
        pos0, T = car.pos, len(aug)
        apos = pos0 + c.preamble_len  # attention positions: the stream preamble holds 0..P-1
        # [1, T, D]; emb: the copy head's queries
        x = emb = model.embed(torch.tensor(aug, device=self.device)[None])
        layers = model.layers if not c.uses_chunks else model.lower
        for layer, win in zip(layers, car.windows):
            x = layer(x, apos, win)
        if not c.uses_chunks:  # the baselines: self-attention only
            car.pos += T
            car.upper_pos = car.pos
            return self.logits(x, real)[0] if want_logits else None
        copy = want_logits and model.copy_head is not None
        own, toks, c0, m = self.store_chunks(state, x[0], aug)
        x, reads = self.groups(state, x, pos0, T, own, toks, c0, m, record, defer, select)
        car.pos += T
        if defer:  # the lower layers' outputs that the deferred groups will need
            keep = self.catch_up_span
            car.mid = x[0, -keep:].clone() if car.mid is None else torch.cat([car.mid, x[0]])[-keep:].clone()
        else:
            car.upper_pos, car.mid = car.pos, None
        if not want_logits:
            return None
        pointer = (copy_pointer(model, state.memory, reads, pos0, x, emb[0], car.tok_buf)
                   if copy else None)
        logits = self.logits(x, real, pointer)  # [Bv, T', V]
        return logits if state.variants else logits[0]

    def store_chunks(self, state: DocState, x: torch.Tensor, aug: list[int]):
        """The chunks a run completes: their lower-layer states (the carry's buffer, then the run's
        x [T, D]) through the chunk encoder, appended to the memory with their token ids (the
        selections are set after the groups run). Returns (own-chunk features of the m completed
        chunks or None, their token ids [m, N] as numpy, the chunk index of the first, m)."""
        model, c, car, mem = self.model, self.cfg, state.carry, state.memory
        S, D = c.chunk_size, c.hidden_size
        full = torch.cat([car.h_buf, x])  # starts at the current chunk's first slot
        # one id per buffered state (a state saved before token ids were stored is refused on open)
        n_ids, n_states = len(car.tok_buf), len(car.h_buf)
        assert n_ids == n_states, f"carry: {n_ids} token ids, {n_states} states"
        full_tok = car.tok_buf + list(aug)  # the token id of every slot of `full`
        c0 = (car.pos - len(car.h_buf)) // S  # chunk index of full[0]
        m = len(full) // S  # chunks completed in this run
        own = toks = None
        if m:
            done = full[: m * S].view(m, S, D)
            keys, mk, mv, own = model.encode_chunks(done, car.key_tail)
            if car.key_tail is not None:  # what the key encoder of the next chunk reads of this one
                car.key_tail = key_tail(done[-1], c.key_context).clone()
            assert mem.n == c0, f"memory has {mem.n} chunks, stream is at chunk {c0}"
            G, k = c.num_groups, c.chunk_topk
            toks = np.asarray(full_tok[: m * S], dtype=np.int32).reshape(m, S)[:, : S - 1]
            gates = None
            if model.lexical is not None and model.lexical.gates is not None:  # config lexical_gates
                gates = model.lexical.word_gates(done[:, : S - 1]).float().cpu().numpy()
            mem.append(keys.float().cpu().numpy(), mk.float().cpu().numpy(), mv.float().cpu().numpy(),
                       np.zeros((m, G, k), np.int32), np.zeros((m, G, k), np.float32), toks, gates)
        car.h_buf = full[m * S:].clone()
        car.tok_buf = full_tok[m * S:]
        return own, toks, c0, m

    def groups(self, state: DocState, x: torch.Tensor, pos0: int, T: int, own, toks, c0: int, m: int,
               record: list | None, defer: bool, select: bool):
        """The retrieval groups over a run of x [1, T, D]: per group, the selections of the run's
        landmarks (select) and the group's layers with GCA over them (run_group; not with `defer`);
        then the selections stored and the last one carried. On a fork of fork_variants the groups
        run once per variant, batched (x [Bv, T, D]): nothing before them depends on the selection.
        Returns (x, run_group's reads: what the copy head reads)."""
        model, c, car = self.model, self.cfg, state.carry
        # the run's landmarks
        lmk_local = [t for t in range(T) if (pos0 + t) % c.chunk_size == c.chunk_size - 1]
        n_seg = (pos0 + T - 1) // c.chunk_size - pos0 // c.chunk_size + 1  # chunks the run touches
        Bv = len(state.variants or [state.mask])
        # [Bv, G, k] (views: writes land in car)
        sel_idx = car.sel_idx if state.variants else car.sel_idx[None]
        sel_w = car.sel_w if state.variants else car.sel_w[None]
        if Bv > 1:
            x = x.expand(Bv, -1, -1)
        new_idx, new_w, reads = [], [], []
        all_keys = torch.from_numpy(state.memory.keys()).to(self.device) if lmk_local else None
        wi = len(model.lower)
        for g, group in enumerate(model.groups):
            # selections of the chunks touched by this run: the carried one, then the in-run ones
            seg_idx, seg_w = [sel_idx[:, g]], [sel_w[:, g]]  # each [Bv, k]
            if lmk_local:
                # [Bv, m', k]
                idx, w = self.select(state, g, x, pos0, lmk_local, all_keys, own, toks, record, select)
                new_idx.append(idx[0]), new_w.append(w[0])  # the memory keeps the first variant's
                seg_idx += list(idx[:, : n_seg - 1].unbind(1))
                seg_w += list(w[:, : n_seg - 1].unbind(1))
            gi, gw = torch.stack(seg_idx[:n_seg], 1), torch.stack(seg_w[:n_seg], 1)  # [Bv, n_seg, k]
            if not defer:
                windows = car.windows[wi: wi + len(group)]
                x = self.run_group(state, g, group, x, gi, gw, pos0, T, windows, reads)
                wi += len(group)
            if lmk_local:
                sel_idx[:, g], sel_w[:, g] = idx[:, -1], w[:, -1]
        if m:  # rows are chunks whose landmark is in this run (the m completed chunks): [m, G, k]
            state.memory.set_selection(np.arange(c0, c0 + m),
                                       torch.stack(new_idx, dim=1).cpu().numpy().astype(np.int32),
                                       torch.stack(new_w, dim=1).float().cpu().numpy())
        return x, reads

    def select(self, state: DocState, g: int, x: torch.Tensor, pos0: int, lmk_local: list[int],
               all_keys: torch.Tensor, own, toks, record: list | None,
               select: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Group g's selections [Bv, m', k] (chunks, fusion weights) for the landmarks of a run from
        stream position pos0 at local positions lmk_local: the landmark queries of x [Bv, T, D]
        scored against every stored chunk's key (all_keys [n, D]) (landmark_scores), each
        variant's barred chunks masked, top-k (through faiss where the exact scores are not
        needed). Appends the rows to `record`. select=False (a deferred feed of a haystack): rows
        marked unselected, NaN weights."""
        c, dev = self.cfg, self.device
        masks = state.variants or [state.mask]
        Bv, S = len(masks), c.chunk_size
        if not select:
            return (torch.zeros(Bv, len(lmk_local), c.chunk_topk, dtype=torch.long, device=dev),
                    torch.full((Bv, len(lmk_local), c.chunk_topk), float("nan"), device=dev))
        # [Bv, m', D] group input at the landmarks; the landmarks of this run close the chunks
        # completed in it, whose own-chunk features (`own`) were just computed
        q = self.model.landmark_query(g, x[:, lmk_local], own)
        q_chunk = torch.tensor([(pos0 + t) // S for t in lmk_local], device=dev)
        scores, q = self.landmark_scores(state, g, q, q_chunk, all_keys, toks, record)
        idx, w = [], []
        for b, barred in enumerate(masks):
            # counterfactual masking (generate's `mask`, a variant's): barred chunks are never selected
            sb = None if scores is None else apply_mask(scores[b], barred) if barred else scores[b]
            # a mask needs the exact scores: the faiss path would not see it
            ib, wb = self.topk(sb, state.index, None if barred or q is None else q[b], q_chunk)
            idx.append(ib), w.append(wb)
            if record is not None and b == 0:
                for j, qc in enumerate(q_chunk.tolist()):
                    sc = sb[j, :qc].tolist()
                    if barred:  # a barred chunk has no score (None in JSON, not -inf)
                        sc = [None if e in barred else v for e, v in enumerate(sc)]
                    record.append({"group": g, "lmk_chunk": qc, "serves": qc + 1, "idx": ib[j].tolist(),
                                   "weights": wb[j].tolist(), "scores": sc})
        return torch.stack(idx), torch.stack(w)

    def landmark_scores(self, state: DocState, g: int, q: torch.Tensor, q_chunk: torch.Tensor,
                        all_keys: torch.Tensor, toks, record: list | None):
        """(scores [Bv, m', n] of the landmark queries q [Bv, m', D] of chunks q_chunk over every
        stored chunk, or None where the faiss path needs none; the queries faiss ranks by, or None).
        Group g's model.chunk_scores with the lexical terms (over the chunks' token ids `toks`),
        or the fixed retriever's cosines; plus the question's BM25 term when the state has one."""
        model, c, dev, index = self.model, self.cfg, self.device, state.index
        masks = state.variants or [state.mask]
        Bv = len(masks)
        k_chunk = torch.arange(all_keys.shape[0], device=dev)
        if c.arch == "fixed_retriever":  # the frozen MiniLM's cosines of the chunks' texts, / temperature
            e = index.embeddings(c)  # [n, 384]: the landmarks' own chunks are stored by now
            scores = fixed_scores(e[q_chunk], e, q_chunk, k_chunk, c.retriever_temperature)
            scores = scores[None].expand(Bv, -1, -1)
            return scores, None  # a faiss index holds landmark keys, which this model does not rank by
        # with use_faiss the dense scores are only computed when a trace records them
        lex = model.lexical is not None
        q_toks = torch.from_numpy(toks).to(dev)[None] if lex else None  # the chunks those landmarks close
        k_toks = index.tokens()[None] if lex else None
        # the running in-document counts
        stats = index.lexical_stats(model.lexical, c.vocab_size, c.pad_token_id) if lex else None
        exact = not self.use_faiss or record is not None or lex or any(masks) or state.bias is not None
        # config lexical_gates: the chunks' word gates, trained on how a passage cites an earlier one; a
        # generation fork's selections (state.gated False) keep the terms chosen on questions
        gated = lex and model.lexical.gates is not None and state.gated
        q_gates = index.word_gates()[q_chunk.cpu(), :, 0][None].to(dev) if gated else None
        k_gates = index.key_word_gates(model.lexical)[None].to(dev) if gated else None
        scores = (model.chunk_scores(g, q, all_keys[None].expand(Bv, -1, -1), q_chunk, k_chunk, q_toks,
                                     k_toks, stats=stats, q_gates=q_gates, k_gates=k_gates, gated=gated)
                  if exact else None)  # [Bv, m', n]
        if scores is not None and state.bias is not None:  # the question's BM25 term (question_bias)
            nb = min(state.bias.shape[0], scores.shape[-1])
            scores = torch.cat([scores[..., :nb] + state.bias[:nb].to(scores), scores[..., nb:]], -1)
        return scores, q

    def topk(self, scores: torch.Tensor | None, index: MemoryIndex, q: torch.Tensor | None = None,
             q_chunk: torch.Tensor | None = None):
        """Top-k past chunks per landmark and their fusion weights: idx [m', k] long, w [m', k].

        Exact path: `scores` [m', n] from retrieval_scores (<q, l>/sqrt(D), -inf unless e < c).
        use_faiss (and a query q): the memory's faiss index (MemoryIndex.faiss_topk), the same
        top-k."""
        k = self.cfg.chunk_topk
        if self.use_faiss and q is not None and self.model.lexical is None:  # lexical scores need every chunk
            return index.faiss_topk(q, q_chunk, k)
        if scores.shape[1] < k:  # pad so that select_topk returns k columns (extra get weight 0)
            scores = F.pad(scores, (0, k - scores.shape[1]), value=float("-inf"))
        return select_topk(scores, k, gumbel=False)

    def run_group(self, state: DocState, g: int, group, x: torch.Tensor, gi: torch.Tensor, gw: torch.Tensor,
                  pos0: int, T: int, windows: list, reads: list) -> torch.Tensor:
        """Group g's upper layers over the run, their GCA reading the selections gi, gw [Bv, n_seg,
        k] of the chunks the run touches. Appends (gi, gw, the memory keys GCA read) to `reads`
        (the copy head reads them)."""
        if torch.isnan(gw).any():
            raise RuntimeError("this run reads a selection that feed(select=False) skipped")
        gca_fn = self.gca_fn(state, gi, gw, pos0, g)
        reads.append((gi, gw, gca_fn.mem_k))
        apos = pos0 + self.cfg.preamble_len
        for layer, win in zip(group, windows):
            x = layer(x, gca_fn, apos, win)
        return x

    def gca_fn(self, state: DocState, sel_idx: torch.Tensor, sel_w: torch.Tensor, pos0: int, group: int):
        """GCA for a run of positions from pos0 touching n_seg chunks; segment s uses selection s:
        sel_idx and sel_w [n_seg, k], or [Bv, n_seg, k] for Bv variants of the run (its input then
        [Bv, T, D]); drt.read_chunks over the gathered K/V.

        The selected chunks' K/V are gathered from the chunk memory (RAM or disk, on the CPU) and
        moved to the engine's device once per selection: the gather is kept on `state.gathered`
        and reused by the following runs while the selection is unchanged (every decode step of a
        chunk), so decoding moves G gathers every S tokens, as in the paper."""
        c, mem = self.cfg, state.memory
        k = sel_idx.shape[-1]
        sel_idx, sel_w = sel_idx.reshape(-1, k), sel_w.reshape(-1, k)  # [Bv * n_seg, k]
        active = sel_w.sum(-1) > 0
        if not bool(active.any()):
            def off_fn(gca_mod, a):
                return no_gca(gca_mod, a)

            off_fn.mem_k = None
            return off_fn
        idx = sel_idx.cpu().numpy()
        # a stored chunk's K/V never change (the memory is append-only; open_state alone truncates)
        key = (id(mem), idx.shape, idx.tobytes())
        hit = state.gathered.get(group)
        if hit is not None and hit[0] == key:
            mem_k, gk, gv = hit[1]
            state.transfers.reused += 1
        else:
            k_np, v_np = mem.gather(idx)  # [rows, k, N, D]
            mem_k = self.to_device(k_np)
            gk, gv = heads_first(mem_k, c.num_heads), heads_first(self.to_device(v_np), c.num_heads)
            state.gathered[group] = (key, (mem_k, gk, gv))
            t = state.transfers
            t.gathers, t.chunks = t.gathers + 1, t.chunks + idx.size
            t.bytes += k_np.nbytes + v_np.nbytes
        off = pos0 % c.chunk_size

        def fn(gca_mod, a):  # a [Bv, T, D]
            return read_chunks(gca_mod, a, gk, gv, sel_w, off)

        fn.mem_k = mem_k  # the copy head reads the same keys (copy_selection)
        return fn

    def to_device(self, a: np.ndarray) -> torch.Tensor:
        """A gathered memory array as float32 on the engine's device (through pinned memory, without
        blocking the host, on CUDA)."""
        t = torch.from_numpy(np.asarray(a, dtype=np.float32))
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def logits(self, x: torch.Tensor, real: list[bool], copy=None) -> torch.Tensor:
        """Logits [B, T', V] of the real positions of x [B, T, D] (float32)."""
        keep = torch.tensor(real, device=x.device)
        logits = self.model.lm_head(self.model.norm(x[:, keep])).float()
        if copy is not None:  # log-probabilities of the LM/pointer mixture, as in the batch forward
            logits = mix_copy(logits, *(t[:, keep] for t in copy))
        return logits
