"""The mined item (`QAItem`: a verbatim answer span and its gold passage), the miners' limits, and
the question templates: every type has "train" and "heldout" phrasings (`TEMPLATES`, disjoint),
drawn by `render`; `answer_target`, what the model is taught to generate for an answer."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

MAX_PER_TYPE = 200  # items per question type per document (drawn with rng, spread through the document)
PASSAGE_MIN, PASSAGE_MAX = 100, 400  # gold evidence passage length in characters
ANSWER_MAX_CHARS = 300

QTYPES = ("definition", "statement", "character", "speaker", "number", "place", "find")


@dataclass
class QAItem:
    """One mined question. Offsets are characters of the document text: `text[ans_start:ans_end]
    == answer`, and the gold passage [passage_start, passage_end) contains the answer."""

    question: str
    answer: str
    qtype: str
    template: str
    ans_start: int
    ans_end: int
    passage_start: int
    passage_end: int


# Slots: every type has slots that are always filled (e.g. {term}); some templates use optional
# slots ({a_term}, {subject}, {noun}, {gist}) and are only drawn when the miner could fill them.
TEMPLATES: dict[str, dict[str, list[str]]] = {
    "definition": {
        "train": [
            "Define {term}.",
            "What is the definition of {term}?",
            "What does {term} mean?",
            "How is {term} defined?",
            "What is meant by the term {term}?",
            "Explain the notion of {term}.",
            "What is {a_term}?",
            "What does it mean for {subject} to be {be_term}?",
            "When do we say that {subject} is {be_term}?",
        ],
        "heldout": [
            "Give the definition of {term}.",
            "What is the meaning of {term}?",
            "Tell me what {a_term} is.",
            "When is {subject} called {be_term}?",
        ],
    },
    "statement": {
        "train": [
            "State the {kind} about {topic}.",
            "What does the {kind} on {topic} say?",
            "What is the statement of the {kind} about {topic}?",
            "What does the {kind} about {topic} state?",
            "Recall the {kind} on {topic}.",
            "What is the {kind} concerning {topic}?",
        ],
        "heldout": [
            "Give the statement of the {kind} on {topic}.",
            "Tell me the {kind} regarding {topic}.",
            "Quote the {kind} on {topic}.",
        ],
    },
    "character": {
        "train": [
            "Who is {name}?",
            "Who is {name} in this text?",
            "Tell me who {name} is.",
            "Describe {name}.",
            "Who is the character {name}?",
            "What are we told about {name}?",
        ],
        "heldout": [
            "Can you tell me who {name} is?",
            "Identify {name}.",
            "Who exactly is {name}?",
        ],
    },
    "speaker": {
        "train": [
            'Who said "{quote}"?',
            'Who says "{quote}"?',
            'Which character says "{quote}"?',
            'Who speaks the words "{quote}"?',
            'Whose words are "{quote}"?',
        ],
        "heldout": [
            'Who is the speaker of "{quote}"?',
            '"{quote}": who said that?',
            'Which person utters "{quote}"?',
        ],
    },
    "number": {
        "train": [
            "In the passage about {topic}, what {what} is mentioned?",
            "What {what} is given in the passage about {topic}?",
            "According to the text about {topic}, what {what} is stated?",
            "Which {what} does the passage about {topic} mention?",
            "In the part about {topic}, what is the {what}?",
            "In the passage about {topic}, how many {noun} are mentioned?",
            "How many {noun} does the text about {topic} speak of?",
        ],
        "heldout": [
            "What {what} appears in the passage on {topic}?",
            "The text about {topic} mentions a {what}: which one?",
            "In the lines about {topic}, how many {noun} are there?",
        ],
    },
    "place": {
        "train": [
            "In the passage about {topic}, what place is mentioned?",
            "Which place is named in the passage about {topic}?",
            "What place does the passage about {topic} refer to?",
            "Name the place mentioned in the text about {topic}.",
            "In the part about {topic}, which place is it?",
        ],
        "heldout": [
            "Which location appears in the passage on {topic}?",
            "What is the place in the lines about {topic}?",
        ],
    },
    "find": {
        "train": [
            'Find the passage that says "{quote}".',
            'Find the passage that says "{quote}" and continue it.',
            'How does the sentence beginning "{quote}" continue?',
            'Complete the sentence from the text: "{quote}"',
            'What comes after "{quote}" in the text?',
            "Find the passage about {keywords}.",
            "Find the passage with the words {keywords}.",
            "Find the passage that says {gist}.",
            "Locate where the text says {gist}.",
        ],
        "heldout": [
            'Look up the sentence starting "{quote}" and give the rest.',
            'Where does the text say "{quote}"? Quote what follows.',
            "Search the text for the part about {keywords} and quote it.",
            "Which passage says {gist}?",
        ],
    },
}

PHRASINGS = ("train", "heldout", "both")


def template_fields(template: str) -> frozenset[str]:
    """The slot names of a template ("Who is {name}?" -> {"name"})."""
    return frozenset(f for _, f, _, _ in string.Formatter().parse(template) if f)


def phrasing_of(qtype: str, template: str) -> str:
    """ "train" or "heldout": which phrasing set a template belongs to (the sets are disjoint)."""
    for which in ("train", "heldout"):
        if template in TEMPLATES[qtype][which]:
            return which
    raise KeyError(f"unknown {qtype} template {template!r}")


def render(
    qtype: str, slots: dict[str, str], rng: random.Random, phrasings: str = "train"
) -> tuple[str, str] | None:
    """(question, template): a template of `qtype` drawn with `rng` from the `phrasings` set
    ("train", "heldout" or "both": a fair coin picks the set) among those whose slots are filled."""
    if phrasings not in PHRASINGS:
        raise ValueError(f"phrasings must be one of {PHRASINGS}, got {phrasings!r}")
    which = phrasings if phrasings != "both" else rng.choice(("train", "heldout"))
    have = {k for k, v in slots.items() if v}
    usable = [t for t in TEMPLATES[qtype][which] if template_fields(t) <= have]
    if not usable:
        return None
    t = rng.choice(usable)
    return squash(t.format(**slots)), t


def answer_target(answer: str) -> str:
    """What the model is taught to generate for `answer`: whitespace runs (the text's line
    wrapping) collapsed to one space, since an answer ends at the first newline."""
    return " ".join(answer.split())


def squash(s: str) -> str:
    return " ".join(s.split())
