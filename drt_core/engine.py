"""Inference engine: streaming prefill into a chunk store, generation with retrieval traces.

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
      attention positions 0..P-1 (computed once per engine, `_preamble_windows`): stream position p
      attends at p + P, chunks and token counts are unchanged;
    - the fixed_retriever baseline streams too: its chunk scores are the frozen MiniLM's cosines of
      the stored chunks' texts (`_memory_embeddings`), not landmark scores;
    - with one retrieval group, `prefill` defers the group's layers (feed upper=False): what a chunk
      stores and what its landmark selects come from the lower layers alone, and the group's outputs
      reach later positions only through its sliding windows, so they are run once, over the last
      n_upper x window positions, when the state is next forked or fed (`_catch_up`): about half the
      prefill's work, with the same numbers (tests/drt_core/test_engine.py).

The stream is processed in runs of positions (`_run`): a run may start and end anywhere in a chunk
(a prefill block of many chunks, a prompt, one decoded token). Inside a run the computation is
exactly the batch model's (tests/drt_core/test_engine.py checks logits against DRTForCausalLM).

States persist under a directory (`open_state(dir)`): the chunk memory's files, `carry-<n>.safetensors`
(the sliding-window caches, the carried selection, the partial chunk's buffers) and meta.json, the
commit record written last. `prefill` checkpoints every few blocks, so a killed ingest resumes from
its last checkpoint and ends with the same states as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from store.chunk_store import ChunkMemory, MemmapChunkMemory, RamChunkMemory, atomic_write_bytes

from .attention import KVWindow
from .config import RETIRED, DRTConfig
from .copy_head import copy_selection, mix_copy
from .fixed_retriever import fixed_scores
from .lexical import LexicalStats, distinct_tokens
from .modeling import DRTForCausalLM, select_topk

logger = logging.getLogger(__name__)

ENGINE_VERSION = 1  # bump when the state format or the state-changing computation changes


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
    # deferred retrieval groups (Engine.feed upper=False): the groups' windows are exact for the
    # positions before `upper_pos`; `mid` holds the lower layers' outputs [r, D] of the last r
    # positions (r <= Engine._catch_up_span), from which Engine._catch_up rebuilds them exactly
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


class OverlayMemory(ChunkMemory):
    """A read-only base memory plus chunks appended in RAM: generation never mutates a stored doc."""

    def __init__(self, base: ChunkMemory):
        self.base = base
        self.D, self.N, self.G, self.k = base.D, base.N, base.G, base.k
        self.top = RamChunkMemory(base.D, base.N, base.G, base.k, np.float32)
        self.n0 = base.n

    @property
    def n(self) -> int:
        return self.n0 + self.top.n

    def append(self, *rows) -> None:
        self.top.append(*rows)

    def set_selection(self, rows, sel_idx, sel_w) -> None:
        rows = np.asarray(rows)
        assert (rows >= self.n0).all(), "generation must not rewrite the stored document"
        self.top.set_selection(rows - self.n0, sel_idx, sel_w)

    def keys(self) -> np.ndarray:
        return np.concatenate([self.base.keys(), self.top.keys()]) if self.top.n else self.base.keys()

    def gather(self, idx):
        return self._merge(idx, lambda mem, rows: mem.gather(rows), 2)

    def gather_keys(self, idx):
        return self._merge(idx, lambda mem, rows: (mem.gather_keys(rows),), 1)[0]

    def _merge(self, idx, read, n_out: int) -> tuple[np.ndarray, ...]:
        """read(memory, rows) -> n_out arrays [len(rows), N, D], from the base for rows below n0
        and from the RAM top above, put back in idx's order and shape."""
        idx = np.asarray(idx)
        lo = idx < self.n0
        out = tuple(np.zeros((*idx.shape, self.N, self.D), np.float32) for _ in range(n_out))
        for rows, mem, off in ((lo, self.base, 0), (~lo, self.top, self.n0)):
            if rows.any():
                for o, part in zip(out, read(mem, idx[rows] - off)):
                    o[rows] = part
        return out

    def tokens(self, idx):
        idx = np.asarray(idx)
        lo = idx < self.n0
        out = np.zeros((*idx.shape, self.N), np.int32)
        if lo.any():
            out[lo] = self.base.tokens(idx[lo])
        if (~lo).any():
            out[~lo] = self.top.tokens(idx[~lo] - self.n0)
        return out

    def selections(self):
        bi, bw = self.base.selections()
        ti, tw = self.top.selections()
        return np.concatenate([bi, ti]), np.concatenate([bw, tw])


@dataclass
class Transfers:
    """Chunk-memory reads onto the engine's device (`_stream_gca_fn`): how many gathers of a group's
    selected chunks, how many chunk K/V pairs and bytes they moved, and how many runs reused the
    last gather instead."""

    gathers: int = 0
    chunks: int = 0
    bytes: int = 0
    reused: int = 0


