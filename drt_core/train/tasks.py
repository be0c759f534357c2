"""Seeded needle-in-a-haystack (NIAH) builders over real haystack tokens (spec §5.3).

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
from pathlib import Path
from typing import Sequence

import numpy as np

from ..prompts import CHUNK_TOKENS, STOP_TEXT, answer_text, layout_prompt, qa_suffix
from ..tokenizer import EOT_ID, PAD_ID

TASK_NAMES = ("single", "multikey", "2hop")


class TooShort(ValueError):
    """The requested length cannot hold the haystack margin, the needles and the questions."""

N_TRAIN_PHRASINGS = 6  # first 6 of each family are for training, the rest are held out
IGNORE = -100

# ------------------------------------------------------------------------------------------------
# phrasing families (8 each: [:6] train, [6:] held out)
# ------------------------------------------------------------------------------------------------

SINGLE_NEEDLES = (
    "The passkey is {value}.",
    "Remember this: the passkey is {value}.",
    "The secret passkey is {value}. Keep it safe.",
    "Note that the passkey is {value}.",
    "Here is the passkey: {value}.",
    "Write this down, the passkey is {value}.",
    # held out
    "Important: the passkey to remember is {value}.",
    "For the record, the pass key reads {value}.",
)
SINGLE_QUESTIONS = (
    "What is the passkey?",
    "What is the passkey mentioned in the text?",
    "Which passkey was given in the text?",
    "Recall the passkey. What is it?",
    "What number is the secret passkey?",
    "Tell me the passkey.",
    # held out
    "What passkey should be remembered?",
    "Which number did the text give as the pass key?",
)
MULTIKEY_NEEDLES = (
    "One of the special magic numbers for {key} is {value}.",
    "The magic number for {key} is {value}.",
    "Remember: {key} has the number {value}.",
    "The code assigned to {key} is {value}.",
    "The special number of {key} is {value}.",
    "For {key}, the magic number is {value}.",
    # held out
    "Keep in mind that {key} goes with the number {value}.",
    "The number belonging to {key} is {value}.",
)
MULTIKEY_QUESTIONS = (
    "What is the special magic number for {key}?",
    "What is the magic number for {key}?",
    "Which number does {key} have?",
    "What code is assigned to {key}?",
    "What is the special number of {key}?",
    "For {key}, what is the magic number?",
    # held out
    "Which number goes with {key}?",
    "What number belongs to {key}?",
)
TWOHOP_NEEDLES = (
    "The path goes from {a} to {b}.",
    "{a} leads to {b}.",
    "From {a}, the next stop is {b}.",
    "Code {a} points to code {b}.",
    "After {a} comes {b}.",
    "The successor of {a} is {b}.",
    # held out
    "{a} is linked to {b}.",
    "Step: {a} then {b}.",
)
TWOHOP_QUESTIONS = (
    "What are the next two stops on the path from {start}?",
    "Starting from {start}, which two codes follow?",
    "Follow the path from {start} for two steps. Which codes do you reach?",
    "What comes after {start}, and after that?",
    "From {start}, what are the next two codes in the chain?",
    "Which two codes come after {start}, in order?",
    # held out
    "Trace two hops from {start}. What are they?",
    "Name the two codes that follow {start}.",
)

# The 2-hop answer's separator. It must not be what a needle writes right after its first code: the
# copy head's exact suffix match would then continue that needle ("From v1," -> " the") instead of
# starting v2 (the 2-hop misses with ", ": docs/history/2026-11-29-to-12-01-model-rounds.md).
TWOHOP_SEP = ";"


def twohop_answer(v1: str, v2: str) -> str:
    """The answer text of a 2-hop question: "v1; v2"."""
    return f"{v1}{TWOHOP_SEP} {v2}"


def twohop_values(answer: str) -> list[str]:
    """twohop_answer's inverse: [v1, v2]."""
    return [v.strip() for v in answer.split(TWOHOP_SEP)]


TEMPLATES = {
    "single": (SINGLE_NEEDLES, SINGLE_QUESTIONS),
    "multikey": (MULTIKEY_NEEDLES, MULTIKEY_QUESTIONS),
    "2hop": (TWOHOP_NEEDLES, TWOHOP_QUESTIONS),
}

