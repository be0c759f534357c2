"""What the needle tasks say: the phrasing families of needles and questions (8 each: the first 6
for training, the last 2 held out, `phrasing_templates`), the 2-hop answer's separator, the keys and
values, and the facts each task writes (`FACTS`: needle texts and (question, answer) pairs)."""

from __future__ import annotations

import random


TASK_NAMES = ("single", "multikey", "2hop")

N_TRAIN_PHRASINGS = 6  # first 6 of each family are for training, the rest are held out


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
