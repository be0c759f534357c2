"""Reading-comprehension rows (`train --task qa`): a window of a real document, then a question mined
from it (drt_core.mine, data/qa/{split}.jsonl and .bin: `QAItems`) and its answer."""

from __future__ import annotations

import numpy as np

from ...prompts import CHUNK_TOKENS, STOP_TEXT, answer_text, layout_prompt, qa_suffix
from .common import TooShort, encoder, rng_of, tokenizer_dir


def build_qa_example(doc, item: dict, length: int, rng, *, encode=None, answer_weight: float = 5.0,
                     margin: int = 320, chunk_tokens: int = CHUNK_TOKENS) -> dict:
    """A training row of exactly `length` tokens from a mined question (drt_core.mine; `item` as
    in data/qa/{split}.jsonl, token spans relative to the document) about the document `doc`
    (1-D token ids):

        a window of the document holding the gold passage | pads | Question: ... Answer: | answer \\n

    The passage sits at a random place of the window, at least `margin` tokens before the window's
    end (beyond the lower layers' reach: only retrieval finds it). The prompt is laid out by
    prompts.layout_prompt, the app's function. Returns {"ids", "labels", "weights" (np arrays of
    `length`), "row": the retrieval row whose landmark serves the answer's chunk, "targets": the
    chunks of the window holding the answer and the passage's start (what that row should rank
    first), "answer_span"}. Rows whose window is shorter than `length` (short documents) are
    right-padded; labels are -100 there and at the layout pads."""
    rng = rng_of(rng)
    enc = encode or encoder(tokenizer_dir(None))
    p_ids = enc(qa_suffix(item["question"]))
    # the answer as generated: its whitespace runs collapsed ("target"), since a newline ends an answer
    target = item.get("target") or " ".join(item["answer"].split())
    a_ids = enc(answer_text(target))[: 2 * chunk_tokens] + enc(STOP_TEXT)
    ps, pe = (int(x) for x in item["passage_tok"])
    as_, ae = (int(x) for x in item["ans_tok"])
    tail = 2 * chunk_tokens + len(p_ids) + len(a_ids)
    ctx = length - tail
    if ctx < margin + (pe - ps) + chunk_tokens:
        raise TooShort(f"length {length} too short for a question with a {pe - ps}-token passage")
    n_doc = len(doc)
    ctx = min(ctx, n_doc)
    # the window [w0, w0 + ctx) holds the passage, ending at least `margin` tokens before its end
    lo = max(0, pe + margin - ctx)
    hi = min(ps, n_doc - ctx)
    if hi < lo:  # a short document, or a passage near its end: take the window ending `margin` after it
        lo = hi = max(0, min(n_doc - ctx, pe + margin - ctx))
    w0 = rng.randint(lo, hi)
    window = np.asarray(doc[w0:w0 + ctx], dtype=np.int64)
    laid = layout_prompt(len(window), p_ids, chunk_tokens=chunk_tokens)
    n_pad = len(laid) - len(p_ids)
    ids = np.concatenate([window, np.asarray(laid, np.int64), np.asarray(a_ids, np.int64)])
    weights = np.concatenate([np.ones(len(window), np.float32), np.zeros(n_pad, np.float32),
                              np.ones(len(p_ids), np.float32),
                              np.full(len(a_ids), answer_weight, np.float32)])
    labels = ids.copy()
    labels[len(window):len(window) + n_pad] = -100
    if len(ids) > length:
        raise TooShort(f"row of {len(ids)} tokens does not fit {length}")
    pad = length - len(ids)
    ids = np.concatenate([ids, np.zeros(pad, np.int64)])
    labels = np.concatenate([labels, np.full(pad, -100, np.int64)])
    weights = np.concatenate([weights, np.zeros(pad, np.float32)])
    prompt_end = len(window) + len(laid) - 1
    targets = sorted({(as_ - w0) // chunk_tokens, (ps - w0) // chunk_tokens})
    a0 = prompt_end + 1
    return {"ids": ids, "labels": labels, "weights": weights, "row": prompt_end // chunk_tokens - 1,
            "targets": targets, "answer_span": (a0, a0 + len(a_ids) - 1), "window_start": w0}


class QAItems:
    """The mined questions of one split (drt_core.mine's data/qa/{split}.jsonl and .bin), drawn
    with equal probability per question type, then uniformly within the type."""

    def __init__(self, qa_dir, split: str = "train"):
        import json
        from pathlib import Path

        d = Path(qa_dir)
        self.tokens = np.memmap(d / f"{split}.bin", dtype=np.uint16, mode="r")
        with open(d / f"{split}.jsonl", encoding="utf-8") as f:
            self.items = [json.loads(line) for line in f if line.strip()]
        if not self.items:
            raise ValueError(f"no mined questions in {d / f'{split}.jsonl'}")
        self.by_type: dict[str, list[int]] = {}
        for i, it in enumerate(self.items):
            self.by_type.setdefault(it["qtype"], []).append(i)
        self.types = sorted(self.by_type)

    def draw(self, rng) -> tuple[dict, np.ndarray]:
        """(item, its document's token ids)."""
        idx = self.by_type[self.types[rng.randrange(len(self.types))]]
        it = self.items[idx[rng.randrange(len(idx))]]
        s = int(it["doc_start"])
        return it, self.tokens[s:s + int(it["doc_len"])]
