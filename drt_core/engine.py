"""Inference engine: streaming prefill into a chunk store, generation with retrieval traces, and
counterfactuals over a document's chunks. `Engine` is the one object the rest of the tree holds
(drt_core.protocol.DocumentEngine); its work is done in rooms of its own:

    drt_core/stream.py          the stream core: a document's state (Carry, DocState) and the model run
                                over it chunk by chunk (Stream: feed, run, store, select, groups, catch-up)
    drt_core/stream_copy.py     the copy head on a stream: its slots and queries read from the memory
    drt_core/memory_index.py    the memory a fork writes on (OverlayMemory) and what is derived from the
                                stored chunks, per memory (MemoryIndex: tokens, lexical counts,
                                embeddings, faiss, BM25)
    drt_core/state_io.py        states on disk (the carry, the commit record) and the fingerprints
    drt_core/decode.py          generation: the prompt, then decode_one_token, sampling, the trace
    drt_core/counterfactual.py  chunks barred from retrieval: masks, variants run side by side, the
                                answer's log-probabilities, causal effects

States persist under a directory (`open_state(dir)`): `prefill` checkpoints every few blocks, so a
killed ingest resumes from its last checkpoint and ends with the same states as an uninterrupted
run. A state computed by another model (another fingerprint) is refused.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np
import torch

from . import counterfactual, decode, runtime, state_io
from .decode import GenEvent, Sampling
from .memory_index import OverlayMemory, PrefixMemory
from .stream import DocState, Stream

if TYPE_CHECKING:
    from .hf_config import DRTConfig
    from .drt import DRT


@dataclass
class PrefillProgress:
    done_tokens: int
    total_tokens: int
    tokens_per_s: float
    done_chunks: int = 0


class Engine:
    """The model behind the library (see the module's docstring): `model` run on `device`, states'
    memories stored in `memory_dtype` on disk, `use_faiss` for an exact faiss top-k over many chunks."""

    def __init__(self, model: DRT, tokenizer=None, device: str | torch.device = "cpu",
                 memory_dtype=np.float16, fingerprint: str | None = None, use_faiss: bool = False):
        self.model = model.eval().to(device)
        self.cfg: DRTConfig = model.config
        self.config = self.cfg
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.memory_dtype = np.dtype(memory_dtype)
        self.fingerprint = fingerprint or state_io.model_fingerprint(model, self.memory_dtype)
        self.model_dir: Path | None = None  # the checkpoint folder (from_pretrained sets it)
        self.stream = Stream(self.model, self.device, use_faiss)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, device: str = "cpu", **kw) -> "Engine":
        from .errors import ModelNotFound

        p = Path(path)
        if not (p / "config.json").exists() or not (p / "model.safetensors").exists():
            # weights are read from safetensors only: a pickle (.bin / .pt) is never unpickled
            raise ModelNotFound(f"no model at {p} (expected config.json and model.safetensors)")
        from safetensors import SafetensorError

        try:
            # a DRT without importing transformers (runtime.py); other architectures through it
            model = runtime.load(p)
            if model is None:
                from .modeling import DRTForCausalLM

                model = DRTForCausalLM.from_pretrained(str(p), use_safetensors=True)
        except SafetensorError as e:
            from .errors import CorruptCheckpoint

            raise CorruptCheckpoint(f"{p / 'model.safetensors'} is damaged and cannot be loaded: {e}") from e
        tok = None
        if (p / "tokenizer.json").exists():
            from .tokenizer import EngineTokenizer

            tok = EngineTokenizer(p)  # PreTrainedTokenizerFast's calls, without importing transformers
            if getattr(model, "lexical", None) is not None and model.lexical.words is not None:
                from .words import word_tables

                model.lexical.set_word_tables(word_tables(tok))  # this checkpoint's own tokenizer
        fp = state_io.checkpoint_fingerprint(p, model.config, kw.get("memory_dtype", np.float16))
        eng = cls(model, tok, device=device, fingerprint=fp, **kw)
        eng.model_dir = p  # what else the checkpoint ships (qa.abstain's common-word list)
        return eng

    # -- states --------------------------------------------------------------------------------------

    def new_state(self, directory: str | os.PathLike | None = None) -> DocState:
        """A fresh stream: in RAM (directory None) or in a state directory (created)."""
        if directory is not None:
            return self.open_state(directory)
        return DocState(self, self.stream.new_memory(None, self.memory_dtype), self.stream.new_carry(), None)

    def open_state(self, directory: str | os.PathLike) -> DocState:
        """Create or reopen the state stored in `directory` (as of its last commit)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = state_io.read_meta(d, self.fingerprint)
        mem, carry = self.stream.new_memory(d, self.memory_dtype), self.stream.new_carry()
        if not state_io.load_carry(d, meta, carry, self.cfg, self._n_lower(carry), self.device) and mem.n:
            mem.truncate(0)
        return DocState(self, mem, carry, d)

    def prefix(self, state: DocState, n_tokens: int) -> DocState | None:
        """The stored `state`'s document as it stood after its first `n_tokens` tokens, in RAM, to
        be fed the tokens from its own n_tokens up to that cut (`prefill`): the stored chunks before
        the last snapshot at or before the cut (state_io.SNAPSHOT_TOKENS), and the carry kept there.
        The same numbers as a prefill from the start (as a resume from a checkpoint). None when the
        state keeps no such snapshot (a state in RAM, or one prefilled before snapshots were kept)."""
        if state.directory is None:
            return None
        snaps = [s for s in getattr(state.memory, "meta", {}).get("snapshots", []) if s["n_tokens"] <= n_tokens]
        if not snaps or not (state.directory / snaps[-1]["file"]).exists():
            return None
        snap = snaps[-1]
        carry = self.stream.new_carry()
        state_io.fill_carry(state.directory / snap["file"], snap, carry, self.cfg, self._n_lower(carry), self.device)
        return DocState(self, OverlayMemory(PrefixMemory(state.memory, snap["n"])), carry, None)

    def _n_lower(self, carry) -> int:
        """How many of the carry's windows are the lower layers' (state_io.fill_carry)."""
        return len(self.model.lower) if self.cfg.uses_chunks else len(carry.windows)

    def feed(self, state: DocState, ids: Sequence[int], want_logits: bool = False, record: list | None = None,
             block_chunks: int = 16, upper: bool = True, select: bool = True) -> torch.Tensor | None:
        """Append real tokens to the stream (Stream.feed). Returns logits [len(ids), V] when asked
        (float32; [Bv, len(ids), V] on a fork of counterfactual.fork_variants). `record` collects
        the landmarks' selections ({"group", "lmk_chunk", "serves", "idx", "weights", "scores"}).

        upper=False defers the retrieval groups where that is exact (`Stream.can_defer`; never
        with logits): only the lower layers, the chunk encoder, the memory and the selections are
        computed, and the groups' windows are rebuilt from the last positions' lower-layer
        outputs when next needed (`Stream.catch_up`), with the same numbers as if they had run.

        select=False (deferred feeds only) skips the landmarks' selections too: at millions of
        tokens scoring every past chunk at every landmark is most of a prefill, and with the groups
        deferred only the selections of the last `Stream.catch_up_span` positions are ever read.
        The skipped rows hold NaN weights; a catch-up or a run that would read one raises. For
        streams whose per-chunk selections nobody reads (the NIAH bench's haystack: its last chunks
        are fed with select=True before the question), never for a library's documents (their trace)."""
        return self.stream.feed(state, ids, want_logits, record, block_chunks, upper, select)

    # -- prefill and perplexity ----------------------------------------------------------------------

    def prefill(self, state: DocState, ids: Sequence[int], *, cancel: threading.Event | None = None,
                block_chunks: int = 16, checkpoint_every: int = 8,
                defer_upper: bool = True) -> Iterator[PrefillProgress]:
        """Feed `ids` (the WHOLE document's ids) from state.n_tokens on, in blocks of chunks;
        yields progress after each block and commits every `checkpoint_every` blocks and at the end.
        Cancelling stops after the current block and commits what was done.

        defer_upper: the retrieval groups' outputs are needed only through their sliding windows at
        the end of the document, so they are deferred (feed upper=False) and run once over the last
        positions when the state is forked or fed again, with the same numbers (Stream.catch_up)."""
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

    # -- generation ----------------------------------------------------------------------------------

    def prompt_ids(self, state: DocState, question: str | None) -> list[int]:
        from .prompts import qa_prompt_ids, summary_prompt_ids

        enc = lambda s: self.tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
        if question is None:
            return summary_prompt_ids(state.n_tokens, encode=enc, chunk_tokens=self.cfg.chunk_size - 1)
        return qa_prompt_ids(state.n_tokens, question, encode=enc, chunk_tokens=self.cfg.chunk_size - 1)

    @torch.no_grad()
    def generate(self, state: DocState, question: str | None = None, *,
                 prompt_ids: Sequence[int] | None = None, max_new_tokens: int = 64,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 stop_at_newline: bool = True, seed: int | None = None, no_repeat_ngram: int = 0,
                 cancel: threading.Event | None = None, mask: Iterable[int] | None = None,
                 terms: np.ndarray | None = None) -> Iterator[GenEvent]:
        """Ask `question` about the document in `state` (None: ask for a summary), streaming tokens.

        The stored state is not modified (generation runs on a fork). The last event has done=True,
        the whole answer, its token ids and the RetrievalTrace of the generated chunks. `no_repeat_ngram`
        = n > 0 forbids a token that would repeat an n-gram of the answer so far (the answer only:
        copying from the document stays allowed), which stops a small model's loops.

        `mask`: document chunk ids barred from retrieval (counterfactual masking, counterfactual.bar);
        the trace then records them (`masked`) and gives them no score (None). `terms`: more
        question-time selection scores, one per document chunk, added with the BM25 term (question_bias)."""
        barred = counterfactual.check_mask(state, mask)
        trace = decode.RetrievalTrace(state.n_chunks, masked=sorted(barred))
        fork = counterfactual.masked_fork(state, barred, self.question_bias(state, question, terms))
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(fork, question)
        sampling = Sampling(temperature, top_k, top_p, no_repeat_ngram, seed)
        yield from decode.generate(self, fork, list(prompt_ids), trace, max_new_tokens, sampling,
                                   stop_at_newline, cancel)

    def evidence(self, state: DocState, trace: decode.RetrievalTrace,
                 n_doc_chunks: int | None = None) -> list[tuple[int, float]]:
        """Document chunks the answer drew on, by total fusion weight over its generated chunks."""
        n = trace.n_doc_chunks if n_doc_chunks is None else n_doc_chunks
        acc: dict[int, float] = {}
        for row in trace.rows:
            for cid, w in zip(row["topk"], row["weights"]):
                if cid < n:
                    acc[cid] = acc.get(cid, 0.0) + w
        total = sum(acc.values()) or 1.0
        return sorted(((c, w / total) for c, w in acc.items()), key=lambda t: -t[1])

    # -- the question's selection terms --------------------------------------------------------------

    def bm25_index(self, state: DocState):
        """The BM25 index (drt_core.bm25) of the document's chunks, their texts decoded from the stored
        token ids; cached per memory (a fork's is its base's), rebuilt when the memory has grown."""
        return state.index.bm25(self.tokenizer, self.cfg.bm25_window)

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
        barred = counterfactual.check_mask(state, mask)
        fork = counterfactual.masked_fork(state, barred, self.question_bias(state, question, terms))
        record: list[dict] = []
        self.feed(fork, self.prompt_ids(fork, question), record=record)
        sel = decode.serving_selection(fork, record, fork.carry.pos // self.cfg.chunk_size)
        if sel is None or sel["scores"] is None:
            return None
        n = state.n_chunks
        return np.array([float("-inf") if x is None else x for x in sel["scores"][:n]], np.float64)

    # -- counterfactuals (drt_core.counterfactual) ---------------------------------------------------

    def answer_logprob(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                       mask: Iterable[int] | None = None, *, prompt_ids: Sequence[int] | None = None,
                       terms: np.ndarray | None = None) -> float:
        """Teacher-forced log-likelihood of an answer: sum of log p(answer_ids[i] | prompt, answer_ids[:i])
        with the prompt laid out as `generate` lays it out (`prompt_ids`), the chunks of `mask` barred
        from retrieval as in `generate`. One forked pass over prompt + answer; the state is untouched."""
        barred = counterfactual.check_mask(state, mask)
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        bias = self.question_bias(state, question, terms)
        return counterfactual.answer_logprob(state, prompt_ids, answer_ids, barred, bias)[0]

    def answer_logprobs(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                        masks: Sequence[Iterable[int]], *, prompt_ids: Sequence[int] | None = None,
                        terms: np.ndarray | None = None) -> list[float]:
        """answer_logprob for each mask of `masks` (chunks barred from retrieval), in one batched
        teacher-forced pass: one row per mask (counterfactual.fork_variants). The state is untouched."""
        barred = [frozenset(counterfactual.check_mask(state, m)) for m in masks]
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        bias = self.question_bias(state, question, terms)
        return counterfactual.answer_logprobs(state, prompt_ids, answer_ids, barred, bias)

    def causal_effects(self, state: DocState, question: str | None, answer_ids: Sequence[int],
                       chunks: Iterable[int], *, prompt_ids: Sequence[int] | None = None,
                       terms: np.ndarray | None = None) -> dict[int, float]:
        """The causal effect of each chunk on an answer: answer_logprob(nothing masked) minus
        answer_logprob(that chunk alone masked), in nats (> 0: the chunk made the answer likelier).

        Cost: one forked teacher-forced pass over prompt + answer for the unmasked answer (it says
        which chunks its selections picked), then one batched pass (counterfactual.fork_variants)
        for every picked chunk at once: its lower layers, chunk encoder and retrieval scores are
        computed once, its retrieval groups run one row per masked chunk. A chunk no selection
        picked changes nothing, bit for bit, and gets 0.0 without a pass."""
        chunks = sorted(counterfactual.check_mask(state, chunks))
        if prompt_ids is None:
            prompt_ids = self.prompt_ids(state, question)
        bias = self.question_bias(state, question, terms)
        return counterfactual.causal_effects(state, prompt_ids, answer_ids, chunks, bias)