class DocState:
    """The stream state of one document under one model: chunk memory + carry (+ a directory)."""

    def __init__(self, engine: "Engine", memory: ChunkMemory, carry: Carry, directory: Path | None):
        self.engine, self.memory, self.carry, self.directory = engine, memory, carry, directory
        self.lock = threading.Lock()
        # document chunks barred from retrieval (Engine.generate's `mask`; set on generation forks only)
        self.mask: frozenset[int] = frozenset()
        # a fork of Engine._fork_variants: one row per set of barred chunks, run side by side (batched)
        # from the retrieval groups on; None for every other state
        self.variants: list[frozenset[int]] | None = None
        # [n_doc_chunks] added to every selection's scores of the document's chunks (a question's
        # BM25 term, Engine.question_bias; set on generation forks only)
        self.bias: torch.Tensor | None = None
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
        groups are caught up first, on this state, so every fork starts exact (Engine._catch_up)."""
        self.engine._catch_up(self)
        out = DocState(self.engine, OverlayMemory(self.memory), self.carry.clone(), None)
        out.mask, out.variants, out.bias = self.mask, self.variants, self.bias
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
                groups.append({"retrieved": idx[g][keep].tolist(), "weights": [round(float(x), 5) for x in w[g][keep]]})
            out.append({"chunk": c, "retrieved": groups[0]["retrieved"], "weights": groups[0]["weights"],
                        "groups": groups})
        return out

    def checkpoint(self) -> None:
        """Commit the state to its directory (no-op in RAM)."""
        if self.directory is None:
            return
        self.engine._save_carry(self)


# ----------------------------------------------------------------------------------------------
# traces and events


@dataclass
class RetrievalTrace:
    """For every generated chunk: the chunks its tokens retrieved (top-k, per group), their fusion
    weights, and the relevance scores over all past chunks (what the heatmap draws)."""

    n_doc_chunks: int
    rows: list[dict] = field(default_factory=list)  # {"gen_chunk", "topk", "weights", "scores", "groups"}
    masked: list[int] = field(default_factory=list)  # chunks barred from retrieval (their scores: None)

    def to_json(self) -> dict:
        out = {"n_doc_chunks": self.n_doc_chunks, "chunks": self.rows}
        if self.masked:  # only when masked: an unmasked trace stays as it was
            out["masked"] = list(self.masked)
        return out


@dataclass
class PrefillProgress:
    done_tokens: int
    total_tokens: int
    tokens_per_s: float
    done_chunks: int = 0


@dataclass
class GenEvent:
    token_id: int | None
    text_delta: str
    done: bool = False
    answer: str | None = None
    trace: RetrievalTrace | None = None
    stop_reason: str | None = None
    ids: list[int] | None = None  # the generated token ids (done event; what answer_logprob scores)


# ----------------------------------------------------------------------------------------------
# the engine


class Engine:
    def __init__(self, model: DRTForCausalLM, tokenizer=None, device: str | torch.device = "cpu",
                 memory_dtype=np.float16, fingerprint: str | None = None, use_faiss: bool = False):
        self.model = model.eval().to(device)
        self.cfg: DRTConfig = model.config
        self.config = self.cfg
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.memory_dtype = np.dtype(memory_dtype)
        self.use_faiss = use_faiss
        self.fingerprint = fingerprint or self._fingerprint_of(model, tokenizer)
        self.model_dir: Path | None = None  # the checkpoint folder (from_pretrained sets it)
        c = self.cfg
        if c.uses_chunks:
            self.attn_layers = [b.attn for b in model.lower] + [b.attn for g in model.groups for b in g]
        else:
            self.attn_layers = [b.attn for b in model.layers]

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, device: str = "cpu", **kw) -> "Engine":
        from .errors import ModelNotFound

        p = Path(path)
        if not (p / "config.json").exists() or not (p / "model.safetensors").exists():
            # weights are read from safetensors only: a pickle (.bin / .pt) is never unpickled
            raise ModelNotFound(f"no model at {p} (expected config.json and model.safetensors)")
        from safetensors import SafetensorError

        try:
            model = DRTForCausalLM.from_pretrained(str(p), use_safetensors=True)
        except SafetensorError as e:
            from .errors import CorruptCheckpoint

            raise CorruptCheckpoint(f"{p / 'model.safetensors'} is damaged and cannot be loaded: {e}") from e
        tok = None
        if (p / "tokenizer.json").exists():
            from .tokenizer import load_tokenizer

            tok = load_tokenizer(p)
            if getattr(model, "lexical", None) is not None and model.lexical.words is not None:
                from .words import word_tables

                model.lexical.set_word_tables(word_tables(tok))  # this checkpoint's own tokenizer
        # the config as the states depend on it (_state_config), not config.json's bytes
        fp = _hash_files([p / "model.safetensors", p / "tokenizer.json"],
                         extra=json.dumps(_state_config(model.config), sort_keys=True)
                         + f"engine{ENGINE_VERSION}/{np.dtype(kw.get('memory_dtype', np.float16)).name}")
        eng = cls(model, tok, device=device, fingerprint=fp, **kw)
        eng.model_dir = p  # what else the checkpoint ships (qa.abstain's common-word list)
        return eng

    def _fingerprint_of(self, model, tokenizer) -> str:
        h = hashlib.sha256()
        for k, v in sorted(model.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().float().cpu().numpy().tobytes())
        h.update(json.dumps(_state_config(self.cfg), sort_keys=True).encode())
        h.update(f"engine{ENGINE_VERSION}/{self.memory_dtype.name}".encode())
        return h.hexdigest()[:16]

    # -- states ------------------------------------------------------------------------------------

    def _new_carry(self) -> Carry:
        c, dev = self.cfg, self.device
        G = c.num_groups if c.uses_chunks else 1
        k = c.chunk_topk
        win = c.window if c.arch != "full_attention" else self.full_attention_capacity + c.preamble_len
        if c.arch == "landmark":  # every position is kept (LandmarkAttention grows the array)
            win = 64 * c.chunk_size
        windows, tail = self._preamble_windows(win)
        if tail is None and c.uses_chunks and c.key_context:
            tail = torch.zeros(c.key_context, c.hidden_size, device=dev)
        return Carry(0, 0, windows, torch.zeros(G, k, dtype=torch.long, device=dev),
                     torch.zeros(G, k, device=dev), torch.zeros(0, c.hidden_size, device=dev),
                     key_tail=None if tail is None else tail.clone())

    full_attention_capacity = 65536  # positions a full-attention baseline can hold while streaming

    def _preamble_windows(self, win: int) -> tuple[list[KVWindow], torch.Tensor | None]:
        """Every layer's KVWindow as a stream starts: holding the stream preamble (config
        stream_preamble, computed once per engine) at attention positions 0..P-1, else empty; and
        the key encoder's context of chunk 0 that the preamble gives (None: none)."""
        c, dev = self.cfg, self.device
        base = self.__dict__.get("_preamble_base")
        if base is None:
            wins = [KVWindow.empty(1, c.num_heads, win, c.head_dim, dev, torch.float32) for _ in self.attn_layers]
            base = self._preamble_base = (wins, self.model.preamble_caches(wins))
        wins, tail = base
        return [KVWindow(w.k.clone(), w.v.clone(), w.pos.clone(), w.next_pos) for w in wins], tail

    def _memory(self, directory: Path | None) -> ChunkMemory:
        c = self.cfg
        G = c.num_groups
        if directory is None:
            return RamChunkMemory(c.hidden_size, c.chunk_size - 1, G, c.chunk_topk, np.float32)
        return MemmapChunkMemory(directory, c.hidden_size, c.chunk_size - 1, G, c.chunk_topk, self.memory_dtype)

    def new_state(self, directory: str | os.PathLike | None = None) -> DocState:
        """A fresh stream: in RAM (directory None) or in a state directory (created)."""
        if directory is not None:
            return self.open_state(directory)
        return DocState(self, self._memory(None), self._new_carry(), None)

    def open_state(self, directory: str | os.PathLike) -> DocState:
        """Create or reopen the state stored in `directory` (as of its last commit)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = MemmapChunkMemory.read_meta(d)
        if meta is not None and meta.get("model_fp") not in (None, self.fingerprint):
            from .errors import CheckpointMismatch

            raise CheckpointMismatch(f"states in {d} were computed by model {meta.get('model_fp')}, not {self.fingerprint}")
        mem = self._memory(d)
        carry = self._new_carry()
        # a kill between writing a carry file and committing meta.json can leave an orphan: drop it
        for f in d.glob("carry-*.safetensors*"):
            if meta is None or f.name != meta.get("carry"):
                f.unlink(missing_ok=True)
        if meta is not None and meta.get("carry"):
            from safetensors.torch import load_file

            t = load_file(str(d / meta["carry"]), device=str(self.device))
            carry.pos, carry.n_tokens = int(meta["pos"]), int(meta["n_tokens"])
            carry.sel_idx, carry.sel_w, carry.h_buf = t["sel_idx"], t["sel_w"], t["h_buf"]
            carry.tok_buf = t["tok_buf"].tolist()
            if carry.key_tail is not None:
                carry.key_tail = t["key_tail"]
            for i, w in enumerate(carry.windows):
                w.k, w.v, w.pos, w.next_pos = t[f"w{i}.k"], t[f"w{i}.v"], t[f"w{i}.pos"], carry.pos + self.cfg.preamble_len
            # a state committed with its retrieval groups deferred (Engine.prefill): caught up on demand
            carry.upper_pos = int(meta.get("upper_pos", carry.pos))
            carry.mid = t.get("mid")
            nl = len(self.model.lower) if self.cfg.uses_chunks else len(carry.windows)
            for w in carry.windows[nl:]:  # the ring's positions as of upper_pos (stale ones are never read)
                w.next_pos = carry.upper_pos + self.cfg.preamble_len
        elif mem.n:
            mem.truncate(0)
        return DocState(self, mem, carry, d)

    def _save_carry(self, state: DocState) -> None:
        from safetensors.torch import save

        d, car = state.directory, state.carry
        name = f"carry-{car.n_tokens}.safetensors"
        atomic_write_bytes(d / name, save({k: v.cpu() for k, v in car.tensors().items()}))
        old = state.memory.meta.get("carry")
        state.memory.commit({"carry": name, "pos": car.pos, "n_tokens": car.n_tokens, "model_fp": self.fingerprint,
                             "arch": self.cfg.arch, "upper_pos": car.upper_pos})
        if old and old != name:
            try:
                (d / old).unlink()
            except FileNotFoundError:
                pass

    # -- the stream ----------------------------------------------------------------------------------

    def _augment(self, carry: Carry, ids: Sequence[int]) -> tuple[list[int], list[bool]]:
        """Insert a landmark after every completed chunk, continuing from carry.pos."""
        c = self.cfg
        if not c.inserts_landmarks:
            return list(ids), [True] * len(ids)
        S = c.chunk_size
        out, real = [], []
        p = carry.pos
        for t in ids:
            out.append(int(t)), real.append(True)
            p += 1
            if p % S == S - 1:
                out.append(c.lmk_token_id), real.append(False)
                p += 1
        return out, real

    @torch.no_grad()
    def feed(self, state: DocState, ids: Sequence[int], want_logits: bool = False, record: list | None = None,
             block_chunks: int = 16, upper: bool = True, select: bool = True) -> torch.Tensor | None:
        """Append real tokens to the stream. Returns logits [len(ids), V] when asked (float32).

        upper=False defers the retrieval groups where that is exact (`can_defer`; never with
        logits): only the lower layers, the chunk encoder, the memory and the selections are
        computed, and the groups' windows are rebuilt from the last positions' lower-layer
        outputs when next needed (`_catch_up`), with the same numbers as if they had run.

        select=False (deferred feeds only) skips the landmarks' selections too: at millions of
        tokens scoring every past chunk at every landmark is most of a prefill, and with the groups
        deferred only the selections of the last `_catch_up_span` positions are ever read. The
        skipped rows hold NaN weights; a catch-up or a run that would read one raises. For streams
        whose per-chunk selections nobody reads (the NIAH bench's haystack: its last chunks are fed
        with select=True before the question), never for a library's documents (their trace)."""
        aug, real = self._augment(state.carry, ids)
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
            lg = self._run(state, aug[i:i + n], real[i:i + n], want_logits, record, defer, select)
            if want_logits:
                outs.append(lg)
            i += n
        state.carry.n_tokens += len(ids)
        if want_logits:  # [len(ids), V], or [Bv, len(ids), V] on a fork of _fork_variants
            return torch.cat(outs, dim=-2) if outs else torch.zeros(0, self.cfg.vocab_size)
        return None

    @property
    def can_defer(self) -> bool:
        """Can the retrieval groups be deferred (feed upper=False)? With one group its selections
        depend on the lower layers alone, and its outputs at a position reach later positions only
        through its sliding windows: n_upper x window positions back at most (`_catch_up_span`)."""
        return self.cfg.uses_chunks and self.cfg.num_groups == 1

    @property
    def _catch_up_span(self) -> int:
        """Positions of lower-layer outputs kept while the groups are deferred: each upper layer's
        window reaches `window` positions back, so the last layer's keys are exact after n_upper x
        window positions from anywhere; +1 each for safety."""
        n_up = sum(len(g) for g in self.model.groups)
        return n_up * (self.cfg.window + 1)

    def _catch_up(self, state: DocState) -> None:
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
                               f"{self._catch_up_span} positions before it with select=True")
        gca_fn = self._stream_gca_fn(mem, gi[None].to(dev), gw[None].to(dev), start, T, state, 0)
        apos = start + c.preamble_len
        for layer, win in zip(self.model.groups[0], car.windows[nl:]):
            x = layer(x, gca_fn, apos, win)
        car.upper_pos, car.mid = car.pos, None

    def _run(self, state: DocState, aug: list[int], real: list[bool], want_logits: bool, record: list | None,
             defer: bool = False, select: bool = True):
        """One run of augmented positions (inside one block of chunks) through the model, in stages:
        the lower layers; the chunks the run completes, encoded and stored (_store_chunks); per
        retrieval group, the selections of the run's landmarks (_select) and the group's layers
        with GCA over them (_run_group); the selections stored; the logits, through the copy head's
        mixture where there is one (_copy). With `defer`, the groups' layers wait for _catch_up."""
        model, c, car = self.model, self.cfg, state.carry
        if not defer:
            self._catch_up(state)
        pos0, T = car.pos, len(aug)
        apos = pos0 + c.preamble_len  # attention positions: the stream preamble holds 0..P-1
        x = emb = model.embed(torch.tensor(aug, device=self.device)[None])  # [1, T, D]; emb: the copy head's queries
        layers = model.layers if not c.uses_chunks else model.lower
        for layer, win in zip(layers, car.windows):
            x = layer(x, apos, win)
        if not c.uses_chunks:  # the baselines: self-attention only
            car.pos += T
            car.upper_pos = car.pos
            return self._logits(x, real)[0] if want_logits else None
        # the copy head's query-side tokens, read before the token buffer moves on (logits only)
        queries = self._copy_queries(state, aug, real) if want_logits and model.copy_head is not None else None
        own, toks, c0, m = self._store_chunks(state, x[0], aug)
        lmk_local = [t for t in range(T) if (pos0 + t) % c.chunk_size == c.chunk_size - 1]  # the run's landmarks
        n_seg = (pos0 + T - 1) // c.chunk_size - pos0 // c.chunk_size + 1  # chunks the run touches
        # the groups run once per variant (a fork of _fork_variants: one row per set of barred chunks,
        # batched) or once (every other state); nothing before them depends on the selection
        Bv = len(state.variants or [state.mask])
        sel_idx = car.sel_idx if state.variants else car.sel_idx[None]  # [Bv, G, k] (views: writes land in car)
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
                idx, w = self._select(state, g, x, pos0, lmk_local, all_keys, own, toks, record, select)  # [Bv, m', k]
                new_idx.append(idx[0]), new_w.append(w[0])  # the memory keeps the first variant's
                seg_idx += list(idx[:, : n_seg - 1].unbind(1))
                seg_w += list(w[:, : n_seg - 1].unbind(1))
            gi, gw = torch.stack(seg_idx[:n_seg], 1), torch.stack(seg_w[:n_seg], 1)  # [Bv, n_seg, k]
            if not defer:
                x = self._run_group(state, g, group, x, gi, gw, pos0, T, car.windows[wi: wi + len(group)], reads)
                wi += len(group)
            if lmk_local:
                sel_idx[:, g], sel_w[:, g] = idx[:, -1], w[:, -1]
        if m:  # rows are chunks whose landmark is in this run (the m completed chunks)
            state.memory.set_selection(np.arange(c0, c0 + m),
                                       torch.stack(new_idx, dim=1).cpu().numpy().astype(np.int32),  # [m, G, k]
                                       torch.stack(new_w, dim=1).float().cpu().numpy())
        car.pos += T
        if defer:  # the lower layers' outputs that the deferred groups will need
            keep = self._catch_up_span
            car.mid = x[0, -keep:].clone() if car.mid is None else torch.cat([car.mid, x[0]])[-keep:].clone()
        else:
            car.upper_pos, car.mid = car.pos, None
        if not want_logits:
            return None
        copy = self._copy(state, reads, pos0, x, emb[0], queries) if model.copy_head is not None else None
        logits = self._logits(x, real, copy)  # [Bv, T', V]
        return logits if state.variants else logits[0]

    def _store_chunks(self, state: DocState, x: torch.Tensor, aug: list[int]):
        """The chunks a run completes: their lower-layer states (the carry's buffer, then the run's
        x [T, D]) through the chunk encoder, appended to the memory with their token ids (the
        selections are set after the groups run). Returns (own-chunk features of the m completed
        chunks or None, their token ids [m, N] as numpy, the chunk index of the first, m)."""
        model, c, car, mem = self.model, self.cfg, state.carry, state.memory
        S, D = c.chunk_size, c.hidden_size
        full = torch.cat([car.h_buf, x])  # starts at the current chunk's first slot
        if len(car.tok_buf) != len(car.h_buf):  # a state saved before token ids were kept: pad ids
            n = len(car.h_buf)
            tail = car.tok_buf[len(car.tok_buf) - n:] if n else []
            car.tok_buf = [c.pad_token_id] * (n - len(tail)) + tail
        full_tok = car.tok_buf + list(aug)  # the token id of every slot of `full`
        c0 = (car.pos - len(car.h_buf)) // S  # chunk index of full[0]
        m = len(full) // S  # chunks completed in this run
        own = toks = None
        if m:
            done = full[: m * S].view(m, S, D)
            keys, mk, mv, own = model.encode_chunks(done, car.key_tail)
            if car.key_tail is not None:
                car.key_tail = done[-1, S - 1 - c.key_context: S - 1].clone()
            assert mem.n == c0, f"memory has {mem.n} chunks, stream is at chunk {c0}"
            G, k = c.num_groups, c.chunk_topk
            toks = np.asarray(full_tok[: m * S], dtype=np.int32).reshape(m, S)[:, : S - 1]
            mem.append(keys.float().cpu().numpy(), mk.float().cpu().numpy(), mv.float().cpu().numpy(),
                       np.zeros((m, G, k), np.int32), np.zeros((m, G, k), np.float32), toks)
        car.h_buf = full[m * S:].clone()
        car.tok_buf = full_tok[m * S:]
        return own, toks, c0, m

    def _select(self, state: DocState, g: int, x: torch.Tensor, pos0: int, lmk_local: list[int],
                all_keys: torch.Tensor, own, toks, record: list | None,
                select: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Group g's selections [Bv, m', k] (chunks, fusion weights) for the landmarks of a run from
        stream position pos0 at local positions lmk_local: the landmark queries of x [Bv, T, D]
        scored against every stored chunk's key (all_keys [n, D]) (model.chunk_scores, with the lexical terms; the fixed retriever's cosines; the
        question's BM25 term when the state has one), each variant's barred chunks masked, top-k
        (through faiss where the exact scores are not needed). Appends the rows to `record`.
        select=False (a deferred feed of a haystack): rows marked unselected, NaN weights."""
        model, c, mem, dev = self.model, self.cfg, state.memory, self.device
        masks = state.variants or [state.mask]
        Bv, S = len(masks), c.chunk_size
        if not select:
            return (torch.zeros(Bv, len(lmk_local), c.chunk_topk, dtype=torch.long, device=dev),
                    torch.full((Bv, len(lmk_local), c.chunk_topk), float("nan"), device=dev))
        # [Bv, m', D] group input at the landmarks; the landmarks of this run close the chunks
        # completed in it, whose own-chunk features (`own`) were just computed
        q = model.landmark_query(g, x[:, lmk_local], own)
        q_chunk = torch.tensor([(pos0 + t) // S for t in lmk_local], device=dev)
        k_chunk = torch.arange(all_keys.shape[0], device=dev)
        if c.arch == "fixed_retriever":  # the frozen MiniLM's cosines of the chunks' texts, / temperature
            e = self._memory_embeddings(mem)  # [n, 384]: the landmarks' own chunks are stored by now
            scores = fixed_scores(e[q_chunk], e, q_chunk, k_chunk, c.retriever_temperature)[None].expand(Bv, -1, -1)
            q = None  # a faiss index holds landmark keys, which this model does not rank by
        else:
            # with use_faiss the dense scores are only computed when a trace records them
            lex = model.lexical is not None
            q_toks = torch.from_numpy(toks).to(dev)[None] if lex else None  # the chunks those landmarks close
            k_toks = self._memory_tokens(mem)[None] if lex else None
            stats = self._lexical_stats(mem) if lex else None  # running in-document counts
            exact = not self.use_faiss or record is not None or lex or any(masks) or state.bias is not None
            scores = (model.chunk_scores(g, q, all_keys[None].expand(Bv, -1, -1), q_chunk, k_chunk, q_toks,
                                         k_toks, stats=stats) if exact else None)  # [Bv, m', n]
            if scores is not None and state.bias is not None:  # the question's BM25 term (question_bias)
                nb = min(state.bias.shape[0], scores.shape[-1])
                scores = torch.cat([scores[..., :nb] + state.bias[:nb].to(scores), scores[..., nb:]], -1)
        idx, w = [], []
        for b, barred in enumerate(masks):
            # counterfactual masking (generate's `mask`, a variant's): barred chunks are never selected
            sb = None if scores is None else self._apply_mask(scores[b], barred) if barred else scores[b]
            # a mask needs the exact scores: the faiss path would not see it
            ib, wb = self._topk(sb, mem, None if barred or q is None else q[b], q_chunk)
            idx.append(ib), w.append(wb)
            if record is not None and b == 0:
                for j, qc in enumerate(q_chunk.tolist()):
                    sc = sb[j, :qc].tolist()
                    if barred:  # a barred chunk has no score (None in JSON, not -inf)
                        sc = [None if e in barred else v for e, v in enumerate(sc)]
                    record.append({"group": g, "lmk_chunk": qc, "serves": qc + 1, "idx": ib[j].tolist(),
                                   "weights": wb[j].tolist(), "scores": sc})
        return torch.stack(idx), torch.stack(w)

    def _run_group(self, state: DocState, g: int, group, x: torch.Tensor, gi: torch.Tensor, gw: torch.Tensor,
                   pos0: int, T: int, windows: list, reads: list) -> torch.Tensor:
        """Group g's upper layers over the run, their GCA reading the selections gi, gw [Bv, n_seg,
        k] of the chunks the run touches. Appends (gi, gw, the memory keys GCA read) to `reads`
        (the copy head reads them)."""
        if torch.isnan(gw).any():
            raise RuntimeError("this run reads a selection that feed(select=False) skipped")
        gca_fn = self._stream_gca_fn(state.memory, gi, gw, pos0, T, state, g)
        reads.append((gi, gw, gca_fn.mem_k))
        apos = pos0 + self.cfg.preamble_len
        for layer, win in zip(group, windows):
            x = layer(x, gca_fn, apos, win)
        return x

    def _copy_queries(self, state: DocState, aug: list[int], real: list[bool]) -> dict:
        """The copy head's query-side tokens of a run, from the carry's token buffer before the run
        moves it on: the real token before each position (copy_bigram) and the n real tokens ending
        at each (copy_match)."""
        head, car, mem = self.model.copy_head, state.carry, state.memory
        return {"before": self._tokens_before(mem, car.tok_buf, car.pos, aug, real) if head.bigram else None,
                "history": (self._token_history(mem, car.tok_buf, car.pos, aug, real, head.match)
                            if head.match else None)}

    def _copy(self, state: DocState, reads: list, pos0: int, x: torch.Tensor, emb: torch.Tensor, queries: dict):
        """The copy head over the groups' selections it reads (copy_selection) with their memory keys:
        _stream_copy's (gate, pointer weights, their token ids)."""
        c = self.cfg
        if c.copy_groups == "all" and len(reads) > 1:
            N, D = c.chunk_size - 1, c.hidden_size
            ks = [mk if mk is not None else torch.zeros(si.numel() // si.shape[-1], si.shape[-1], N, D,
                                                        device=self.device) for si, _, mk in reads]
            mem_k = None if all(mk is None for *_, mk in reads) else torch.cat(ks, dim=1)
        else:
            mem_k = reads[-1][2]
        gi, gw = copy_selection([(si, sw) for si, sw, _ in reads], c.copy_groups)
        return self._stream_copy(state.memory, gi, gw, pos0, x, emb, queries["before"], mem_k, queries["history"],
                                 state.carry.tok_buf)

    def _memory_tokens(self, mem: ChunkMemory) -> torch.Tensor:
        """[n, N] token ids of every stored chunk (what a lexical model's scores read), cached per
        memory and grown as it grows; a generation fork starts from its base memory's cache."""
        import weakref

        cache = self.__dict__.setdefault("_token_cache", weakref.WeakKeyDictionary())
        have = cache.get(mem)
        if have is None and isinstance(mem, OverlayMemory):
            base = cache.get(mem.base)
            have = base[: mem.n0] if base is not None and len(base) >= mem.n0 else None
        n = mem.n
        if have is None or len(have) > n:
            have = torch.zeros(0, mem.N, dtype=torch.int32)
        if len(have) < n:
            new = torch.from_numpy(np.asarray(mem.tokens(np.arange(len(have), n)), dtype=np.int32))
            have = torch.cat([have, new])
        cache[mem] = have
        return have.to(self.device)

    def _memory_embeddings(self, mem: ChunkMemory) -> torch.Tensor:
        """[n, 384] frozen MiniLM embeddings of every stored chunk's text (the fixed_retriever
        baseline's keys and queries, drt_core.fixed_retriever), cached like _memory_tokens and
        computed from the stored token ids (a reopened state recomputes them)."""
        from .fixed_retriever import EMBED_DIM, embed_chunks

        return self._per_chunk("_embedding_cache", mem,
                               lambda toks: embed_chunks(toks.long(), self.cfg)[:, 0],  # one chunk a row
                               lambda toks: torch.zeros(0, EMBED_DIM, device=toks.device))

    def _lexical_stats(self, mem: ChunkMemory) -> LexicalStats:
        """The memory's LexicalStats, cached per memory. A generation fork starts from a copy of
        its base memory's counts, first brought up to the chunks they share: every question about
        a stored document then counts only its own new chunks (the first one after a reopen counts
        the document once, for all the questions after it)."""
        import weakref

        lex, pad = self.model.lexical, self.cfg.pad_token_id
        kt = self._per_chunk("_distinct_token_cache", mem, lambda t: distinct_tokens(t, pad),
                             lambda t: t[:0].long())[None]
        kw = (self._per_chunk("_distinct_word_cache", mem, lambda t, c: distinct_tokens(lex.word_ids(t[None], c)[0], 0),
                              lambda t: t[:0].long(), context=1)[None] if lex.words is not None else None)
        cache = self.__dict__.setdefault("_lexstats_cache", weakref.WeakKeyDictionary())
        st = cache.get(mem)
        if st is None and isinstance(mem, OverlayMemory):
            base = self._lexical_stats(mem.base)  # the base's chunks never change under a fork
            base._count_before(min(mem.n0, base.key_tokens.shape[1]))
            st = base.copy_for(kt, kw)
        if st is None or st.n > kt.shape[1]:  # new, or the memory was truncated below the counts
            st = LexicalStats(self.cfg.vocab_size, kt, kw)
        st.key_tokens, st.key_words = kt, kw
        cache[mem] = st
        return st

    def _per_chunk(self, name: str, mem: ChunkMemory, compute, empty, context: int = 0) -> torch.Tensor:
        """A per-chunk function of the stored token ids, for every stored chunk: cached per memory
        (`name`), grown as the memory grows; a generation fork starts from its base memory's rows.
        context > 0: compute(toks, chunks) also reads the `context` stored rows before the new ones
        (chunks: the rows' chunk indices); their own results are dropped."""
        import weakref

        cache = self.__dict__.setdefault(name, weakref.WeakKeyDictionary())
        toks = self._memory_tokens(mem)
        have = cache.get(mem)
        if have is None and isinstance(mem, OverlayMemory):
            base = cache.get(mem.base)
            have = base[: mem.n0] if base is not None and len(base) >= mem.n0 else None
        if have is None or len(have) > len(toks):
            have = empty(toks)
        if len(have) < len(toks):
            a = len(have)
            if context:
                a0 = max(0, a - context)
                new = compute(toks[a0:], torch.arange(a0, len(toks), device=toks.device))[a - a0:]
            else:
                new = compute(toks[a:])
            have = torch.cat([have.to(toks.device), new])
        cache[mem] = have
        return have

    def _topk(self, scores: torch.Tensor | None, mem: ChunkMemory, q: torch.Tensor | None = None,
              q_chunk: torch.Tensor | None = None):
        """Top-k past chunks per landmark and their fusion weights: idx [m', k] long, w [m', k].

        Exact path: `scores` [m', n] from retrieval_scores (<q, l>/sqrt(D), -inf unless e < c).
        use_faiss: the candidates come from an exact inner-product faiss index (IndexFlatIP) over the
        keys stored so far, kept per memory and grown incrementally. Every stored key e < n, and a
        landmark of chunk c may only see e < c, so at most n - c (<= the landmarks of this run) of
        the index's hits are ineligible: asking for k + (n - min c) + a small margin and masking
        e >= c leaves the exact top-k. The picked scores are recomputed like retrieval_scores, so
        idx equals the matrix product's and the weights agree to float rounding."""
        k = self.cfg.chunk_topk
        if self.use_faiss and q is not None and self.model.lexical is None:  # lexical scores need every chunk
            return self._topk_faiss(q, q_chunk, mem)
        if scores.shape[1] < k:  # pad so that select_topk returns k columns (extra get weight 0)
            scores = F.pad(scores, (0, k - scores.shape[1]), value=float("-inf"))
        return select_topk(scores, k, gumbel=False)

    _FAISS_MARGIN = 8  # extra hits fetched so near-ties at the k-th place resolve on the exact scores

    def _topk_faiss(self, q: torch.Tensor, q_chunk: torch.Tensor, mem: ChunkMemory):
        import math
        import weakref

        k, dev = self.cfg.chunk_topk, q.device
        m = q.shape[0]
        cache = self.__dict__.setdefault("_faiss_indexes", weakref.WeakKeyDictionary())
        index = cache.get(mem)
        n = mem.n
        if index is None or index.ntotal > n:  # new memory, or truncated: rebuild
            index = mem.faiss_index()
            cache[mem] = index
        elif index.ntotal < n:
            index.add(np.ascontiguousarray(mem.keys()[index.ntotal:n], dtype=np.float32))
        kk = min(n, k + n - int(q_chunk.min()) + self._FAISS_MARGIN) if n else 0
        if kk == 0:
            return torch.zeros(m, k, dtype=torch.long, device=dev), torch.zeros(m, k, device=dev)
        qf = np.ascontiguousarray(q.detach().float().cpu().numpy())
        _, cand = index.search(qf, kk)  # [m, kk] ids, -1 where fewer than kk exist
        cand_t = torch.from_numpy(cand.astype(np.int64)).to(dev)
        ok = (cand_t >= 0) & (cand_t < q_chunk[:, None])  # strict causal mask e < c
        safe = cand_t.clamp_min(0)
        keys = torch.from_numpy(np.asarray(mem.keys()[safe.cpu().numpy()], dtype=np.float32)).to(dev)  # [m, kk, D]
        s = torch.einsum("cd,ced->ce", q.float(), keys) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~ok, float("-inf"))
        if kk < k:
            s = F.pad(s, (0, k - kk), value=float("-inf"))
            safe = F.pad(safe, (0, k - kk))
        loc, w = select_topk(s, k, gumbel=False)
        valid = torch.isfinite(s.gather(1, loc))
        idx = safe.gather(1, loc).masked_fill(~valid, 0)  # select_topk's convention: 0 where unused
        return idx, w

    def _stream_gca_fn(self, mem: ChunkMemory, sel_idx: torch.Tensor, sel_w: torch.Tensor, pos0: int, T: int,
                       state: DocState | None = None, group: int = 0):
        """GCA for a run of positions touching n_seg chunks; segment s uses selection s: sel_idx and
        sel_w [n_seg, k], or [Bv, n_seg, k] for Bv variants of the run (its input then [Bv, T, D]).

        The selected chunks' K/V are gathered from the chunk memory (RAM or disk, on the CPU) and
        moved to the engine's device once per selection: the gather is kept on `state.gathered`
        and reused by the following runs while the selection is unchanged (every decode step of a
        chunk), so decoding moves G gathers every S tokens, as in the paper."""
        c = self.cfg
        S, D, H, d, N = c.chunk_size, c.hidden_size, c.num_heads, c.head_dim, c.chunk_size - 1
        n_seg, k = sel_idx.shape[-2:]
        sel_idx, sel_w = sel_idx.reshape(-1, k), sel_w.reshape(-1, k)  # [Bv * n_seg, k]
        rows = sel_idx.shape[0]
        active = sel_w.sum(-1) > 0
        if not bool(active.any()):
            def off_fn(gca_mod, a):
                return torch.zeros_like(a)

            off_fn.mem_k = None
            return off_fn
        idx = sel_idx.cpu().numpy()
        # a stored chunk's K/V never change (the memory is append-only; open_state alone truncates)
        key = (id(mem), idx.shape, idx.tobytes())
        hit = state.gathered.get(group) if state is not None else None
        if hit is not None and hit[0] == key:
            mem_k, gk, gv = hit[1]
            state.transfers.reused += 1
        else:
            k_np, v_np = mem.gather(idx)  # [rows, k, N, D]
            mem_k = self._to_device(k_np)
            gk = mem_k.view(rows, k, N, H, d).permute(0, 3, 1, 2, 4)
            gv = self._to_device(v_np).view(rows, k, N, H, d).permute(0, 3, 1, 2, 4)
            if state is not None:
                state.gathered[group] = (key, (mem_k, gk, gv))
                t = state.transfers
                t.gathers, t.chunks, t.bytes = t.gathers + 1, t.chunks + idx.size, t.bytes + k_np.nbytes + v_np.nbytes
        off = pos0 % S

        def fn(gca_mod, a):  # a [Bv, T, D]
            if n_seg == 1:
                return gca_mod(a, gk, gv, sel_w.to(a.dtype))
            padded = F.pad(a, (0, 0, off, n_seg * S - off - T))
            out = gca_mod(padded.reshape(rows, S, D), gk, gv, sel_w.to(a.dtype)).reshape(-1, n_seg * S, D)
            return out[:, off: off + T]

        fn.mem_k = mem_k  # the copy head reads the same keys (copy_selection)
        return fn

    def _to_device(self, a: np.ndarray) -> torch.Tensor:
        """A gathered memory array as float32 on the engine's device (through pinned memory, without
        blocking the host, on CUDA)."""
        t = torch.from_numpy(np.asarray(a, dtype=np.float32))
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def _tokens_until(self, mem: ChunkMemory, tok_buf: list[int], pos0: int, n: int) -> list[int]:
        """The last n real tokens before stream position pos0, oldest first, pad-filled: the
        carry's token buffer (the chunk being filled) and, when it holds fewer than n, the chunk
        stored before it."""
        c = self.cfg
        hist = list(tok_buf)
        if len(hist) < n and pos0 >= c.chunk_size:
            hist = [int(t) for t in mem.tokens(np.array([pos0 // c.chunk_size - 1]))[0]] + hist
        return ([c.pad_token_id] * n + hist)[-n:]

    def _tokens_before(self, mem: ChunkMemory, tok_buf: list[int], pos0: int, aug: list[int], real: list[bool]):
        """The real token before each position of a run (the copy head's bigram query; a landmark
        gets its chunk's last token), as the batch forward lays them out."""
        last = self._tokens_until(mem, tok_buf, pos0, 1)[0]
        out = []
        for t, r in zip(aug, real):
            out.append(last)
            if r:
                last = t
        return out

    def _token_history(self, mem: ChunkMemory, tok_buf: list[int], pos0: int, aug: list[int], real: list[bool],
                       n: int) -> list[list[int]]:
        """The copy head's suffix-match queries (copy_match): for each position of a run, the n real
        tokens ending at it, newest first, pad-filled (a landmark gets pads), as the batch forward
        lays them out."""
        pad = self.cfg.pad_token_id
        hist = self._tokens_until(mem, tok_buf, pos0, n)
        out = []
        for t, r in zip(aug, real):
            if r:
                hist = hist[1:] + [t]
                out.append(hist[::-1])
            else:
                out.append([pad] * n)
        return out

    def _chunk_tokens(self, mem: ChunkMemory, chunk: int, tok_buf: list[int]) -> np.ndarray:
        """The N token ids of stream chunk `chunk`: stored, or (the chunk being filled) the carry's
        buffer pad-filled, or pads before the stream's start (as the batch forward's layout)."""
        N, pad = self.cfg.chunk_size - 1, self.cfg.pad_token_id
        if 0 <= chunk < mem.n:
            return np.asarray(mem.tokens(np.array([chunk]))[0], dtype=np.int64)
        out = np.full(N, pad, dtype=np.int64)
        if chunk >= 0:
            out[: len(tok_buf)] = tok_buf[:N]
        return out

    def _neighbour_slots(self, mem: ChunkMemory, idx: np.ndarray, d: int, slots: slice, want_keys: bool):
        """Token ids [..., n] and memory keys [..., n, D] (zeros unless want_keys) of the slots
        `slots` of the chunk d after each chunk of idx (copy_span: d = 1; copy_lead: d = -1): pad
        ids and zero keys where that chunk is not stored (before chunk 0; past the stream, which
        only unused picks of weight 0 reach)."""
        c = self.cfg
        n = len(range(c.chunk_size - 1)[slots])
        j = idx + d
        ok = (j >= 0) & (j < mem.n)
        toks = np.full((*idx.shape, n), c.pad_token_id, np.int64)
        keys = np.zeros((*idx.shape, n, c.hidden_size), np.float32)
        if mem.n:
            j = np.clip(j, 0, mem.n - 1)
            toks = np.where(ok[..., None], mem.tokens(j)[..., slots], c.pad_token_id).astype(np.int64)
            if want_keys:
                keys = np.where(ok[..., None, None], mem.gather_keys(j)[..., slots, :], 0.0).astype(np.float32)
        return torch.from_numpy(toks), torch.from_numpy(keys).to(self.device)  # ids on the CPU (as mem.tokens)

    def _stream_copy(self, mem: ChunkMemory, sel_idx: torch.Tensor, sel_w: torch.Tensor, pos0: int, x: torch.Tensor,
                     emb: torch.Tensor, before: list[int] | None, mem_k: torch.Tensor | None = None,
                     history: list[list[int]] | None = None, tok_buf: list[int] | None = None):
        """CopyHead for a run of positions touching n_seg chunks (segment s reads selection s, of
        the last group), for each of the Bv rows of x [Bv, T, D] (the variants of _fork_variants,
        else one): gate [Bv, T], pointer weights [Bv, T, k*R], their token ids [Bv, T, k*R]
        (R = copy_lead + N + copy_span); sel_idx, sel_w [Bv, n_seg, k];
        `before` the real token before each position (copy_bigram only, else None); `mem_k` [Bv * n_seg, k, N, D] the
        selection's memory keys, as GCA read them (None when every weight is 0: GCA read nothing, and
        the pointer's weights are 0 whatever the keys); `history` the suffix-match queries
        (_token_history; copy_match only, else None); `tok_buf` the carry's tokens of the chunk
        not yet complete after this run (copy_recall reads them). Everything but x and the
        selections is the same for every row."""
        c = self.cfg
        S, D, N = c.chunk_size, c.hidden_size, c.chunk_size - 1
        Bv, n_seg, k = sel_idx.shape
        rows = Bv * n_seg
        T, dev = x.shape[1], self.device
        idx = sel_idx.reshape(rows, k).cpu().numpy()
        sel_w = sel_w.reshape(rows, k)
        gk = mem_k if mem_k is not None else torch.zeros(rows, k, N, D, device=dev)
        toks = torch.from_numpy(mem.tokens(idx).astype(np.int64) if mem.n else np.zeros((rows, k, N), np.int64))
        E, P = c.copy_span, c.copy_lead
        if E:  # copy_span: and the first E slots of the chunk after each (stored: a selection serving
            # chunk c reads chunks < c - 1; only unused picks, of weight 0, have none)
            nt, nk = self._neighbour_slots(mem, idx, 1, slice(0, E), mem_k is not None)
            toks, gk = torch.cat([toks, nt], dim=-1), torch.cat([gk, nk], dim=-2)
        if P:  # copy_lead: and, first, the last P slots of the chunk before each (pads before chunk 0)
            lt, lk = self._neighbour_slots(mem, idx, -1, slice(N - P, N), mem_k is not None)
            toks, gk = torch.cat([lt, toks], dim=-1), torch.cat([lk, gk], dim=-2)
        R = P + N + E
        off = pos0 % S

        def segments(t: torch.Tensor) -> torch.Tensor:  # [T, ...] of the run -> [rows, S, ...], every row alike
            t = F.pad(t, (0, 0) * (t.dim() - 1) + (off, n_seg * S - off - T))
            return t.view(n_seg, S, *t.shape[1:]).repeat(Bv, *[1] * t.dim())

        padded = F.pad(x, (0, 0, off, n_seg * S - off - T)).reshape(rows, S, D)
        emb = segments(emb)  # the run's token embeddings
        toks = toks.to(dev)
        head, pad = self.model.copy_head, c.pad_token_id

        def id_segments(ids) -> torch.Tensor:  # the run's [T, ...] token ids -> [rows, S, ...], pads around
            t = torch.full((n_seg * S, *ids.shape[1:]), pad, dtype=torch.long, device=dev)
            t[off: off + T] = ids
            return t.view(n_seg, S, *ids.shape[1:]).repeat(Bv, *[1] * ids.dim())

        q_before = id_segments(torch.tensor(before, device=dev)) if head.bigram else None
        q_hist = id_segments(torch.tensor(history, dtype=torch.long, device=dev)) if history is not None else None
        ctx = None
        if head.recall:  # segment i's query side: its chunk before and its own chunk
            first = pos0 // S
            ctx = torch.from_numpy(np.stack([np.concatenate([self._chunk_tokens(mem, first + i - 1, tok_buf),
                                                             self._chunk_tokens(mem, first + i, tok_buf)])
                                             for i in range(n_seg)]).astype(np.int64)).to(dev).repeat(Bv, 1)
        gate, p = head.point(self.model.embed, padded, emb, toks, gk, sel_w.float(), q_before, q_hist, ctx)
        toks = toks.view(rows, 1, k * R).expand(rows, S, k * R)
        return (gate.reshape(Bv, n_seg * S)[:, off: off + T], p.reshape(Bv, n_seg * S, k * R)[:, off: off + T],
                toks.reshape(Bv, n_seg * S, k * R)[:, off: off + T])

    def _logits(self, x: torch.Tensor, real: list[bool], copy=None) -> torch.Tensor:
        """Logits [B, T', V] of the real positions of x [B, T, D] (float32)."""
        keep = torch.tensor(real, device=x.device)
        logits = self.model.lm_head(self.model.norm(x[:, keep])).float()
        if copy is not None:  # log-probabilities of the LM/pointer mixture, as in the batch forward
            logits = mix_copy(logits, *(t[:, keep] for t in copy))
        return logits

    # -- prefill -----------------------------------------------------------------------------------

    def prefill(self, state: DocState, ids: Sequence[int], *, cancel: threading.Event | None = None,
                block_chunks: int = 16, checkpoint_every: int = 8, defer_upper: bool = True) -> Iterator[PrefillProgress]:
        """Feed `ids` (the WHOLE document's ids) from state.n_tokens on, in blocks of chunks;
        yields progress after each block and commits every `checkpoint_every` blocks and at the end.
        Cancelling stops after the current block and commits what was done.

        defer_upper: the retrieval groups' outputs are needed only through their sliding windows at
        the end of the document, so they are deferred (feed upper=False) and run once over the last
        positions when the state is forked or fed again, with the same numbers (`_catch_up`)."""
        total = len(ids)
        start = state.n_tokens
        if start > total:
            raise ValueError(f"state has {start} tokens, more than the document's {total}")
        blk = block_chunks * (self.cfg.chunk_size - 1)
        t0 = time.time()
        nb = 0
        i = start
        while i < total:
            if cancel is not None and cancel.is_set():
                break
            # align blocks to chunk boundaries in real-token space
            j = min(total, (i // blk + 1) * blk)
            with state.lock:  # the retrieval groups deferred: run once, on the last positions, when needed
                self.feed(state, ids[i:j], block_chunks=block_chunks, upper=not defer_upper)
            i = j
            nb += 1
            if state.directory is not None and nb % checkpoint_every == 0:
                state.checkpoint()
            dt = max(time.time() - t0, 1e-9)
            yield PrefillProgress(i, total, (i - start) / dt, state.n_chunks)
        state.checkpoint()
        if i == start:
            yield PrefillProgress(i, total, 0.0, state.n_chunks)

    # -- scoring (perplexity) ------------------------------------------------------------------------

    @torch.no_grad()
    def nll(self, ids: Sequence[int], state: DocState | None = None, block_chunks: int = 16) -> np.ndarray:
        """Per-token negative log-likelihood of ids[1:] given the prefix, streamed in flat memory."""
        state = state or self.new_state()
        out = []
        blk = block_chunks * (self.cfg.chunk_size - 1)
        prev_last = None
        for i in range(0, len(ids), blk):
            piece = list(ids[i:i + blk])
            lg = self.feed(state, piece, want_logits=True, block_chunks=block_chunks)
            lp = torch.log_softmax(lg, -1)
            tgt = torch.tensor(piece, device=lg.device)
            if prev_last is not None:
                out.append(-prev_last[tgt[0]].item())
            if len(piece) > 1:
                out.extend((-lp[:-1].gather(1, tgt[1:, None])[:, 0]).tolist())
            prev_last = lp[-1]
        return np.asarray(out, dtype=np.float64)

    # -- generation ---------------------------------------------------------------------------------

    def prompt_ids(self, state: DocState, question: str | None) -> list[int]:
        from .prompts import qa_prompt_ids, summary_prompt_ids

        enc = lambda s: self.tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
        if question is None:
            return summary_prompt_ids(state.n_tokens, encode=enc, chunk_tokens=self.cfg.chunk_size - 1)
        return qa_prompt_ids(state.n_tokens, question, encode=enc, chunk_tokens=self.cfg.chunk_size - 1)

    @torch.no_grad()
    def generate(self, state: DocState, question: str | None = None, *, prompt_ids: Sequence[int] | None = None,
                 max_new_tokens: int = 64, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 stop_at_newline: bool = True, seed: int | None = None, no_repeat_ngram: int = 0,
                 cancel: threading.Event | None = None, mask: Iterable[int] | None = None,
                 terms: np.ndarray | None = None) -> Iterator[GenEvent]:
        """Ask `question` about the document in `state` (None: ask for a summary), streaming tokens.

        The stored state is not modified (generation runs on a fork). The last event has done=True,
        the whole answer, its token ids and the RetrievalTrace of the generated chunks. `no_repeat_ngram`
        = n > 0 forbids a token that would repeat an n-gram of the answer so far (the answer only:
        copying from the document stays allowed), which stops a small model's loops.

        `mask`: document chunk ids barred from retrieval (counterfactual masking, see `_bar`); the
        trace then records them (`masked`) and gives them no score (None). `terms`: more question-time
        selection scores, one per document chunk, added with the BM25 term (question_bias)."""
        from .prompts import clean_answer

        n_doc_chunks = state.n_chunks
        barred = self.check_mask(state, mask)
        with state.lock:
            fork = state.fork()
        self._bar(fork, barred)
        fork.bias = self.question_bias(state, question, terms)
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(fork, question)
        record: list[dict] = []
        logits = self.feed(fork, list(prompt_ids), want_logits=True, record=record)[-1]
        gen_chunk0 = fork.carry.pos // self.cfg.chunk_size if self.cfg.uses_chunks else 0
        # the selection serving the first answer chunk was made by the landmark before it
        serving = {gen_chunk0: self._current_selection(fork, record, gen_chunk0)}
        gen = torch.Generator().manual_seed(seed if seed is not None else 0)
        out_ids: list[int] = []
        text = ""
        reason = "length"
        eos = self.cfg.eos_token_id
        for _ in range(max_new_tokens):
            if cancel is not None and cancel.is_set():
                reason = "cancelled"
                break
            if no_repeat_ngram > 0:
                logits = ban_repeats(logits, out_ids, no_repeat_ngram)
            tok = sample(logits, temperature, top_k, top_p, gen)
            if tok == eos:
                reason = "eos"
                break
            out_ids.append(tok)
            new_text = self.tokenizer.decode(out_ids) if self.tokenizer else ""
            delta = new_text[len(text):] if not new_text.endswith("\ufffd") else ""
            if delta:
                text += delta
            if stop_at_newline and "\n" in delta:
                text = text[: text.index("\n", len(text) - len(delta))] if "\n" in text else text
                reason = "newline"
                yield GenEvent(tok, delta.split("\n", 1)[0])
                break
            yield GenEvent(tok, delta)
            rec_before = len(record)
            logits = self.feed(fork, [tok], want_logits=True, record=record)[-1]
            if self.cfg.uses_chunks and len(record) > rec_before:
                cur = fork.carry.pos // self.cfg.chunk_size
                serving[cur] = self._current_selection(fork, record, cur)
        trace = RetrievalTrace(n_doc_chunks, masked=sorted(barred))
        used_chunks = sorted(serving)
        for ch in used_chunks:
            if serving[ch] is not None:
                trace.rows.append(serving[ch] | {"gen_chunk": ch})
        answer = clean_answer(text)
        yield GenEvent(None, "", done=True, answer=answer, trace=trace, stop_reason=reason,
                       ids=list(out_ids))

    # -- the question's BM25 term ---------------------------------------------------------------------

    def bm25_index(self, state: DocState):
        """The BM25 index (drt_core.bm25) of the document's chunks, their texts decoded from the stored
        token ids; cached per memory (a fork's is its base's), rebuilt when the memory has grown."""
        import weakref

        from .bm25 import BM25

        mem = state.memory
        while isinstance(mem, OverlayMemory):
            mem = mem.base
        cache = self.__dict__.setdefault("_bm25_cache", weakref.WeakKeyDictionary())
        have = cache.get(mem)
        if have is None or have.n != mem.n:
            toks = self._memory_tokens(mem).cpu().tolist()
            dec = getattr(self.tokenizer, "batch_decode", None)
            texts = (dec(toks, skip_special_tokens=True) if dec is not None
                     else [self.tokenizer.decode(t) for t in toks])
            have = cache[mem] = BM25(texts, window=self.cfg.bm25_window)
        return have

    def question_bias(self, state: DocState, question: str | None,
                      terms: np.ndarray | None = None) -> torch.Tensor | None:
        """[n_doc_chunks]: bm25_weight x the BM25 score of `question` for each document chunk (config
        bm25_weight), plus `terms` (the caller's further question-time scores, one per document chunk:
        qa.ask's cross-encoder term); DocState.bias adds it to every selection of a question's fork.
        None: no question, or no term (the BM25 term off or no question word in the document, no terms)."""
        if question is None or not self.cfg.uses_chunks:
            return None
        w = float(getattr(self.cfg, "bm25_weight", 0.0) or 0.0)
        s = self.bm25_index(state).scores(question) * w if w > 0 and self.tokenizer is not None else None
        if s is not None and not s.any():
            s = None
        if terms is not None:
            t = np.zeros(state.n_chunks, np.float64)
            n = min(len(t), len(terms))
            t[:n] = np.asarray(terms, np.float64)[:n]
            s = t if s is None else s + t
        return None if s is None else torch.from_numpy(np.asarray(s)).float().to(self.device)

    @torch.no_grad()
    def question_scores(self, state: DocState, question: str, mask: Iterable[int] | None = None,
                        terms: np.ndarray | None = None) -> np.ndarray | None:
        """The selection scores (group 0, learned + the question-time terms) of the landmark that
        closes the question's prompt, over the document's chunks (-inf where barred): what the first
        answer chunk's retrieval ranks. One forked pass over the prompt; the state is untouched."""
        if not self.cfg.uses_chunks:
            return None
        barred = self.check_mask(state, mask)
        with state.lock:
            fork = state.fork()
        self._bar(fork, barred)
        fork.bias = self.question_bias(state, question, terms)
        record: list[dict] = []
        self.feed(fork, self.prompt_ids(fork, question), record=record)
        sel = self._current_selection(fork, record, fork.carry.pos // self.cfg.chunk_size)
        if sel is None or sel["scores"] is None:
            return None
        n = state.n_chunks
        return np.array([float("-inf") if x is None else x for x in sel["scores"][:n]], np.float64)

    # -- counterfactual masking ----------------------------------------------------------------------

    def check_mask(self, state: DocState, mask: Iterable[int] | None) -> frozenset[int]:
        """`mask` as a set of document chunk ids; ValueError naming the fix for anything else."""
        if not mask:
            return frozenset()
        if not self.cfg.uses_chunks:
            raise ValueError(f"a {self.cfg.arch} model retrieves nothing: there is nothing to mask")
        out = set()
        for c in mask:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                raise ValueError(f"mask: chunk ids are integers, got {c!r}")
            if not 0 <= int(c) < state.n_chunks:
                raise ValueError(f"mask: chunk {int(c)} is not a chunk of the document (0 to {state.n_chunks - 1})")
            out.add(int(c))
        return frozenset(out)

    @staticmethod
    def _drop_masked(idx: torch.Tensor, w: torch.Tensor, barred: frozenset[int]) -> torch.Tensor:
        """Weights w [..., k] of the selection idx [..., k] with the barred chunks' set to 0 and the
        rest renormalised: the softmax over the selection's other scores, as if theirs were -inf."""
        if not barred:
            return w
        hit = torch.isin(idx, torch.tensor(sorted(barred), dtype=idx.dtype, device=idx.device)) & (w > 0)
        if not bool(hit.any()):
            return w
        w = w.masked_fill(hit, 0.0)
        tot = w.sum(-1, keepdim=True)
        return torch.where(tot > 0, w / tot.clamp_min(1e-30), w)

    @staticmethod
    def _apply_mask(scores: torch.Tensor, barred: frozenset[int]) -> torch.Tensor:
        """scores [m', n] with -inf in the barred chunks' columns (a new tensor)."""
        cols = [c for c in sorted(barred) if c < scores.shape[1]]
        if not cols:
            return scores
        return scores.index_fill(1, torch.tensor(cols, device=scores.device), float("-inf"))

    def _bar(self, fork: DocState, barred: frozenset[int]) -> None:
        """Bar `barred` from every retrieval the fork makes: each landmark's scores give them -inf
        before top-k, in every group (`_run`). The selection carried into the fork was made at
        prefill time (by the document's last landmark, whose query is not stored): the barred chunks
        lose their weight in it and the others are renormalised, but no next-best chunk takes their
        place. The stored document is untouched (a fork's memory is an overlay)."""
        fork.mask = barred
        fork.carry.sel_w = self._drop_masked(fork.carry.sel_idx, fork.carry.sel_w, barred)

    def _fork_variants(self, state: DocState, masks: Sequence[frozenset[int]]) -> DocState:
        """A fork that runs len(masks) copies of the stream side by side, copy b with the chunks of
        masks[b] barred (as `_bar` bars them): one batch through the retrieval groups, whose
        windows and selections get a row per copy; the lower layers, the chunk encoder, the memory
        and the retrieval scores, which no selection changes, are computed once."""
        with state.lock:
            fork = state.fork()
        car, nl, Bv = fork.carry, len(self.model.lower), len(masks)
        for i in range(nl, len(car.windows)):
            w = car.windows[i]
            car.windows[i] = KVWindow(w.k.expand(Bv, -1, -1, -1).clone(), w.v.expand(Bv, -1, -1, -1).clone(),
                                      w.pos.clone(), w.next_pos)
        car.sel_w = torch.stack([self._drop_masked(car.sel_idx, car.sel_w, frozenset(m)) for m in masks])
        car.sel_idx = car.sel_idx[None].repeat(Bv, 1, 1)
        fork.variants = [frozenset(m) for m in masks]
        return fork

    def _answer_lp(self, fork: DocState, prompt_ids: Sequence[int], answer_ids: Sequence[int],
                   record: list | None = None) -> torch.Tensor:
        """Teacher-forced log p(answer_ids[i] | prompt, answer_ids[:i]) on `fork` ([len(answer)], or
        [Bv, len(answer)] on a fork of _fork_variants). Logits are made only where they predict an
        answer token: the prompt but its last token is fed without (and, when a `record` is kept,
        the answer's last token, whose selections it then lists)."""
        p, a = [int(t) for t in prompt_ids], [int(t) for t in answer_ids]
        self.feed(fork, p[:-1], record=record)
        lg = self.feed(fork, p[-1:] + a[:-1], want_logits=True, record=record)
        if record is not None:
            self.feed(fork, a[-1:], record=record)
        # the feed's logits are log-probabilities with a copy head (mix_copy), logits without: log_softmax fits both
        lp = torch.log_softmax(lg.float(), -1)
        tgt = torch.tensor(a, device=lp.device).expand(lp.shape[:-1])
        return lp.gather(-1, tgt[..., None])[..., 0]

    @torch.no_grad()
    def _answer_logprobs(self, state: DocState, prompt_ids: Sequence[int], answer_ids: Sequence[int],
                         masks: Sequence[frozenset[int]], bias: torch.Tensor | None = None) -> list[float]:
        """answer_logprob for each set of barred chunks in `masks`, in one batched teacher-forced pass
        (_fork_variants) over prompt + answer; `bias`: the question's selection term (question_bias)."""
        if not answer_ids or not masks:
            return [0.0] * len(masks)
        fork = self._fork_variants(state, masks)
        fork.bias = bias
        return self._answer_lp(fork, prompt_ids, answer_ids).sum(-1).tolist()

    @torch.no_grad()
    def _answer_logprob(self, state: DocState, prompt_ids: Sequence[int], answer_ids: Sequence[int],
                        barred: frozenset[int], bias: torch.Tensor | None = None) -> tuple[float, set[int]]:
        """(sum of log p(answer_ids) after prompt_ids on a fork with `barred` masked, the document
        chunks any selection serving those positions picked with weight > 0)."""
        with state.lock:
            fork = state.fork()
        self._bar(fork, barred)
        fork.bias = bias
        n = fork.memory.n
        car = fork.carry
        picked = {int(i) for i, w in zip(car.sel_idx.reshape(-1).tolist(), car.sel_w.reshape(-1).tolist()) if w > 0}
        if not answer_ids:
            return 0.0, picked
        record: list[dict] = []
        lp = self._answer_lp(fork, prompt_ids, answer_ids, record)
        picked |= {int(i) for r in record for i, w in zip(r["idx"], r["weights"]) if w > 0}
        return float(lp.sum()), {c for c in picked if c < n}

    def answer_logprob(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                       mask: Iterable[int] | None = None, *, prompt_ids: Sequence[int] | None = None,
                       terms: np.ndarray | None = None) -> float:
        """Teacher-forced log-likelihood of an answer: sum of log p(answer_ids[i] | prompt, answer_ids[:i])
        with the prompt laid out as `generate` lays it out (`prompt_ids`), the chunks of `mask` barred
        from retrieval as in `generate`. One forked pass over prompt + answer; the state is untouched."""
        barred = self.check_mask(state, mask)
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        return self._answer_logprob(state, prompt_ids, answer_ids, barred, self.question_bias(state, question, terms))[0]

    def answer_logprobs(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                        masks: Sequence[Iterable[int]], *, prompt_ids: Sequence[int] | None = None,
                        terms: np.ndarray | None = None) -> list[float]:
        """answer_logprob for each mask of `masks` (chunks barred from retrieval), in one batched
        teacher-forced pass: one row per mask (_fork_variants). The state is untouched."""
        barred = [frozenset(self.check_mask(state, m)) for m in masks]
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        return self._answer_logprobs(state, prompt_ids, answer_ids, barred, self.question_bias(state, question, terms))

    def causal_effects(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                       chunks: Iterable[int], *, prompt_ids: Sequence[int] | None = None,
                       terms: np.ndarray | None = None) -> dict[int, float]:
        """The causal effect of each chunk on an answer: answer_logprob(nothing masked) minus
        answer_logprob(that chunk alone masked), in nats (> 0: the chunk made the answer likelier).

        Cost: one forked teacher-forced pass over prompt + answer for the unmasked answer (it says
        which chunks its selections picked), then one batched pass (_fork_variants) for every picked
        chunk at once: its lower layers, chunk encoder and retrieval scores are computed once, its
        retrieval groups run one row per masked chunk. A chunk no selection picked changes nothing,
        bit for bit, and gets 0.0 without a pass."""
        chunks = sorted(self.check_mask(state, chunks))
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        bias = self.question_bias(state, question, terms)
        base, picked = self._answer_logprob(state, prompt_ids, answer_ids, frozenset(), bias)
        hit = [c for c in chunks if c in picked]
        masked = dict(zip(hit, self._answer_logprobs(state, prompt_ids, answer_ids, [frozenset({c}) for c in hit],
                                                      bias)))
        return {c: base - masked[c] if c in masked else 0.0 for c in chunks}

    def _current_selection(self, fork: DocState, record: list[dict], chunk: int) -> dict | None:
        """The selection serving `chunk` (made by landmark chunk-1), from the run records, or from
        the stored memory when that landmark was processed at prefill time (no scores there)."""
        if not self.cfg.uses_chunks:
            return None
        groups = [r for r in record if r["serves"] == chunk]
        if not groups:
            si, sw = fork.memory.selections()
            if chunk - 1 >= len(si) or chunk - 1 < 0:
                return None
            # what the fork's carry holds: the stored selection, less the chunks barred (Engine._bar)
            w = self._drop_masked(torch.from_numpy(np.asarray(si[chunk - 1], np.int64)),
                                  torch.from_numpy(np.asarray(sw[chunk - 1], np.float32)), fork.mask)
            groups = [{"group": g, "idx": si[chunk - 1][g].tolist(), "weights": w[g].tolist(),
                       "scores": None} for g in range(si.shape[1])]
        g0 = min(groups, key=lambda r: r["group"])
        keep = [i for i, w in enumerate(g0["weights"]) if w > 0]
        return {"topk": [g0["idx"][i] for i in keep], "weights": [round(g0["weights"][i], 5) for i in keep],
                "scores": None if g0["scores"] is None else [None if s is None else round(s, 4) for s in g0["scores"]],
                "groups": [{"topk": r["idx"], "weights": r["weights"]} for r in sorted(groups, key=lambda r: r["group"])]}

    def evidence(self, state: DocState, trace: RetrievalTrace, n_doc_chunks: int | None = None) -> list[tuple[int, float]]:
        """Document chunks the answer drew on, by total fusion weight over its generated chunks."""
        n = trace.n_doc_chunks if n_doc_chunks is None else n_doc_chunks
        acc: dict[int, float] = {}
        for row in trace.rows:
            for cid, w in zip(row["topk"], row["weights"]):
                if cid < n:
                    acc[cid] = acc.get(cid, 0.0) + w
        total = sum(acc.values()) or 1.0
        return sorted(((c, w / total) for c, w in acc.items()), key=lambda t: -t[1])


def ban_repeats(logits: torch.Tensor, ids: Sequence[int], n: int) -> torch.Tensor:
    """logits [V] with -inf on every token that would complete an n-gram already in `ids`."""
    if len(ids) < n or n < 1:
        return logits
    head = tuple(ids[len(ids) - n + 1:]) if n > 1 else ()
    banned = {ids[i + n - 1] for i in range(len(ids) - n + 1) if tuple(ids[i:i + n - 1]) == head}
    if not banned:
        return logits
    return logits.index_fill(0, torch.tensor(sorted(banned), device=logits.device), float("-inf"))


def sample(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, gen: torch.Generator) -> int:
    """Greedy when temperature <= 0, else temperature / top-k / top-p (nucleus) sampling."""
    if temperature <= 0:
        return int(logits.argmax())
    lg = logits.float() / temperature
    if top_k and top_k < lg.numel():
        kth = lg.topk(top_k).values[-1]
        lg = lg.masked_fill(lg < kth, float("-inf"))
    probs = torch.softmax(lg, -1)
    if top_p < 1.0:
        sp, si = probs.sort(descending=True)
        cut = sp.cumsum(0) - sp > top_p
        sp = sp.masked_fill(cut, 0.0)
        probs = torch.zeros_like(probs).scatter(0, si, sp)
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=gen))


def _state_config(cfg: DRTConfig) -> dict:
    d = cfg.to_dict()
    for k in ("gca_backend", "transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype"):
        d.pop(k, None)
    # the retired extensions (config.RETIRED) at their "off" values, as every config held them:
    # the fingerprints of the models that never used them stay as they were
    d.update({k: v for k, v in RETIRED.items() if k != "lexical_window"})
    for key in ("bm25_weight", "bm25_window"):  # question time only: prefilled states do not depend on them
        d.pop(key, None)
    if d.get("stream_preamble") is None:  # added later: off, it leaves the fingerprints as they were
        d.pop("stream_preamble", None)
    if not d.get("lexical_word_carry"):  # likewise
        d.pop("lexical_word_carry", None)
    return d


def _hash_files(paths: list[Path], extra: str = "") -> str:
    h = hashlib.sha256()
    for p in paths:
        if p.exists():
            with open(p, "rb") as f:
                for blk in iter(lambda: f.read(1 << 20), b""):
                    h.update(blk)
    h.update(extra.encode())
    return h.hexdigest()[:16]
