"""Generation on a fork of a document's state, as in gpt-fast's generation: the prompt fed at once,
then one token at a time (`decode_one_token`), sampled (`sample`), with the retrieval trace of the
chunks the answer reads (`RetrievalTrace`) and the events a caller streams (`GenEvent`).

A decoded token goes through the same stream as a prefill (Stream.run, a run of one position, or two
when the token completes a chunk and the landmark that closes it follows): its GCA reads the
selection carried from the last landmark, gathered once per chunk (Stream.gca_fn).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch

from .counterfactual import drop_masked
from .prompts import clean_answer


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
class GenEvent:
    token_id: int | None
    text_delta: str
    done: bool = False
    answer: str | None = None
    trace: RetrievalTrace | None = None
    stop_reason: str | None = None
    ids: list[int] | None = None  # the generated token ids (done event; what answer_logprob scores)


@dataclass
class Sampling:
    """How the next token is chosen (Engine.generate's options)."""

    temperature: float = 0.0  # <= 0: greedy
    top_k: int = 0
    top_p: float = 1.0
    no_repeat_ngram: int = 0  # n > 0: never a token that repeats an n-gram of the answer so far
    seed: int | None = None

    def next_token(self, logits: torch.Tensor, out_ids: Sequence[int], gen: torch.Generator) -> int:
        if self.no_repeat_ngram > 0:
            logits = ban_repeats(logits, out_ids, self.no_repeat_ngram)
        return sample(logits, self.temperature, self.top_k, self.top_p, gen)


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


def serving_selection(fork, record: list[dict], chunk: int) -> dict | None:
    """The selection serving `chunk` (made by landmark chunk-1), from the run records, or from
    the stored memory when that landmark was processed at prefill time (no scores there)."""
    if not fork.engine.cfg.uses_chunks:
        return None
    groups = [r for r in record if r["serves"] == chunk]
    if not groups:
        si, sw = fork.memory.selections()
        if chunk - 1 >= len(si) or chunk - 1 < 0:
            return None
        # what the fork's carry holds: the stored selection, less the chunks barred (counterfactual.bar)
        w = drop_masked(torch.from_numpy(np.asarray(si[chunk - 1], np.int64)),
                        torch.from_numpy(np.asarray(sw[chunk - 1], np.float32)), fork.mask)
        groups = [{"group": g, "idx": si[chunk - 1][g].tolist(), "weights": w[g].tolist(),
                   "scores": None} for g in range(si.shape[1])]
    g0 = min(groups, key=lambda r: r["group"])
    keep = [i for i, w in enumerate(g0["weights"]) if w > 0]
    scores = None if g0["scores"] is None else [None if s is None else round(s, 4) for s in g0["scores"]]
    return {"topk": [g0["idx"][i] for i in keep], "weights": [round(g0["weights"][i], 5) for i in keep],
            "scores": scores,
            "groups": [{"topk": r["idx"], "weights": r["weights"]}
                       for r in sorted(groups, key=lambda r: r["group"])]}


def decode_one_token(engine, fork, tok: int, record: list[dict], serving: dict) -> torch.Tensor:
    """One decoding step: `tok` through the stream (and the landmark after it when it completes a
    chunk, whose selection, appended to `record`, then serves the next chunk: noted in `serving`);
    the next token's logits [V]."""
    n = len(record)
    logits = engine.feed(fork, [tok], want_logits=True, record=record)[-1]
    if engine.cfg.uses_chunks and len(record) > n:
        cur = fork.carry.pos // engine.cfg.chunk_size
        serving[cur] = serving_selection(fork, record, cur)
    return logits


def generate(engine, fork, prompt_ids: list[int], trace: RetrievalTrace, max_new_tokens: int,
             sampling: Sampling, stop_at_newline: bool = True,
             cancel: threading.Event | None = None) -> Iterator[GenEvent]:
    """Engine.generate on a fork made for the question: the prompt, then up to max_new_tokens
    tokens, each yielded with its text; the last event has done=True, the answer, its token ids and
    `trace` filled with the selection serving each chunk the answer was generated in."""
    record: list[dict] = []
    logits = engine.feed(fork, prompt_ids, want_logits=True, record=record)[-1]
    gen_chunk0 = fork.carry.pos // engine.cfg.chunk_size if engine.cfg.uses_chunks else 0
    # the selection serving the first answer chunk was made by the landmark before it
    serving = {gen_chunk0: serving_selection(fork, record, gen_chunk0)}
    gen = torch.Generator().manual_seed(sampling.seed if sampling.seed is not None else 0)
    out_ids: list[int] = []
    text = ""
    reason = "length"
    for _ in range(max_new_tokens):
        if cancel is not None and cancel.is_set():
            reason = "cancelled"
            break
        tok = sampling.next_token(logits, out_ids, gen)
        if tok == engine.cfg.eos_token_id:
            reason = "eos"
            break
        out_ids.append(tok)
        new_text = engine.tokenizer.decode(out_ids) if engine.tokenizer else ""
        delta = new_text[len(text):] if not new_text.endswith("\ufffd") else ""
        if delta:
            text += delta
        if stop_at_newline and "\n" in delta:
            text = text[: text.index("\n", len(text) - len(delta))] if "\n" in text else text
            reason = "newline"
            yield GenEvent(tok, delta.split("\n", 1)[0])
            break
        yield GenEvent(tok, delta)
        logits = decode_one_token(engine, fork, tok, record, serving)
    for ch in sorted(serving):
        if serving[ch] is not None:
            trace.rows.append(serving[ch] | {"gen_chunk": ch})
    yield GenEvent(None, "", done=True, answer=clean_answer(text), trace=trace, stop_reason=reason,
                   ids=list(out_ids))
