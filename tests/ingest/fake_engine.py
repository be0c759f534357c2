"""A small stand-in for drt_core.engine.Engine, with the same surface, for pipeline and CLI tests.

What it mimics (and what the pipeline relies on):
- `open_state(dir)` creates or reopens a state; like drt_core.engine, `state.n_tokens` is the
  in-memory progress (ahead of the disk between checkpoints) and meta.json's `n_tokens` is what was
  checkpointed (what a restart finds);
- `prefill(state, ids, cancel=)` continues from `state.n_tokens`, yields
  `PrefillProgress(done_tokens, total_tokens, tokens_per_s)` after each batch of chunks, checkpoints
  atomically every `checkpoint_every` batches and at the end (cancelled or not), and stops at the
  next batch once `cancel` is set;
- each chunk "retrieves" the two earlier chunks (e < c - 1) sharing most token ids with it, with
  softmax-like weights, so the dependency map has real structure;
- `generate` streams a canned answer and returns a trace whose top-k are the chunks sharing most
  ids with the prompt (`mask`: chunks left out of the candidates); `evidence` sums the trace's
  weights per chunk; `causal_effects` is the ids a chunk shares with the question, over 10.
Nothing here is a model; it only lets the pipeline's bookkeeping be tested without one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 63


def load_test_tokenizer():
    """The shipped tokenizer.json (no torch import), else a tiny BPE trained on the test assets."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    shipped = ROOT / "checkpoints" / "drt-tiny" / "tokenizer.json"
    if shipped.exists():
        return Tokenizer.from_file(str(shipped))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    text = (ROOT / "tests" / "assets" / "stacks-brauer.tex").read_text(encoding="utf-8")
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|pad|>", "<|endoftext|>", "<|lmk|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([text], trainer=trainer)
    return tok


@dataclass
class PrefillProgress:
    done_tokens: int
    total_tokens: int
    tokens_per_s: float


@dataclass
class GenerateEvent:
    text_delta: str
    done: bool
    answer: str | None = None
    trace: "FakeTrace | None" = None
    ids: list[int] | None = None


class FakeTrace:
    def __init__(self, chunks: list[dict]):
        self.chunks = chunks

    def to_json(self) -> dict:
        return {"chunks": self.chunks}