KEY_ADJECTIVES = (
    "amber", "silver", "crimson", "quiet", "golden", "hollow", "frozen", "velvet", "copper", "misty",
    "scarlet", "ivory", "lunar", "rustic", "hidden", "bright", "northern", "ancient", "wild", "pale",
)
KEY_NOUNS = (
    "falcon", "harbor", "lantern", "meadow", "castle", "river", "compass", "orchard", "violin", "glacier",
    "beacon", "forest", "anchor", "comet", "garden", "bridge", "tower", "island", "mirror", "canyon",
)


def phrasing_templates(task: str, phrasings: str = "train") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(needle templates, question templates) of a task for "train", "heldout" or "all"."""
    if task not in TEMPLATES:
        raise ValueError(f"unknown task {task!r}; expected one of {TASK_NAMES}")
    needles, questions = TEMPLATES[task]
    if phrasings == "train":
        return needles[:N_TRAIN_PHRASINGS], questions[:N_TRAIN_PHRASINGS]
    if phrasings == "heldout":
        return needles[N_TRAIN_PHRASINGS:], questions[N_TRAIN_PHRASINGS:]
    if phrasings == "all":
        return needles, questions
    raise ValueError(f"phrasings must be 'train', 'heldout' or 'all', got {phrasings!r}")


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


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def _rng(seed_or_rng) -> random.Random:
    if isinstance(seed_or_rng, random.Random):
        return seed_or_rng
    if seed_or_rng is None:
        raise ValueError("pass a seed or a random.Random (the global RNG is never used)")
    return random.Random(seed_or_rng)


def _resolve_tok(tokenizer_path) -> str:
    from ..tokenizer import _resolve

    return str(_resolve(tokenizer_path))


@lru_cache(maxsize=4)
def _boundary_ids(tok_path: str) -> tuple[frozenset[int], frozenset[int]]:
    """(ids whose text ends a sentence, ids whose text starts with whitespace). A needle (" The
    passkey is 84613.") reads naturally between the two: "... end. The passkey is 84613. Next ..."."""
    from ..tokenizer import backend, decode_pieces

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


def _encode(tok_path: str):
    from ..tokenizer import encode

    return lambda text: encode(text, tok_path)


def _values(rng: random.Random, n: int, digits: tuple[int, int]) -> list[str]:
    lo, hi = digits
    if not 1 <= lo <= hi:
        raise ValueError(f"bad digits range {digits}")
    out: list[str] = []
    seen = set()
    while len(out) < n:
        d = rng.randint(lo, hi)
        v = str(rng.randint(10 ** (d - 1), 10**d - 1))
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _keys(rng: random.Random, n: int) -> list[str]:
    pool = [f"{a}-{b}" for a in KEY_ADJECTIVES for b in KEY_NOUNS]
    if n > len(pool):
        raise ValueError(f"at most {len(pool)} keys")
    return rng.sample(pool, n)


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
# facts per task: needle texts + (question, answer) pairs
# ------------------------------------------------------------------------------------------------


def _facts_single(rng, n_pairs, n_distractors, digits, ntpl, qtpl):
    if n_pairs != 1:
        raise ValueError("single: one passkey per sequence (use multikey for several questions)")
    (v,) = _values(rng, 1, digits)
    needles = [rng.choice(ntpl).format(value=v)]
    return needles, [0], [(rng.choice(qtpl), v)]


def _facts_multikey(rng, n_pairs, n_distractors, digits, ntpl, qtpl):
    n_distractors = 5 if n_distractors is None else n_distractors
    n = n_pairs + n_distractors
    keys, vals = _keys(rng, n), _values(rng, n, digits)
    needles = [rng.choice(ntpl).format(key=k, value=v) for k, v in zip(keys, vals)]
    qas = [(rng.choice(qtpl).format(key=keys[i]), vals[i]) for i in range(n_pairs)]
    return needles, list(range(n_pairs)), qas


def _facts_2hop(rng, n_pairs, n_distractors, digits, ntpl, qtpl):
    n_distractors = 1 if n_distractors is None else n_distractors
    n_chains = n_pairs + n_distractors
    vals = _values(rng, 3 * n_chains, digits)
    chains = [vals[3 * c : 3 * c + 3] for c in range(n_chains)]
    needles, real = [], []
    for c, (a, b, d) in enumerate(chains):
        for x, y in ((a, b), (b, d)):
            if c < n_pairs:
                real.append(len(needles))
            needles.append(rng.choice(ntpl).format(a=x, b=y))
    qas = [(rng.choice(qtpl).format(start=a), twohop_answer(b, d)) for a, b, d in chains[:n_pairs]]
    return needles, real, qas


FACTS = {"single": _facts_single, "multikey": _facts_multikey, "2hop": _facts_2hop}


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
    rng = _rng(seed)
    tok_path = _resolve_tok(tokenizer_path)
    enc = _encode(tok_path)
    ntpl, qtpl = phrasing_templates(task, phrasings)
    needle_texts, real_idx, qas = FACTS[task](rng, n_pairs, n_distractors, digits, ntpl, qtpl)

    needle_ids = [enc(" " + t) for t in needle_texts]
    stop_ids = enc(STOP_TEXT)
    tails = [(enc(qa_suffix(q)), enc(answer_text(a)), stop_ids) for q, a in qas]
    n_needles = sum(len(x) for x in needle_ids)

    def tail_len(n_ctx: int) -> int:
        pos = n_ctx
        for p_ids, a_ids, s_ids in tails:
            pos += len(layout_prompt(pos, p_ids, chunk_tokens=chunk_tokens)) + len(a_ids) + len(s_ids)
        return pos - n_ctx

    # largest haystack such that haystack + needles + laid-out questions fit in `length`
    tail_min = sum(len(p) + len(a) + len(s) for p, a, s in tails)
    margin = 2 * chunk_tokens if needle_margin is None else int(needle_margin)
    min_hay = margin + 1

    def fits(h: int) -> bool:
        return h + n_needles + tail_len(h + n_needles) <= length

    hay_len = max(0, length - n_needles - tail_min - (chunk_tokens - 1) * len(tails))
    while hay_len > 0 and not fits(hay_len):
        hay_len -= 1
    while fits(hay_len + 1):
        hay_len += 1
    if hay_len < min_hay or not fits(hay_len):
        raise TooShort(
            f"length {length} too short for task {task} with {n_pairs} question(s) "
            f"(needs about {length - hay_len + min_hay})"
        )

    hay = _haystack_window(haystack, hay_len, rng)
    boundary = _boundary_ids(tok_path)
    max_pos = hay_len - margin  # needles end >= `margin` tokens before the questions
    positions = []
    for i in range(len(needle_texts)):
        if i == real_idx[0] and depth is not None:
            target = int(round(float(depth) * max_pos))
        else:
            target = rng.randint(0, max_pos)
        positions.append(_snap(target, hay, boundary, 0, max_pos))
    order = sorted(range(len(needle_texts)), key=lambda i: (positions[i], i))
    split = [split_frac > 0 and rng.random() < split_frac for _ in needle_texts]

    parts: list[np.ndarray] = []
    needle_spans: list[tuple[int, int] | None] = [None] * len(needle_texts)
    cur, out_len = 0, 0
    for i in order:
        p = max(positions[i], cur)  # a needle moved by split_frac may pass the next one's position
        if split[i]:  # value at slot < SPLIT_SLOTS of its chunk: out position out_len + (q - cur) + offset
            off = _value_offset(needle_ids[i], needle_texts[i], enc)
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
    n_context = out_len

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

    ids = np.concatenate(parts)
    weights = np.concatenate(w_parts)
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
        needle_spans=[s for s in needle_spans if s is not None],
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


def _tokenizer_path(tokenizer):
    """None, a path, or an HF tokenizer loaded from a directory -> a tokenizer directory (or None)."""
    if tokenizer is None or isinstance(tokenizer, (str, Path)):
        return tokenizer
    p = getattr(tokenizer, "name_or_path", None)
    return p or None


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
    rng = _rng(rng)
    n = len(haystack) if length is None else int(length)
    n_pairs = 1 if task == "single" else max(1, int(pairs))
    tok_path = _tokenizer_path(tokenizer)
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


def retrieval_targets(ex: NIAHExample, tokenizer_path=None, needle_start: bool = False) -> list[tuple[int, list[int]]]:
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
    enc = _encode(_resolve_tok(tokenizer_path))
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
    pos, n = _value_in_needle(ex, ex.meta["real_needles"][k], ex.answers[k], _encode(_resolve_tok(tokenizer_path)))
    if pos < 0:
        raise ValueError(f"value {ex.answers[k]!r} not found in its needle")
    return pos, pos + n


# ------------------------------------------------------------------------------------------------
# copy warm-up: passages repeated beyond the self-attention window
# ------------------------------------------------------------------------------------------------


def build_repeat(
    tokens,
    length: int,
    rng,
    *,
    n_passages: int = 2,
    span_chunks: int = 3,
    gap: int = 320,
    copy_weight: float = 5.0,
    chunk_tokens: int = CHUNK_TOKENS,
) -> dict:
    """A copy example: text whose passages come back later, farther than the self-attention window.

    ``tokens`` (>= `length` real tokens of running text) is laid out as
    ``t[:o + P + g] + t[o : o + P] + t[o + P + g :]`` cut to `length`: P = n_passages *
    span_chunks * 63 tokens (fewer if `length` is short) starting at a random offset o < 63 (so
    copies do not line up with chunk boundaries), a gap g in [gap, gap + 63) of ordinary text,
    then the same text again.
    Every copied token is predictable from a chunk that only retrieval can reach; ``forced`` [C, 2]
    names, for each retrieval row, the (one or two) source chunks of the chunk it serves (-1 =
    none), i.e. the teacher-forced selection of a copy-path warm-up (objective.force_selection).
    Weights: `copy_weight` on copied tokens, 1 elsewhere.
    """
    rng = _rng(rng)
    t = np.asarray(tokens, dtype=np.int64)
    # the copied text: n_passages * span_chunks chunks, less when `length` is short
    P = min(span_chunks * chunk_tokens * n_passages, (length - gap - 2 * chunk_tokens) // 2)
    if P < chunk_tokens:
        raise TooShort(f"length {length} cannot hold a copied chunk and a {gap}-token gap")
    o = rng.randrange(chunk_tokens)
    g = gap + rng.randrange(chunk_tokens)
    start = o + P + g  # where the copy begins
    if start + P > length or t.size < length:
        raise TooShort(f"length {length} cannot hold {n_passages} passages of {span_chunks} chunks and a {gap}-token gap")
    ids = np.concatenate([t[:start], t[o : o + P], t[start:]])[:length]
    weights = np.ones(length, np.float32)
    weights[start : start + P] = copy_weight
    C = -(-length // chunk_tokens)
    forced = np.full((C, 2), -1, np.int64)
    shift = start - o
    for c in range(start // chunk_tokens, min(C, -(-(start + P) // chunk_tokens))):
        lo, hi = max(c * chunk_tokens, start), min((c + 1) * chunk_tokens, start + P)
        if c >= 1 and lo < hi:
            src = sorted({(lo - shift) // chunk_tokens, (hi - 1 - shift) // chunk_tokens})
            forced[c - 1, : len(src)] = src
    return {"task": "repeat", "ids": ids, "labels": ids.copy(), "weights": weights, "forced": forced,
            "copy_span": (start, start + P), "source_span": (o, o + P)}


def splice_passages(ex: NIAHExample, ids, passages, k: int, rng, chunk_tokens: int = CHUNK_TOKENS) -> list[int]:
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


# ------------------------------------------------------------------------------------------------
# citation targets: a chunk that cites a statement (\ref{X}) should retrieve the chunk stating it
# ------------------------------------------------------------------------------------------------

REF_RE = re.compile(r"\\ref\{([^}]+)\}")
LABEL_RE = re.compile(r"\\label\{([^}]+)\}")
STATEMENT_KINDS = ("lemma", "proposition", "theorem", "definition", "remark", "example", "exercise",
                   "situation", "equation")


def chunk_of_char(starts: Sequence[int], char_pos: int, chunk_tokens: int = CHUNK_TOKENS) -> int:
    """The chunk holding character `char_pos`, where `starts[i]` is the character offset at which
    token i begins."""
    import bisect

    return max(0, bisect.bisect_right(starts, char_pos) - 1) // chunk_tokens


def citation_pairs(text: str, starts: Sequence[int], chunk_tokens: int = CHUNK_TOKENS) -> list[tuple[int, int, str]]:
    """(citing chunk, stating chunk, label) for every \\ref{X} of a statement whose \\label{X} is in
    an EARLIER chunk. `starts[i]` is the character offset where token i begins in `text`."""
    labels = {}
    for m in LABEL_RE.finditer(text):
        name = m.group(1)
        if name.split("-", 1)[0] in STATEMENT_KINDS and name not in labels:
            labels[name] = chunk_of_char(starts, m.start(), chunk_tokens)
    pairs = set()
    for m in REF_RE.finditer(text):
        name = m.group(1)
        if name in labels:
            c, t = chunk_of_char(starts, m.start(), chunk_tokens), labels[name]
            if t < c:
                pairs.add((c, t, name))
    return sorted(pairs)


def citation_targets(ids: Sequence[int], tokenizer_path=None, chunk_tokens: int = CHUNK_TOKENS) -> list[tuple[int, list[int]]]:
    """Retrieval targets of a window of LaTeX tokens: (row, [stating chunks]) for each citing chunk
    (row = the citing chunk: its landmark has read the \\ref). At most 2 targets per row."""
    from ..tokenizer import decode_pieces

    pieces = decode_pieces(ids, tokenizer_path)
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(p)
    by_row: dict[int, list[int]] = {}
    for c, t, _ in citation_pairs("".join(pieces), starts, chunk_tokens):
        if t not in by_row.setdefault(c, []) and len(by_row[c]) < 2:
            by_row[c].append(t)
    return sorted(by_row.items())


def statement_label_words(text: str) -> list[str]:
    """The words of the statements' label names in `text` ("lemma-flat-base-change" -> "flat",
    "base", "change"), sorted and without repeats: the vocabulary rename_labels draws from."""
    words = set()
    for m in LABEL_RE.finditer(text):
        kind, _, rest = m.group(1).partition("-")
        if kind in STATEMENT_KINDS:
            words.update(w for w in rest.split("-") if w.isalpha())
    return sorted(words)


def rename_labels(ids: Sequence[int], rng, words: Sequence[str], tokenizer_path=None) -> np.ndarray:
    """A citation row whose statements' label names are replaced, consistently in each \\label and
    \\ref of the window, by random names of the same kind and word count from `words` (`train
    --cite-rename`, our extension). A scorer can then find the cited chunk only by matching the
    names it reads in the \\ref with those of the \\label, not by the topic both passages share. The
    window is split at EOT ids (documents), each part decoded, renamed and encoded again; the
    result is cut or padded (PAD_ID) to len(ids)."""
    from ..tokenizer import decode, encode

    rng = _rng(rng)
    ids = np.asarray(ids, dtype=np.int64)
    n, out, words = len(ids), [], list(words)
    cuts = [-1] + np.flatnonzero(ids == EOT_ID).tolist() + [n]
    for a, b in zip(cuts, cuts[1:]):
        text = decode(ids[a + 1:b].tolist(), tokenizer_path)
        names = {m.group(1) for r in (LABEL_RE, REF_RE) for m in r.finditer(text)
                 if m.group(1).partition("-")[0] in STATEMENT_KINDS}
        new, taken = {}, set(names)  # no new name is an old one (it would join two statements)
        for name in sorted(names):
            kind, _, rest = name.partition("-")
            size = min(4, max(1, len(rest.split("-"))))
            while True:
                cand = kind + "-" + "-".join(rng.sample(words, min(size, len(words))))
                if cand not in taken:
                    break
            new[name] = cand
            taken.add(cand)
        text = re.sub(r"\\(label|ref)\{([^}]+)\}",
                      lambda m: "\\" + m.group(1) + "{" + new.get(m.group(2), m.group(2)) + "}", text)
        out += encode(text, tokenizer_path)
        if b < n:
            out.append(EOT_ID)
    out = out[:n] + [PAD_ID] * max(0, n - len(out))
    return np.asarray(out, dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# reading-comprehension rows: a window of a real document, then a mined question about it
# ------------------------------------------------------------------------------------------------


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
    rng = _rng(rng)
    enc = encode or _encode(_resolve_tok(None))
    p_ids = enc(qa_suffix(item["question"]))
    # the answer as generated: its whitespace runs collapsed ("target"), since a newline ends an answer
    a_ids = enc(answer_text(item.get("target") or " ".join(item["answer"].split())))[: 2 * chunk_tokens] + enc(STOP_TEXT)
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
                              np.ones(len(p_ids), np.float32), np.full(len(a_ids), answer_weight, np.float32)])
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
        self.items = [json.loads(line) for line in open(d / f"{split}.jsonl", encoding="utf-8") if line.strip()]
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
