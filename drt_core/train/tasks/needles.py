"""Seeded needle-in-a-haystack (NIAH) builders over real haystack tokens (spec §5.3): the
`single`, `multikey` and `2hop` training tasks and `eval niah`'s examples.

Tasks (the spec's semantics, our text):

* ``single``   one passkey hidden in the haystack; the question asks for it.
* ``multikey`` 1 real key/value pair plus ``n_distractors`` (default 5) pairs with other keys;
  the question names the real key.
* ``2hop``     chains v0 -> v1 -> v2 plus ``n_distractors`` (default 1) distractor chains
  v3 -> v4 -> v5; each hop is its own needle, shuffled and spread over the haystack; the question
  gives v0 and the answer is "v1; v2" (TWOHOP_SEP: no needle continues its first code with it).

Values are random digit strings (5-7 digits, first digit non-zero, all distinct in an example), so
answers are checkable from text (`score_answer`). Needles and questions come from FAMILIES of
phrasings (8 each); the first 6 of each family are the training phrasings and the last 2 are held
out (``phrasings="train" | "heldout" | "all"``), so evaluation can ask in unseen words.

Layout of one example of ``length`` tokens (any length; the model pads to chunks internally)::

    haystack with needles | pads | Q1 | A1 \\n | pads | Q2 | A2 \\n | ... | right pads

Every question is laid out by `prompts.layout_prompt`: its last token (the ":" of "Answer:") sits at
a position p with p % 63 == 0, so the landmark that chooses the answer chunk's retrievals has read
the question (docs/spec.md §5.3, our `prompts` module docstring). The same function lays out the
app's questions, so the model is asked the way it was taught. A needle (" The passkey is 84613.")
is inserted after a sentence end and before a word where one is within 256 tokens (else between two
words), and never in the last 2 * 63 haystack tokens before the first question (as in the reference).

Labels follow the HF convention: ``labels[i]`` is the token at position i (the model shifts),
-100 at pads. ``weights[i]`` weights the loss of predicting ``labels[i]``: 0 at pads,
``answer_weight`` on answer tokens and the newline that ends them, 1 elsewhere (the spec trains on
the whole sequence; the weight lets training stress the answers).

Every builder takes a seed or a `random.Random`; nothing touches the global RNGs (the reference's
defect, spec §9.11). Same (haystack, length, seed, options) -> same example, token for token.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np

from ...prompts import CHUNK_TOKENS, STOP_TEXT, answer_text, layout_prompt, qa_suffix
from ...tokenizer import EOT_ID, PAD_ID
from .common import IGNORE, TooShort, encoder, rng_of, tokenizer_dir, tokenizer_path_of
from .phrasings import FACTS, TASK_NAMES, phrasing_templates, twohop_values


# ------------------------------------------------------------------------------------------------
# the example
# ------------------------------------------------------------------------------------------------


@dataclass
class NIAHExample:
    """One NIAH sequence. Positions are indices into `ids` (0-based, real tokens, no landmarks)."""

    task: str
    ids: np.ndarray  # int64 [length]
    labels: np.ndarray  # int64 [length]; ids with -100 at pads (HF convention: the model shifts)
    weights: np.ndarray  # float32 [length]; loss weight of labels[i]
    answers: list[str]  # text answers, e.g. "48213" or "48213, 99120"
    answer_spans: list[tuple[int, int]]  # [start, end) of each answer's tokens (no leading prompt, no stop)
    questions: list[str]
    prompt_ends: list[int]  # position of each prompt's last token (":"); p % 63 == 0
    needle_spans: list[tuple[int, int]]  # [start, end) of every needle (real and distractor)
    needles: list[str]  # needle texts, in the order of needle_spans
    n_context: int  # haystack + needles: tokens before the first question's pads
    meta: dict = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return self.answers[0]

    @property
    def answer_span(self) -> tuple[int, int]:
        return self.answer_spans[0]

    @property
    def question(self) -> str:
        return self.questions[0]

    def prompt_ids(self, k: int = 0) -> np.ndarray:
        """The ids up to and including question k's last prompt token: what to feed before
        generating answer k."""
        return self.ids[: self.prompt_ends[k] + 1]


def score_answer(generated: str, answer: str) -> bool:
    """Whether generated text answers correctly: the numbers before the first newline must start
    with the expected numbers, in order ("48213" or "48213, 99120"). Leading blank lines are skipped."""
    expected = re.findall(r"\d+", answer)
    lines = [ln for ln in str(generated).split(STOP_TEXT) if ln.strip()]
    got = re.findall(r"\d+", lines[0]) if lines else []
    return bool(expected) and got[: len(expected)] == expected


@lru_cache(maxsize=4)
def _boundary_ids(tok_path: str) -> tuple[frozenset[int], frozenset[int]]:
    """(ids whose text ends a sentence, ids whose text starts with whitespace). A needle (" The
    passkey is 84613.") reads naturally between the two: "... end. The passkey is 84613. Next ..."."""
    from ...tokenizer import backend, decode_pieces

    ends = (".", "!", "?", '."', ".\u201d", "!\u201d", "?\u201d", ".)", ".'", "!'", "?'")
    end_ids, space_ids = set(), set()
    for i, t in enumerate(decode_pieces(range(backend(tok_path).get_vocab_size()), tok_path)):
        if t.endswith(ends):
            end_ids.add(i)
        if t[:1].isspace():
            space_ids.add(i)
    end_ids.add(EOT_ID)
    space_ids.add(EOT_ID)
    return frozenset(end_ids), frozenset(space_ids)


def _haystack_window(haystack, n: int, rng: random.Random) -> np.ndarray:
    """n consecutive haystack tokens from a random start (the haystack is tiled, EOT-joined, if short)."""
    hay = np.asarray(haystack)
    if hay.ndim != 1 or hay.size == 0:
        raise ValueError("haystack must be a non-empty 1-D token array")
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if hay.size >= n:
        s = rng.randrange(0, hay.size - n + 1)
        return np.asarray(hay[s : s + n], dtype=np.int64)
    reps = -(-n // (hay.size + 1)) + 1
    tiled = np.concatenate([np.append(np.asarray(hay, dtype=np.int64), EOT_ID)] * reps)
    s = rng.randrange(0, hay.size + 1)
    return tiled[s : s + n].copy()


SPLIT_SLOTS = 3  # split_frac: a moved needle's value starts in one of the first 3 slots of a chunk


def _value_offset(ids, text: str, enc) -> int:
    """Tokens of the needle " " + text before its (first) number: the value's first token."""
    m = re.search(r"\d", text)
    if m is None:
        return 0
    head = enc(" " + text[: m.start()].rstrip())
    n = 0
    while n < min(len(head), len(ids)) and head[n] == ids[n]:
        n += 1
    return n


def _snap(pos: int, hay: np.ndarray, boundary, lo: int, hi: int, radius: int = 256, ok=None) -> int:
    """Nearest insertion point in [lo, hi] after a sentence end and before a space (else before a
    space, i.e. between words; else `pos`). With a predicate ok(q) (split_frac: where the value
    then starts a chunk), only points where it holds, falling back to any such point."""
    end_ids, space_ids = boundary
    n = hay.size

    def ok_space(q):
        return q >= n or int(hay[q]) in space_ids

    tests = [lambda q: (q == 0 or int(hay[q - 1]) in end_ids) and ok_space(q), ok_space]
    if ok is not None:
        tests = [lambda q, t=t: ok(q) and t(q) for t in tests] + [ok]
    for test in tests:
        for d in range(radius + 1):
            for q in (pos + d, pos - d):
                if lo <= q <= hi and test(q):
                    return q
    return pos


# ------------------------------------------------------------------------------------------------
# the builder
# ------------------------------------------------------------------------------------------------


def build(
    task: str,
    haystack,
    length: int,
    seed,
    *,
    depth: float | None = None,
    phrasings: str = "train",
    n_pairs: int = 1,
    n_distractors: int | None = None,
    answer_weight: float = 5.0,
    digits: tuple[int, int] = (5, 7),
    tokenizer_path=None,
    chunk_tokens: int = CHUNK_TOKENS,
    needle_margin: int | None = None,
    split_frac: float = 0.0,
) -> NIAHExample:
    """One NIAH example of exactly `length` tokens (see the module docstring).

    haystack: 1-D token ids (list, np array or np.memmap, e.g. ``data/books/val.bin``); a random
        window of it is used (tiled if shorter than needed).
    seed: an int/str seed or a `random.Random` (consumed), never the global RNG.
    depth: where the (first) real needle goes, as a fraction of the haystack in [0, 1]; None draws
        it uniformly. The other needles (distractors, the second hop) go at random depths.
    n_pairs: questions in the sequence (multikey: that many real keys, 2hop: that many chains);
        all needles are in the haystack, the questions follow one after another at the end.
    needle_margin: haystack tokens kept free of needles before the first question (default two
        chunks, as in the reference); training uses more than the self-attention window, so that
        the needles are reachable only through retrieval.
    split_frac: the share of needles (training, `train --task-split`) moved to the nearest point
        where their value starts in the first SPLIT_SLOTS slots of a chunk: written across a chunk
        boundary, the words that name the value in the chunk before. 0 (the default) draws nothing
        from the RNG, so examples are those of earlier versions.
    """
    if task not in FACTS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASK_NAMES}")
    if depth is not None and not 0.0 <= float(depth) <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    if n_pairs < 1:
        raise ValueError("n_pairs must be >= 1")
    if not 0.0 <= float(split_frac) <= 1.0:
        raise ValueError(f"split_frac must be in [0, 1], got {split_frac}")
    rng = rng_of(seed)
    tok_path = tokenizer_dir(tokenizer_path)
    enc = encoder(tok_path)
    ntpl, qtpl = phrasing_templates(task, phrasings)
    needle_texts, real_idx, qas = FACTS[task](rng, n_pairs, n_distractors, digits, ntpl, qtpl)

    needle_ids = [enc(" " + t) for t in needle_texts]
    stop_ids = enc(STOP_TEXT)
    tails = [(enc(qa_suffix(q)), enc(answer_text(a)), stop_ids) for q, a in qas]
    margin = 2 * chunk_tokens if needle_margin is None else int(needle_margin)
    hay_len = _haystack_length(length, sum(len(x) for x in needle_ids), tails, margin, chunk_tokens,
                               f"task {task} with {n_pairs} question(s)")
    hay = _haystack_window(haystack, hay_len, rng)
    parts, needle_spans, n_context = _insert_needles(hay, needle_texts, needle_ids, real_idx, depth, margin,
                                                     split_frac, rng, enc, _boundary_ids(tok_path),
                                                     chunk_tokens)
    ids, weights, answer_spans, prompt_ends, n_right = _lay_out_questions(parts, tails, n_context, length,
                                                                          answer_weight, chunk_tokens)
    labels = ids.copy()
    labels[weights == 0] = IGNORE
    assert ids.size == length and weights.size == length
    return NIAHExample(
        task=task,
        ids=ids,
        labels=labels,
        weights=weights,
        answers=[a for _, a in qas],
        answer_spans=answer_spans,
        questions=[q for q, _ in qas],
        prompt_ends=prompt_ends,
        needle_spans=needle_spans,
        needles=list(needle_texts),
        n_context=n_context,
        meta={
            "depth": depth,
            "phrasings": phrasings,
            "real_needles": list(real_idx),
            "n_right_pad": n_right,
            "chunk_tokens": chunk_tokens,
        },
    )


def _haystack_length(length: int, n_needles: int, tails, margin: int, chunk_tokens: int, what: str) -> int:
    """The largest haystack such that haystack + needles + the laid-out questions (`tails`: prompt,
    answer and stop ids of each) fit in `length`; TooShort when it would not keep `margin` tokens
    free of needles before the first question."""

    def tail_len(n_ctx: int) -> int:
        pos = n_ctx
        for p_ids, a_ids, s_ids in tails:
            pos += len(layout_prompt(pos, p_ids, chunk_tokens=chunk_tokens)) + len(a_ids) + len(s_ids)
        return pos - n_ctx

    def fits(h: int) -> bool:
        return h + n_needles + tail_len(h + n_needles) <= length

    tail_min = sum(len(p) + len(a) + len(s) for p, a, s in tails)
    min_hay = margin + 1
    hay_len = max(0, length - n_needles - tail_min - (chunk_tokens - 1) * len(tails))
    while hay_len > 0 and not fits(hay_len):
        hay_len -= 1
    while fits(hay_len + 1):
        hay_len += 1
    if hay_len < min_hay or not fits(hay_len):
        raise TooShort(f"length {length} too short for {what} (needs about {length - hay_len + min_hay})")
    return hay_len


def _insert_needles(hay: np.ndarray, texts, needle_ids, real_idx, depth, margin: int, split_frac: float, rng,
                    enc, boundary, chunk_tokens: int) -> tuple[list[np.ndarray], list[tuple[int, int]], int]:
    """The haystack with the needles in it: (its parts, each needle's [start, end), its length). The
    first real needle goes at `depth` (else at random), the others at random, each snapped to a
    sentence end (_snap) and ending at least `margin` tokens before the questions; a share
    split_frac is moved to where its value starts a chunk (SPLIT_SLOTS)."""
    hay_len = len(hay)
    max_pos = hay_len - margin  # needles end >= `margin` tokens before the questions
    positions = []
    for i in range(len(texts)):
        if i == real_idx[0] and depth is not None:
            target = int(round(float(depth) * max_pos))
        else:
            target = rng.randint(0, max_pos)
        positions.append(_snap(target, hay, boundary, 0, max_pos))
    order = sorted(range(len(texts)), key=lambda i: (positions[i], i))
    split = [split_frac > 0 and rng.random() < split_frac for _ in texts]

    parts: list[np.ndarray] = []
    needle_spans: list[tuple[int, int] | None] = [None] * len(texts)
    cur, out_len = 0, 0
    for i in order:
        p = max(positions[i], cur)  # a needle moved by split_frac may pass the next one's position
        if split[i]:  # value at slot < SPLIT_SLOTS of its chunk: out position out_len + (q - cur) + offset
            off = _value_offset(needle_ids[i], texts[i], enc)
            starts_chunk = lambda q: (out_len + q - cur + off) % chunk_tokens < SPLIT_SLOTS  # noqa: E731
            p = _snap(p, hay, boundary, cur, max_pos, ok=starts_chunk)
        parts.append(hay[cur:p])
        out_len += p - cur
        cur = p
        nid = np.asarray(needle_ids[i], dtype=np.int64)
        needle_spans[i] = (out_len, out_len + nid.size)
        parts.append(nid)
        out_len += nid.size
    parts.append(hay[cur:])
    out_len += hay_len - cur
    return parts, [s for s in needle_spans if s is not None], out_len


def _lay_out_questions(parts: list[np.ndarray], tails, n_context: int, length: int, answer_weight: float,
                       chunk_tokens: int):
    """The context's parts, then each question laid out by prompts.layout_prompt with its answer and
    stop, then right pads to `length`: (ids, weights, answer spans, prompt ends, right pads)."""
    out_len = n_context
    w_parts = [np.ones(n_context, dtype=np.float32)]
    answer_spans, prompt_ends = [], []
    for p_ids, a_ids, s_ids in tails:
        laid = layout_prompt(out_len, p_ids, chunk_tokens=chunk_tokens)
        n_pad = len(laid) - len(p_ids)
        prompt_ends.append(out_len + len(laid) - 1)
        parts.append(np.asarray(laid, dtype=np.int64))
        w_parts.append(np.concatenate([np.zeros(n_pad, np.float32), np.ones(len(p_ids), np.float32)]))
        out_len += len(laid)
        answer_spans.append((out_len, out_len + len(a_ids)))
        parts.append(np.asarray(a_ids + s_ids, dtype=np.int64))
        w_parts.append(np.full(len(a_ids) + len(s_ids), answer_weight, np.float32))
        out_len += len(a_ids) + len(s_ids)
    n_right = length - out_len
    assert 0 <= n_right, (length, out_len)
    parts.append(np.full(n_right, PAD_ID, dtype=np.int64))
    w_parts.append(np.zeros(n_right, np.float32))
    return np.concatenate(parts), np.concatenate(w_parts), answer_spans, prompt_ends, n_right


def single(haystack, length: int, seed, **kw) -> NIAHExample:
    """One passkey (spec "single")."""
    return build("single", haystack, length, seed, **kw)


def multikey(haystack, length: int, seed, **kw) -> NIAHExample:
    """1 real (or n_pairs) key/value pair(s) among n_distractors (default 5) others (spec "multi")."""
    return build("multikey", haystack, length, seed, **kw)


def two_hop(haystack, length: int, seed, **kw) -> NIAHExample:
    """Chain v0 -> v1 -> v2 plus a distractor chain; answer "v1; v2" (spec "multihop")."""
    return build("2hop", haystack, length, seed, **kw)


BUILDERS = {"single": single, "multikey": multikey, "2hop": two_hop}


def build_training_example(
    task: str,
    haystack,
    tokenizer=None,
    rng=None,
    *,
    pairs: int = 1,
    answer_weight: float = 5.0,
    phrasings: str = "train",
    length: int | None = None,
    depth: float | None = None,
    needle_margin: int | None = None,
    split_frac: float = 0.0,
) -> dict:
    """A training example as a dict for drt_core.train.loop: {"ids", "labels", "weights" (np arrays of
    `length` = len(haystack) by default), "answers", "answer_spans", "prompt_ends", "pairs", "task"}.

    `pairs` is a maximum: "single" always has 1 question (several passkeys would make "the
    passkey" ambiguous), and for the others it is lowered until the questions fit in `length`.
    `tokenizer`: None (the shipped one), a directory, or an HF tokenizer loaded from a directory.
    """
    rng = rng_of(rng)
    n = len(haystack) if length is None else int(length)
    n_pairs = 1 if task == "single" else max(1, int(pairs))
    tok_path = tokenizer_path_of(tokenizer)
    while True:
        state = rng.getstate()
        try:
            ex = build(task, haystack, n, rng, n_pairs=n_pairs, answer_weight=answer_weight,
                       phrasings=phrasings, depth=depth, tokenizer_path=tok_path, needle_margin=needle_margin,
                       split_frac=split_frac)
            break
        except TooShort:
            if n_pairs == 1:
                raise
            rng.setstate(state)
            n_pairs -= 1
    return {
        "task": task,
        "ids": ex.ids,
        "labels": ex.labels,
        "weights": ex.weights,
        "answers": ex.answers,
        "answer_spans": ex.answer_spans,
        "prompt_ends": ex.prompt_ends,
        "pairs": n_pairs,
        "example": ex,
    }


# ------------------------------------------------------------------------------------------------
# retrieval targets (teacher-forced retrieval during fine-tuning, and retrieval-hit evaluation)
# ------------------------------------------------------------------------------------------------


def _find(seq: np.ndarray, sub: Sequence[int]) -> int:
    n, m = len(seq), len(sub)
    for i in range(n - m + 1):
        if all(int(seq[i + j]) == int(sub[j]) for j in range(m)):
            return i
    return -1


def retrieval_targets(ex: NIAHExample, tokenizer_path=None,
                      needle_start: bool = False) -> list[tuple[int, list[int]]]:
    """For each question: (retrieval row, [chunk holding the answer value, per hop]).

    The row is the one that serves the answer chunk: the prompt's last token p sits on the first
    slot of chunk p // 63, which row p // 63 - 1 serves. The target chunk is where the first token
    of the needed value sits inside its needle (single/multikey: the answer; 2hop: hop 1's "b" in
    "a -> b", then hop 2's "c" in "b -> c").

    needle_start (single/multikey): when the needle begins in an earlier chunk than its value
    (written across a chunk boundary: "... the passkey is" | " 894772."), that chunk is a second
    target: it holds the words a question matches, and the copy head reads on from it into the
    value's chunk (config copy_span). The retrieval loss asks for either."""
    ct = ex.meta.get("chunk_tokens", CHUNK_TOKENS)
    enc = encoder(tokenizer_dir(tokenizer_path))
    real = ex.meta["real_needles"]
    out = []
    for k, p in enumerate(ex.prompt_ends):
        if ex.task == "2hop":
            needles = [real[2 * k], real[2 * k + 1]]
            values = twohop_values(ex.answers[k])
        else:
            needles, values = [real[k]], [ex.answers[k]]
        chunks = []
        for ni, v in zip(needles, values):
            pos, _ = _value_in_needle(ex, ni, v, enc)
            chunks.append((pos if pos >= 0 else ex.needle_spans[ni][1] - 1) // ct)
        start = ex.needle_spans[needles[0]][0] // ct
        if needle_start and ex.task != "2hop" and start != chunks[0]:
            chunks.append(start)
        out.append((p // ct - 1, chunks))
    return out


def _value_in_needle(ex: NIAHExample, ni: int, value: str, enc) -> tuple[int, int]:
    """Where `value` (as written after a space) starts in needle ni, in positions of ex.ids (-1 if
    it is not there), and its length in tokens."""
    v = enc(" " + value)
    s, e = ex.needle_spans[ni]
    off = _find(ex.ids[s:e], v)
    return (s + off if off >= 0 else -1), len(v)


def value_span(ex: NIAHExample, k: int = 0, tokenizer_path=None) -> tuple[int, int]:
    """[start, end) of question k's answer value inside its needle (single / multikey), in
    positions of ex.ids; a value with start // 63 != (end - 1) // 63 is written across a chunk
    boundary. Its start's chunk is retrieval_targets' target."""
    if ex.task == "2hop":
        raise ValueError("value_span: single and multikey only (a 2-hop answer has two values)")
    pos, n = _value_in_needle(ex, ex.meta["real_needles"][k], ex.answers[k],
                              encoder(tokenizer_dir(tokenizer_path)))
    if pos < 0:
        raise ValueError(f"value {ex.answers[k]!r} not found in its needle")
    return pos, pos + n


def splice_passages(ex: NIAHExample, ids, passages, k: int, rng,
                    chunk_tokens: int = CHUNK_TOKENS) -> list[int]:
    """Hard negatives (`train --hard-negatives`): write up to k passages (rows of `passages`, each
    P >= chunk_tokens tokens: a chunk and the tokens before it that its key reads) into the
    haystack of example ex's ids (a copy of ex.ids, changed in place), each ending at a chunk's end,
    so that the chunk holds a mined hub and its key reads the hub's own context. No needle's
    chunks, and nothing from the first question on, is touched: the chunks written and the ones
    whose tail they overwrite are all plain haystack. Returns the chunks that now hold a passage."""
    S1, P = chunk_tokens, passages.shape[1]
    back = -(-(P - S1) // S1)  # chunks before c whose tail a passage overwrites
    C = len(ids) // S1
    kept = {p // S1 for a, b in ex.needle_spans for p in range(a, b)}
    first_q = ex.n_context // S1
    free = [c for c in range(back, min(C, first_q)) if not any(c - j in kept for j in range(back + 1))]
    rng.shuffle(free)
    done, used = [], set()
    for c in free:
        if len(done) >= k:
            break
        if any(c - j in used or c + j in used for j in range(back + 1)):
            continue  # one passage per run of chunks: a passage's context is not another's chunk
        row = passages[rng.randrange(len(passages))]
        ids[(c + 1) * S1 - P:(c + 1) * S1] = row
        done.append(c)
        used.add(c)
    return sorted(done)