class FakeState:
    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "meta.json"
        data = json.loads(meta.read_text()) if meta.exists() else {"n_tokens": 0, "dep": [], "ids": []}
        self._n_tokens = int(data["n_tokens"])
        self._dep: list[dict] = data["dep"]
        self._ids: list[int] = data["ids"]
        self._pending: list[dict] = []
        self._pending_tokens = self._n_tokens

    @property
    def n_tokens(self) -> int:
        return self._pending_tokens  # in memory, as drt_core.engine.DocState.n_tokens

    @property
    def n_chunks(self) -> int:
        return -(-len(self._ids) // CHUNK)  # as stored at the last checkpoint (a ready document: all)

    def dependency_map(self) -> list[dict]:
        return [dict(r) for r in self._dep]

    def checkpoint(self, ids: list[int]) -> None:
        self._dep = self._dep + self._pending
        self._pending = []
        self._n_tokens = self._pending_tokens
        self._ids = list(ids[: self._n_tokens])
        tmp = self.dir / f".meta.json.tmp-{os.getpid()}"
        tmp.write_text(json.dumps({"n_tokens": self._n_tokens, "dep": self._dep, "ids": self._ids}))
        os.replace(tmp, self.dir / "meta.json")


class FakeEngine:
    def __init__(
        self,
        tokenizer=None,
        *,
        batch_chunks: int = 4,
        checkpoint_every: int = 2,
        delay_s: float = 0.0,
        fail_at_chunk: int | None = None,
        answer: str = "Emma Woodhouse, handsome, clever, and rich.",
    ):
        self.tokenizer = tokenizer if tokenizer is not None else load_test_tokenizer()
        self.config = {"chunk_tokens": CHUNK, "batch_chunks": batch_chunks}
        self.fingerprint = "fake-" + hashlib.sha256(self.tokenizer.to_str().encode()).hexdigest()[:12]
        self.batch_chunks = batch_chunks
        self.checkpoint_every = checkpoint_every
        self.delay_s = delay_s
        self.fail_at_chunk = fail_at_chunk
        self.answer = answer
        self.prefill_calls = 0
        self.model_dir = None  # no checkpoint folder: no answer reader, no common-word list

    @classmethod
    def from_pretrained(cls, path_or_name=None, device: str = "cpu") -> "FakeEngine":
        return cls()

    def open_state(self, directory) -> FakeState:
        return FakeState(directory)

    # -- prefill ------------------------------------------------------------------------------

    @staticmethod
    def _bags(ids: list[int]) -> list[set[int]]:
        return [set(ids[i : i + CHUNK]) for i in range(0, len(ids), CHUNK)]

    @staticmethod
    def _retrieve(
        bag: set[int], bags: list[set[int]], candidates: range, k: int = 2
    ) -> tuple[list[int], list[float]]:
        scored = sorted(((len(bag & bags[e]), e) for e in candidates), key=lambda t: (-t[0], t[1]))[:k]
        if not scored:
            return [], []
        z = [math.exp(s / 8) for s, _ in scored]
        tot = sum(z)
        return [e for _, e in scored], [round(x / tot, 6) for x in z]

    def prefill(
        self,
        state: FakeState,
        ids,
        cancel: threading.Event | None = None,
        block_chunks: int | None = None,
        checkpoint_every: int | None = None,
    ):
        """Like Engine.prefill; block_chunks / checkpoint_every override the constructor's."""
        self.prefill_calls += 1
        batch_chunks = block_chunks or self.batch_chunks
        every = checkpoint_every or self.checkpoint_every
        ids = [int(i) for i in ids]
        total = len(ids)
        bags = self._bags(ids)
        n_chunks = len(bags)
        c = state.n_tokens // CHUNK
        batches = 0
        t0 = time.monotonic()
        start = state.n_tokens
        while c < n_chunks:
            if cancel is not None and cancel.is_set():
                break
            for cc in range(c, min(c + batch_chunks, n_chunks)):
                if self.fail_at_chunk is not None and cc >= self.fail_at_chunk:
                    raise RuntimeError(f"simulated engine failure at chunk {cc}")
                retrieved, weights = self._retrieve(bags[cc], bags, range(0, max(cc - 1, 0)))
                state._pending.append({"chunk": cc, "retrieved": retrieved, "weights": weights})
            c = min(c + batch_chunks, n_chunks)
            state._pending_tokens = min(c * CHUNK, total)
            batches += 1
            if batches % every == 0:
                state.checkpoint(ids)
            dt = max(time.monotonic() - t0, 1e-6)
            yield PrefillProgress(state._pending_tokens, total, (state._pending_tokens - start) / dt)
            if self.delay_s:
                time.sleep(self.delay_s)
        state.checkpoint(ids)

    # -- generation ---------------------------------------------------------------------------

    def generate(
        self, state: FakeState, question: str | None, max_new_tokens: int = 64, temperature: float = 0.0,
        mask=None, **kw
    ):
        prompt_text = question if question is not None else "Summary:"
        prompt_ids = self.tokenizer.encode(prompt_text, add_special_tokens=False).ids
        bags = self._bags(state._ids)
        barred = set(mask or [])
        candidates = [c for c in range(len(bags)) if c not in barred]
        topk, weights = self._retrieve(set(prompt_ids), bags, candidates, k=3)
        scores = [float(len(set(prompt_ids) & b)) for b in bags]
        trace = FakeTrace([{"gen_chunk": 0, "topk": topk, "weights": weights, "scores": scores}])
        words = self.answer.split(" ")[: max(1, max_new_tokens)]
        for i, w in enumerate(words):
            yield GenerateEvent(text_delta=(" " if i else "") + w, done=False)
        answer = " ".join(words)
        ids = self.tokenizer.encode(answer, add_special_tokens=False).ids if answer else []
        yield GenerateEvent(text_delta="", done=True, answer=answer, trace=trace, ids=ids)

    def causal_effects(self, state: FakeState, question: str | None, ids: list[int], chunks) -> dict[int, float]:
        q = set(self.tokenizer.encode(question or "Summary:", add_special_tokens=False).ids)
        bags = self._bags(state._ids)
        return {int(c): len(q & bags[c]) / 10 for c in chunks}

    def bm25_index(self, state: FakeState):
        """No BM25 index: the fake retrieves by shared token ids alone."""
        return None

    def evidence(self, state: FakeState, trace: FakeTrace) -> list[tuple[int, float]]:
        agg: dict[int, float] = {}
        for row in trace.chunks:
            for c, w in zip(row["topk"], row["weights"]):
                agg[c] = agg.get(c, 0.0) + float(w)
        return sorted(agg.items(), key=lambda cw: -cw[1])
