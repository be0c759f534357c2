"""Question/answer training data mined from the corpora's own structure (no hand labels, no downloads).

Command: ``python -m drt_core.train.mine --corpora ../shared/corpora --data data [--json]``

The model should learn to answer what readers ask of a long document: definitions and statements
(Stacks Project LaTeX), who a character is, who said something, facts stated in the text (sums,
years, counts, places) and "find the passage that says ...". Every item is a verbatim span of the
document (`text[ans_start:ans_end] == answer`) with a gold evidence passage of 100-400 characters
that contains it, so training can supervise both the answer and (optionally) the retrieval.

Miners (see docs/miners.md for the templates and real examples):

* `mine_stacks`: ``\\begin{definition}`` terms (``{\\it term}``, ``\\emph{term}``, ``\\textit{term}``),
  lemma/proposition/theorem statements named by their ``\\label``, slogans and partial quotes ("find").
* `mine_book`: characters (first descriptive mention), speakers (``"...," said X``), numbers
  (sums, years, durations, distances, counts), places (``in/at/from X``) and partial quotes ("find").
  Plays (``shakespeare/``) take characters from their "Persons represented" list and speakers from
  the ``HAMLET.`` speech headings.

Every question type has "train" and "heldout" phrasings (`TEMPLATES`, disjoint): training items use
the train phrasings, validation items draw from both and record which (`phrasing` in the jsonl), so
an evaluation can tell learning the task from learning the templates.

Answers keep the document's line wrapping (they are exact slices). The prompt format stops an answer
at a newline (prompts.STOP_TEXT), so the generation target is `answer_target(answer)`: the answer
with its whitespace runs collapsed to single spaces (written as "target" in the jsonl).

Output (`build_qa_data`)::

    OUT/qa/{split}.bin     the split's documents' token ids (uint16), each followed by <|endoftext|>
    OUT/qa/{split}.jsonl   one item per line, token spans relative to the document's start
    OUT/qa/meta.json       counts per split and type, seed, tokenizer fingerprint, timing
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import logging
import random
import re
import string
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

log = logging.getLogger("drt.mine")

MAX_PER_TYPE = 200  # items per question type per document (drawn with rng, spread through the document)
PASSAGE_MIN, PASSAGE_MAX = 100, 400  # gold evidence passage length in characters
ANSWER_MAX_CHARS = 300

QTYPES = ("definition", "statement", "character", "speaker", "number", "place", "find")

# --------------------------------------------------------------------------------------------
# the item and the question templates
# --------------------------------------------------------------------------------------------


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
    return _squash(t.format(**slots)), t


def answer_target(answer: str) -> str:
    """What the model is taught to generate for `answer`: whitespace runs (the text's line
    wrapping) collapsed to one space, since an answer ends at the first newline."""
    return " ".join(answer.split())


def _squash(s: str) -> str:
    return " ".join(s.split())


# --------------------------------------------------------------------------------------------
# shared helpers: sampling, words, caps, passages
# --------------------------------------------------------------------------------------------

STOPWORDS = frozenset(
    """a an the and or but nor so yet for of to in on at by with from into onto upon about above below
    over under after before between through during without within against among around across
    towards toward as than then that this these those there here where when while which who whom
    whose what why how if though although because since until unless whether i me my mine we us our
    you your he him his she her hers it its they them their is am are was were be been being have
    has had do does did shall should will would can could may might must not no yes all any some
    each every both either neither such own same other another much many more most few less very
    too also only just even ever never now still again once out up down off away back well one
    said say says let""".split()
)

_NAME_STOP = frozenset(
    """The A An And But Or Nor For So Yet If Then Than That This These Those There Here Where When
    While Which Who Whom Whose What Why How I Me My We Us Our You Your He Him His She Her It Its They
    Them Their Is Am Are Was Were Be Been Have Has Had Do Does Did Shall Should Will Would Can Could
    May Might Must Not No Yes All Any Some Each Every Both Such One Two Three Four Five Six Seven
    Eight Nine Ten Chapter Chapters Volume Book Part Section Letter Act Scene Canto Preface
    Contents Introduction Index Appendix Note Notes Footnote Mr Mrs Miss Ms Dr Sir Lady Lord Madam
    Madame Monsieur Mademoiselle Master Mistress Captain Colonel Major General King Queen Prince
    Princess Duke Duchess Count Countess Baron Father Mother Uncle Aunt Saint St God Lord Heaven
    Christ Jesus Providence Nature Fortune Oh Ah O Alas Well Now Why Yes Nay Aye Indeed Perhaps
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April June July
    August September October November December Christmas Easter English French German Italian
    Spanish Russian Latin Greek Roman Christian Christians Indian Indians American Americans
    Englishman Frenchman Sire Majesty Highness Excellency Honour Grace Don Dona Herr Frau Thou Thee
    Thy Thine Ye Tis Twas Let Come Go See Look Hear Good Dear Poor Old Young Little Great Upon
    With From After Before Without Into Through Project Gutenberg""".split()
)

_TITLES = (
    "Mr|Mrs|Miss|Ms|Dr|Sir|Lady|Lord|Captain|Colonel|Major|General|Madame|Mme|Mademoiselle|Mlle|Monsieur|"
    "Father|Mother|Aunt|Uncle|Prince|Princess|Count|Countess|Baron|Baroness|Professor|Mistress|Master|"
    "Doctor|King|Queen|Duke|Duchess|Don|Herr|Frau|Signor|Signora|Squire|Judge|Brother|Sister"
)

_WORD = re.compile(r"\S+")
_ALPHA = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def spread_sample(cands: list, k: int, rng: random.Random, pos: Callable = lambda c: c) -> list:
    """At most `k` of `cands`, spread through the document: sorted by position, cut into k equal
    runs, one drawn at random from each. Returned in position order."""
    cands = sorted(cands, key=pos)
    if len(cands) <= k:
        return cands
    n = len(cands)
    return [cands[rng.randrange(i * n // k, (i + 1) * n // k)] for i in range(k)]


def cap_end(text: str, s: int, e: int, max_words: int, max_chars: int = ANSWER_MAX_CHARS) -> int:
    """End offset of [s, e) cut after at most `max_words` words and `max_chars` characters, at a
    word end (`text` may be a masked copy in which a math span is one "word"), trailing , ; : dropped."""
    end = s
    for i, m in enumerate(_WORD.finditer(text, s, e)):
        if i >= max_words or m.end() - s > max_chars:
            break
        end = m.end()
    while end > s and text[end - 1] in ",;:":
        end -= 1
    return end


def strip_span(text: str, s: int, e: int) -> tuple[int, int]:
    """[s, e) without leading/trailing whitespace."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def fit_passage(
    text: str, lo: int, hi: int, a: int, b: int, sents: tuple[Sequence[int], Sequence[int]] | None = None
) -> tuple[int, int] | None:
    """A passage of PASSAGE_MIN..PASSAGE_MAX characters containing the answer [a, b).

    Starts from [lo, hi) (the answer's sentence(s), or an environment's start), grows it by whole
    sentences (`sents`: the sorted sentence starts and ends) while it is too short, else by
    characters to a word end, and cuts it around the answer if too long. None if the answer
    itself is longer than PASSAGE_MAX."""
    if b - a > PASSAGE_MAX:
        return None
    n = len(text)
    lo, hi = strip_span(text, min(lo, a), max(hi, b))
    if hi - lo < PASSAGE_MIN and sents:
        starts, ends = sents
        i = bisect.bisect_right(ends, hi)
        while hi - lo < PASSAGE_MIN and i < len(ends) and ends[i] - lo <= PASSAGE_MAX:
            hi, i = ends[i], i + 1
        j = bisect.bisect_left(starts, lo) - 1
        while hi - lo < PASSAGE_MIN and j >= 0 and hi - starts[j] <= PASSAGE_MAX:
            lo, j = starts[j], j - 1
    if hi - lo < PASSAGE_MIN:  # by characters: forward to a word end, then back to a word start
        hi = max(hi, min(n, lo + PASSAGE_MIN))
        while hi < n and hi - lo < PASSAGE_MAX and (text[hi - 1].isspace() or not text[hi].isspace()):
            hi += 1
        hi = strip_span(text, lo, hi)[1]
        lo = min(lo, max(0, hi - PASSAGE_MIN))
        while lo > 0 and hi - lo < PASSAGE_MAX and (text[lo].isspace() or not text[lo - 1].isspace()):
            lo -= 1
    if hi - lo > PASSAGE_MAX:  # keep the answer, cut the far sides at word boundaries
        lo = max(lo, b - PASSAGE_MAX)
        while lo < a and lo > 0 and not text[lo - 1].isspace():
            lo += 1
        hi = min(hi, lo + PASSAGE_MAX)
        while hi > b and hi < n and not text[hi].isspace():
            hi -= 1
    lo, hi = strip_span(text, lo, hi)
    if not (lo <= a and b <= hi) or hi - lo > PASSAGE_MAX:
        return None
    return lo, hi


def _topic_words(text: str, s: int, e: int, skip: tuple[int, int], freq: Counter, k: int = 4) -> str:
    """Up to `k` content words of text[s:e] outside `skip` (the answer), the rarest in the document
    first, given in sentence order: the "about {topic}" of number and place questions."""
    words = []
    for m in _ALPHA.finditer(text, s, e):
        if skip[0] <= m.start() < skip[1] or m.end() - m.start() < 3:
            continue
        w = m.group()
        lw = w.lower()
        if "'" in w or "’" in w or lw in STOPWORDS or lw in _NUM_WORDS or w in _NAME_STOP:
            continue
        words.append((freq.get(lw, 0), m.start(), w))
    seen, pick = set(), []
    for _, p, w in sorted(words):
        if w.lower() not in seen:
            seen.add(w.lower())
            pick.append((p, w))
        if len(pick) >= k:
            break
    if len(pick) < 3:
        return ""
    return " ".join(w for _, w in sorted(pick))


def _keywords(quote: str) -> str:
    """A light paraphrase of a quote: its content words (function words and punctuation dropped)."""
    words = [w.strip(string.punctuation + "“”‘’_") for w in quote.split()]
    words = [w for w in words if w and w.lower() not in STOPWORDS]
    return " ".join(words) if len(words) >= 3 else ""


def _unique(text: str, s: int, e: int) -> bool:
    """Whether text[s:e] occurs exactly once in `text` (a quote must point at one place)."""
    piece = text[s:e]
    return text.find(piece) == s and text.find(piece, s + 1) < 0


def _make(text, rng, phrasings, qtype, slots, a, b, passage) -> QAItem | None:
    """Render a question and assemble the item, or None (no usable template / passage)."""
    if passage is None or b <= a:
        return None
    r = render(qtype, slots, rng, phrasings)
    if r is None:
        return None
    q, t = r
    return QAItem(q, text[a:b], qtype, t, a, b, passage[0], passage[1])


def _find_item(text, rng, phrasings, s, e, sents=None, mask=None, keywords: bool = True) -> QAItem | None:
    """ "Find" item from the sentence [s, e): its first 40-60% of words are quoted (or, as a light
    paraphrase, 30% of the time, only their content words), the answer is the rest of the sentence."""
    src = mask if mask is not None else text
    words = list(_WORD.finditer(src, s, e))
    n = len(words)
    if n < 8:
        return None
    k = max(3, min(n - 3, round(n * rng.uniform(0.4, 0.6))))
    q_end = words[k - 1].end()
    a, b = words[k].start(), words[-1].end()
    b = cap_end(src, a, b, 40)
    if b - a < 10 or not _unique(text, s, q_end):
        return None
    quote = _squash(text[s:q_end])
    kw = _keywords(quote) if keywords and rng.random() < 0.3 else ""
    slots = {"keywords": kw} if kw else {"quote": quote}
    return _make(text, rng, phrasings, "find", slots, a, b, fit_passage(text, s, e, a, b, sents))


# --------------------------------------------------------------------------------------------
# Stacks Project LaTeX
# --------------------------------------------------------------------------------------------

_ENV = re.compile(r"\\begin\{(definition|lemma|proposition|theorem)\}(.*?)\\end\{\1\}", re.S)
_LABEL = re.compile(r"\s*\\label\{([^}]*)\}")
_SLOGAN = re.compile(r"\s*\\begin\{slogan\}(.*?)\\end\{slogan\}", re.S)
_REFERENCE = re.compile(r"\s*\\begin\{reference\}.*?\\end\{reference\}", re.S)
_MATH = re.compile(
    r"\$\$.*?\$\$|\$(?:\\.|[^$\\])*\$|\\\[.*?\\\]|\\\(.*?\\\)"
    r"|\\begin\{(equation|align|eqnarray|multline|gather|displaymath)(\*?)\}.*?\\end\{\1\2\}",
    re.S,
)
_TERM = re.compile(r"\{\\(?:it|em|bf)\s+([^{}]{1,80})\}|\\(?:emph|textit)\{([^{}]{1,80})\}")
_TEX_SENT_END = re.compile(r"\.(?=\s+(?:[A-Z(]|\\[A-Za-z]))")
_SETUP = re.compile(
    r"(?:Let|Assume|Suppose|Given|Fix|Denote|Consider|Set|In Situation|Notation|We use|Here)\b"
)
_BACKREF = re.compile(r"(?:This|These|Such|It|In this case|In that case|Then|Here)\b")
_SAY_SUBJECT = re.compile(
    r"\b[Ww]e (?:say|call)(?: that)?\s+(.{1,60}?)\s+(?:is|are)\s+(?:(an?|the)\s+)?$", re.S
)


def mask_math(text: str) -> str:
    """`text` with every math span ($...$, \\[...\\], equation-like environments) replaced by NUL
    characters of the same length, so offsets stay valid while sentence splitting and word counts
    see each formula as one opaque word."""
    return _MATH.sub(lambda m: "\0" * (m.end() - m.start()), text)


_LIST_MARKUP = re.compile(
    r"(?:\s*(?:\\(?:begin|end)\{(?:enumerate|itemize|description)\}(?:\[[^\]]*\])?|\\item(?:\[[^\]]*\])?))+\s*"
)


def _tex_sentences(mask: str, s: int, e: int) -> list[tuple[int, int]]:
    """Sentence spans of the LaTeX body [s, e) (split on the masked text, so never inside math),
    each without the list markup it starts with (\\begin{enumerate}, \\item)."""
    out, start = [], s
    for m in _TEX_SENT_END.finditer(mask, s, e):
        out.append(_skip_list_markup(mask, start, m.end()))
        start = m.end()
    out.append(_skip_list_markup(mask, start, e))
    return [(a, b) for a, b in out if b > a]


def _skip_list_markup(mask: str, s: int, e: int) -> tuple[int, int]:
    s, e = strip_span(mask, s, e)
    m = _LIST_MARKUP.match(mask, s, e)
    return (m.end(), e) if m else (s, e)


def _prose_words(mask: str, s: int, e: int) -> int:
    """Words of ordinary prose in [s, e) (no math, no LaTeX command)."""
    return sum(1 for m in re.finditer(r"(?<![\\\w])[A-Za-z]{2,}\b", mask[s:e]))


def _mostly_math(mask: str, s: int, e: int) -> bool:
    """Too short or too formulaic to ask about in words."""
    if e - s <= 0:
        return True
    math = mask.count("\0", s, e)
    return math / (e - s) > 0.5 or _prose_words(mask, s, e) < 6


def _label_topic(label: str) -> str:
    """'lemma-flat-base-change' -> 'flat base change' (the label's words after its kind)."""
    words = label.split("-")
    if words and words[0] in ("lemma", "proposition", "theorem", "definition", "section"):
        words = words[1:]
    words = [w for w in words if w]
    if not words or all(w.isdigit() for w in words):
        return ""
    return " ".join(words)


@dataclass
class _Env:
    kind: str  # definition | lemma | proposition | theorem
    start: int  # offset of \begin{...}
    body: int  # offset of the statement text (after label, slogan, reference)
    end: int  # offset of \end{...}
    label: str
    slogan: tuple[int, int] | None


def _environments(text: str) -> list[_Env]:
    """The definition/lemma/proposition/theorem environments with their label and slogan."""
    envs = []
    for m in _ENV.finditer(text):
        pos, end = m.start(2), m.end(2)
        label, slogan = "", None
        while True:
            for rx in (_LABEL, _SLOGAN, _REFERENCE):
                mm = rx.match(text, pos, end)
                if mm:
                    if rx is _LABEL:
                        label = mm.group(1)
                    elif rx is _SLOGAN:
                        slogan = strip_span(text, mm.start(1), mm.end(1))
                    pos = mm.end()
                    break
            else:
                break
        body = strip_span(text, pos, end)[0]
        envs.append(_Env(m.group(1), m.start(), body, end, label, slogan))
    return envs


def _stacks_definitions(text, mask, env: _Env, rng, phrasings, seen: set) -> list[QAItem]:
    """Items for each emphasised term of a definition: the answer is the term's sentence (with the
    sentence before it when it starts "This/Such/It ..."), capped."""
    items = []
    sents = _tex_sentences(mask, env.body, env.end)
    for m in _TERM.finditer(text, env.body, env.end):
        raw = m.group(1) or m.group(2)
        term = _squash(raw)
        if not re.search(r"[A-Za-z]{2}", term) or len(term.split()) > 8 or term.lower() in seen:
            continue
        i = next((k for k, (a, b) in enumerate(sents) if a <= m.start() < b), None)
        if i is None:
            continue
        a = sents[i][0]
        if i > 0 and _BACKREF.match(text, a):
            a = sents[i - 1][0]
        min_end = m.end() + 1
        b = cap_end(mask, a, sents[i][1], 30)
        if b < min_end:
            b = cap_end(mask, a, sents[i][1], len(mask[a : m.end()].split()) + 12)
        if b < min_end:
            continue
        before = text[max(a, m.start() - 120) : m.start()]
        art = re.search(r"(?:^|\s)(an?|the|An?|The)\s+$", before)
        say = _SAY_SUBJECT.search(_squash(before) + " ")
        slots = {"term": term, "a_term": f"{art.group(1).lower()} {term}" if art else ""}
        if say and "{" not in say.group(1):
            slots["subject"] = say.group(1)
            slots["be_term"] = f"{say.group(2)} {term}" if say.group(2) else term
        item = _make(text, rng, phrasings, "definition", slots, a, b, fit_passage(text, env.start, b, a, b))
        if item:
            seen.add(term.lower())
            items.append(item)
    return items


def _statement_span(text, mask, env: _Env) -> tuple[int, int] | None:
    """The statement's opening: its setup sentences (Let/Assume/...) and the first claim sentence,
    capped at 40 words / 250 characters (a formula counts as one word)."""
    sents = _tex_sentences(mask, env.body, env.end)
    if not sents:
        return None
    a = sents[0][0]
    b = sents[0][1]
    for s, e in sents:
        b = e
        if not _SETUP.match(text, s):
            break
    b = cap_end(mask, a, b, 40, 250)
    return (a, b) if b - a >= 20 else None


def _stacks_statement(text, mask, env: _Env, rng, phrasings, seen: set) -> list[QAItem]:
    """ "State the lemma about {label words}" item, plus a "find" item from its slogan."""
    span = _statement_span(text, mask, env)
    if span is None:
        return []
    a, b = span
    passage = fit_passage(text, env.start, b, a, b)
    out = []
    topic = _label_topic(env.label)
    if topic and (env.kind, topic) not in seen:
        seen.add((env.kind, topic))
        it = _make(text, rng, phrasings, "statement", {"kind": env.kind, "topic": topic}, a, b, passage)
        if it:
            out.append(it)
    if env.slogan:
        gist = _squash(text[env.slogan[0] : env.slogan[1]])
        it = _make(text, rng, phrasings, "find", {"gist": gist}, a, b, passage)
        if it:
            out.append(it)
    return out


def _stacks_find(text, mask, env: _Env, rng, phrasings) -> QAItem | None:
    """ "Find" item from a prose-like sentence of the environment (not its first, so the quote is
    not simply the statement the other items ask for)."""
    sents = [(s, e) for s, e in _tex_sentences(mask, env.body, env.end) if _prose_words(mask, s, e) >= 8]
    sents = [(s, e) for s, e in sents if mask.count("\0", s, e) / (e - s) < 0.5]
    if not sents:
        return None
    s, e = rng.choice(sents)
    return _find_item(text, rng, phrasings, s, e, mask=mask, keywords=False)


def mine_stacks(text: str, rng: random.Random, phrasings: str = "train") -> list[QAItem]:
    """Definition, statement and find items from a Stacks Project chapter (raw LaTeX)."""
    mask = mask_math(text)
    envs = [e for e in _environments(text) if not _mostly_math(mask, e.body, e.end)]
    by_type: dict[str, list[QAItem]] = {t: [] for t in QTYPES}
    seen_terms: set = set()
    seen_topics: set = set()
    for env in envs:
        if env.kind == "definition":
            by_type["definition"] += _stacks_definitions(text, mask, env, rng, phrasings, seen_terms)
        else:
            for it in _stacks_statement(text, mask, env, rng, phrasings, seen_topics):
                by_type[it.qtype].append(it)
    finds = [f for f in (_stacks_find(text, mask, env, rng, phrasings) for env in envs) if f]
    by_type["find"] += finds
    return _bounded(by_type, rng)


def _bounded(by_type: dict[str, list[QAItem]], rng: random.Random) -> list[QAItem]:
    """At most MAX_PER_TYPE items per type, spread through the document; sorted by position."""
    out = []
    for t in QTYPES:
        out += spread_sample(
            by_type.get(t, []), MAX_PER_TYPE, rng, pos=lambda it: (it.ans_start, it.question)
        )
    return sorted(out, key=lambda it: (it.ans_start, it.qtype, it.question))


# --------------------------------------------------------------------------------------------
# books (prose, verse, plays)
# --------------------------------------------------------------------------------------------

# a sentence ends after . ! ? before a capital, at a blank line, and before a play's speech heading
_SENT_BREAK = re.compile(
    r"[.!?]+[\"”’')\]_]*(?=\s+[\"“‘'(\[_]*[A-Z])|\n[ \t]*\n|\n(?=[A-Z][A-Za-z'\- ]{0,30}\.[ \t]*\n)"
)
_ABBREV = frozenset(
    "Mr Mrs Ms Dr St Mme Mlle M Messrs Capt Col Gen Lt Sr Jr No Vol vol p pp Rev Hon Esq Prof Sq Mt".split()
)
_NUM_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand million score dozen""".split()
)


_DEL_LOWER = {c: None for c in range(ord("a"), ord("z") + 1)}
_DEL_UPPER = {c: None for c in range(ord("A"), ord("Z") + 1)}


class BookIndex:
    """What the book miners share: sentence spans, word frequencies, person and place names."""

    def __init__(self, text: str):
        self.text = text
        self.sents = split_sentences(text)
        self.starts = [s for s, _ in self.sents]
        self.ends = [e for _, e in self.sents]
        self.bounds = (self.starts, self.ends)
        self.freq = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
        self.persons, self.places = find_names(text)

    def sentence_at(self, pos: int) -> int | None:
        """Index of the sentence containing offset `pos`, or None."""
        i = bisect.bisect_right(self.starts, pos) - 1
        if i >= 0 and self.sents[i][0] <= pos < self.sents[i][1]:
            return i
        return None

    def substantive(self, i: int) -> bool:
        """A real sentence of running text (not a heading, a contents entry or a list of names)."""
        s, e = self.sents[i]
        if e - s < 30:
            return False
        seg = self.text[s:e]
        lower = len(seg) - len(seg.translate(_DEL_LOWER))
        upper = len(seg) - len(seg.translate(_DEL_UPPER))
        return lower >= 3 * upper and len(seg.split()) >= 6


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans of prose/verse: a break after . ! ? (not after Mr., Dr., ...) before a
    capital, and at every blank line. Line wrapping inside a sentence is kept."""
    out, start = [], 0
    for m in _SENT_BREAK.finditer(text):
        if text[m.start()] == ".":
            w = re.search(r"([A-Za-z]+)$", text[max(0, m.start() - 12) : m.start()])
            if w and w.group(1) in _ABBREV:
                continue
        s, e = strip_span(text, start, m.end())
        if e > s:
            out.append((s, e))
        start = m.end()
    s, e = strip_span(text, start, len(text))
    if e > s:
        out.append((s, e))
    return out


_LOW = "a-zà-öø-ÿ"  # lower-case letters, accented Latin-1 ones too (Natásha, Borodinó)
_CAP = rf"[A-Z][{_LOW}]+(?!['’][a-z])"  # a capitalised word, not "Heav" of "Heav'n"
_MID_CAP = re.compile(rf"(?<=[a-z,;][ \n])({_CAP})\b(?!')")
_TITLE_NAME = re.compile(rf"\b(?:{_TITLES})\.?[ \n]+{_CAP}(?:[ \n]{_CAP})?\b")
_BIGRAM = re.compile(rf"\b({_CAP})[ \n]({_CAP})\b")
_SPEECH_VERBS = (
    "said|replied|cried|asked|answered|exclaimed|returned|rejoined|continued|added|observed|remarked|"
    "whispered|shouted|muttered|murmured|repeated|began|resumed|thought|smiled|laughed|nodded|sighed"
)
_PERSON_CUE = re.compile(
    rf"\b({_CAP})(?:\s+(?:{_SPEECH_VERBS}|himself|herself)\b|,\s+who\b|['’]s\s+(?:father|mother|wife|husband|son|daughter"
    rf"|sister|brother|friend|face|eyes|hand|voice|heart)\b)|\b(?:said|asked|cried|replied|dear|poor)\s+({_CAP})\b"
)
_PLACE_CUE = re.compile(rf"\b(?:in|at|from|near|into)[ \n]+({_CAP}(?:[ \n]{_CAP})?)\b")


def find_names(text: str, min_count: int = 5) -> tuple[list[str], set[str]]:
    """(person names, place names) of a book from capitalisation statistics.

    A person is a title + name ("Mr. Darcy") seen `min_count` times, or a capitalised word seen
    `min_count` times mid-sentence, hardly ever in lower case, with speech-verb evidence ("said
    Emma", "Emma replied") at least twice and at least as often as place evidence; also two such
    words in a row ("Frank Churchill") if one is a person. A place is a capitalised word (or two)
    after in/at/from/near/into at least twice and no person. Words often written after an article
    ("the Animals" in Hobbes, who capitalises nouns) are common nouns, not names."""
    lower = Counter(w for w in re.findall(r"\b[a-z]+\b", text))
    after_article = Counter(re.findall(rf"\b(?:the|a|an|this|that|The|A|An)[ \n]+({_CAP})\b", text))
    total = Counter(re.findall(rf"\b{_CAP}\b", text))
    mid = Counter(_MID_CAP.findall(text))
    cue = Counter(a or b for a, b in _PERSON_CUE.findall(text))
    place_cue = Counter(_squash(p) for p in _PLACE_CUE.findall(text))

    def rare_lower(w: str) -> bool:
        return (
            w not in _NAME_STOP
            and len(w) >= 3
            and lower.get(w.lower(), 0) <= 0.1 * total[w]
            and after_article.get(w, 0) <= 0.2 * total[w]
        )

    singles = {
        w
        for w, c in mid.items()
        if c >= min_count and rare_lower(w) and cue[w] >= 2 and cue[w] >= place_cue.get(w, 0)
    }
    titled = Counter(_title_form(t) for t in _TITLE_NAME.findall(text))
    persons = set(singles)
    persons |= {t for t, c in titled.items() if c >= min_count and t.split()[-1] not in _NAME_STOP}
    bigrams = Counter(f"{a} {b}" for a, b in _BIGRAM.findall(text))
    for bg, c in bigrams.items():
        a, b = bg.split()
        if c >= min_count and (a in singles or b in singles) and rare_lower(a) and rare_lower(b):
            persons.add(bg)
    person_words = {w for p in persons for w in p.split()}
    places = {
        p
        for p, c in place_cue.items()
        if c >= 2 and all(rare_lower(w) and w not in person_words for w in p.split())
    }
    return sorted(persons), places


def _title_form(t: str) -> str:
    """'Mr.\nFrank Churchill' -> 'Mr. Frank Churchill'; a trailing stop word is dropped ('Mr. Weston And')."""
    words = t.split()
    if len(words) == 3 and words[2] in _NAME_STOP:
        words = words[:2]
    return " ".join(words)


def _name_regex(name: str) -> re.Pattern:
    """The name as a whole word, any whitespace (line wrapping) between its words. It starts with
    a literal so that the scan is fast; callers check the character before a match."""
    return re.compile(r"\s+".join(re.escape(p) for p in name.split()) + r"(?![A-Za-z])")


_DESCRIPTIVE = re.compile(
    r",\s+(?:a|an|the|his|her|my|our|their|who|whose|one)\s|\s+(?:was|is|being|seemed|became)\s"
)
_STRONG = re.compile(
    r",\s+(?:a|an|the|who|whose)\s|\s+(?:was|is)\s+(?:a|an|the|one)\s"
)  # apposition / "X was a ..."
_CLAUSE_END = re.compile(r"(?<!\bMr)(?<!\bMrs)(?<!\bDr)(?<!\bSt)(?<!\bMs)[;:.!?\"“”()\[\]]|--|—")
_PART_OF_NAME = re.compile(rf"(?:\b[A-Z][a-z]+|\b(?:{_TITLES})\.?)[ \n]+$")
_LONGER_NAME = re.compile(r"\s+[A-Z][a-z]")
_ASIDE = re.compile(r"(?:he|she|they|I|we|you|it|said|says)\b")


def _mention_answer(ix: BookIndex, i: int, q: int) -> tuple[int, int] | None:
    """The rest of the clause after a name ending at `q` in sentence i (appositive or predicate),
    capped at 20 words; None if it is under 3 words or the name is a possessive."""
    text = ix.text
    e = ix.sents[i][1]
    if text.startswith("'s", q) or text.startswith("’s", q) or _LONGER_NAME.match(text, q):
        return None  # a possessive, or part of a longer name ("Emma Woodhouse" when asking about Emma)
    a = q
    while a < e and (text[a].isspace() or text[a] == ","):
        a += 1
    if _ASIDE.match(text, a):  # "Mrs. Hodges, he said, was ..."
        return None
    m = _CLAUSE_END.search(text, a, e)
    b = cap_end(text, a, m.start() if m else e, 20)
    if len(text[a:b].split()) < 3:
        return None
    return a, b


def _character_items(ix: BookIndex, rng, phrasings, max_tries: int = 30) -> list[QAItem]:
    """ "Who is {name}?" for each person: the answer is the rest of the clause after the name at
    its first mention in apposition or predication ("X, a ...", "X, who ...", "X was a ...") among
    its first `max_tries` substantive ones, else at its first weaker descriptive one ("X was ...",
    "X, his ..."); a person with neither gets no item (the rest of a clause is rarely an answer)."""
    items = []
    text = ix.text
    for name in ix.persons:
        found, tried = None, 0
        for m in _name_regex(name).finditer(text):
            if m.start() > 0 and text[m.start() - 1].isalpha():
                continue
            if _PART_OF_NAME.search(text, max(0, m.start() - 20), m.start()):
                continue  # "Woodhouse" in "Emma Woodhouse" is not a mention of (Mr.) Woodhouse
            i = ix.sentence_at(m.start())
            if i is None or not ix.substantive(i):
                continue
            tried += 1
            if tried > max_tries:
                break
            if not _DESCRIPTIVE.match(text, m.end()):
                continue
            ans = _mention_answer(ix, i, m.end())
            if ans is not None and found is None:
                found = (i, ans)
            if ans is not None and _STRONG.match(text, m.end()):
                found = (i, ans)
                break
        if found is None:
            continue
        i, (a, b) = found
        s, e = ix.sents[i]
        it = _make(
            text, rng, phrasings, "character", {"name": name}, a, b, fit_passage(text, s, e, a, b, ix.bounds)
        )
        if it:
            items.append(it)
    return items


_NAME_RX = rf"(?:(?:{_TITLES})\.?\s+)?{_CAP}(?:[ ]{_CAP})?"
_Q_OPEN, _Q_CLOSE = r"[\"“]", r"[\"”]"
_QUOTE = rf"{_Q_OPEN}(?P<q>[^\s\"“”][^\"“”]{{6,300}}?[,!?.\-—]){_Q_CLOSE}"
_SPEAK = (
    "said|replied|cried|asked|answered|exclaimed|returned|rejoined|continued|added|observed|remarked|"
    "whispered|shouted"
)
_SPEAKER_PATTERNS = (
    re.compile(rf"{_QUOTE}\s+(?:{_SPEAK})\s+(?P<name>{_NAME_RX})\b"),
    re.compile(rf"{_QUOTE}\s+(?P<name>{_NAME_RX})\s+(?:{_SPEAK})\b"),
    re.compile(
        rf"(?P<name>{_NAME_RX})\s+(?:{_SPEAK}),?:?\s+{_Q_OPEN}(?P<q>[^\s\"“”][^\"“”]{{6,300}}?){_Q_CLOSE}"
    ),
)


def _quote_window(text: str, s: int, e: int, rng) -> tuple[int, int] | None:
    """A contiguous piece of 5-12 words of the quote [s, e) (all of it if short)."""
    words = list(_WORD.finditer(text, s, e))
    if len(words) < 5:
        return None
    k = min(len(words), rng.randint(6, 12))
    i = rng.randrange(0, len(words) - k + 1)
    a, b = words[i].start(), words[i + k - 1].end()
    while b > a and text[b - 1] in ",;:.!?-—":
        b -= 1
    return a, b


def _speaker_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """ "Who said '...'?" from quotations attributed to a named speaker (said X / X said)."""
    text = ix.text
    cands = set()
    for rx in _SPEAKER_PATTERNS:
        for m in rx.finditer(text):
            if m.group("name").split()[-1] in _NAME_STOP:  # "said The ...", "said Mrs" alone
                continue
            cands.add((m.start("q"), m.end("q"), m.start("name"), m.end("name"), m.start(), m.end()))
    items = []
    for qs, qe, a, b, ms, me in spread_sample(list(cands), 3 * MAX_PER_TYPE, rng, pos=lambda c: c[0]):
        w = _quote_window(text, qs, qe, rng)
        if w is None or not _unique(text, *w):
            continue
        i, j = ix.sentence_at(ms), ix.sentence_at(me - 1)
        lo = ix.sents[i][0] if i is not None else ms
        hi = ix.sents[j][1] if j is not None else me
        passage = fit_passage(text, lo, hi, min(w[0], a), max(w[1], b), ix.bounds)  # quote and name
        it = _make(text, rng, phrasings, "speaker", {"quote": _squash(text[w[0] : w[1]])}, a, b, passage)
        if it and it.passage_start <= w[0] and w[1] <= it.passage_end:
            items.append(it)
    return items


_NUMW = "|".join(sorted(_NUM_WORDS, key=len, reverse=True))
_MONEY = (
    "pounds|pound|crowns|crown|shillings|shilling|pence|guineas|guinea|francs|franc|dollars|dollar|livres|"
    "pistoles|roubles|rubles|florins|ducats|sous|marks|sovereigns|louis|talents|drachmas|copecks|kopecks|"
    "piastres|reals|sequins"
)
_TIME = (
    "years|year|months|month|weeks|week|days|day|hours|hour|minutes|minute|centuries|century|nights|"
    "generations"
)
_DIST = "miles|mile|leagues|league|feet|foot|yards|yard|inches|inch|versts|verst|paces|fathoms|furlongs|acres"
_NUMBER = re.compile(
    rf"(?<![\w£$])(?P<num>[£$]\s?\d[\d,]*(?:\.\d+)?|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?"
    rf"|(?i:(?:(?:a|an)[ \n-]+)?(?:{_NUMW})(?:[ \n-]+(?:and[ \n]+)?(?:{_NUMW}))*))(?![\w])"
    rf"(?:[ \n]+(?P<unit>(?i:{_MONEY}|{_TIME}|{_DIST}))\b)?(?:[ \n]+(?P<noun>[a-z]{{3,}}))?"
)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_YEAR_BEFORE = re.compile(
    rf"(?:\b(?:in|of|year|since|until|till|from|to|before|after|about|by|circa|anno|early|late|{_MONTHS})|A\.\s?D\.|\d,)\s+$",
    re.I,
)
_NUM_SKIP_BEFORE = re.compile(
    r"(?:chapter|page|vol|volume|no|book|verse|line|letter|canto|act|scene|p|pp|art|section|sect)\.?\s*$",
    re.I,
)


def _classify_number(m: re.Match) -> tuple[str, int, str] | None:
    """(what, answer end, noun) of a number match: "sum of money" (with its unit), "length of
    time", "distance", "year" (1000-2030 on its own) or "number" (a count, with the counted noun);
    None for "one" alone, "a"/"an" and other non-facts."""
    num = m.group("num")
    unit = (m.group("unit") or "").lower()
    words = num.lower().replace("-", " ").split()
    if unit:
        what = (
            "sum of money"
            if re.fullmatch(_MONEY, unit)
            else "length of time"
            if re.fullmatch(_TIME, unit)
            else "distance"
        )
        if words in (["one"], ["a"], ["an"]) and what != "sum of money":
            return None
        return what, m.end("unit"), ""
    if num[0] in "£$":
        return "sum of money", m.end("num"), ""
    if re.fullmatch(r"\d{4}", num) and 1000 <= int(num) <= 2030:
        if not _YEAR_BEFORE.search(m.string, max(0, m.start() - 16), m.start()):
            return None  # a line or page number, not a date
        return "year", m.end("num"), ""
    noun = m.group("noun") or ""
    if (
        words in (["one"],)
        or not noun
        or noun in STOPWORDS
        or not (noun.endswith("s") or noun in ("men", "people", "children", "women", "sheep", "cattle"))
    ):
        return None
    return "number", m.end("num"), noun


def _number_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """Facts with numbers: sentences holding exactly one number phrase; the answer is that phrase."""
    text = ix.text
    per_sent: dict[int, list] = {}
    for m in _NUMBER.finditer(text):
        if _NUM_SKIP_BEFORE.search(text, max(0, m.start() - 10), m.start()):
            continue
        c = _classify_number(m)
        i = ix.sentence_at(m.start())
        if i is None:
            continue
        per_sent.setdefault(i, []).append((m.start(), *c) if c else None)
    cands = [(i, v[0]) for i, v in per_sent.items() if len(v) == 1 and v[0] is not None and ix.substantive(i)]
    items = []
    for i, (a, what, b, noun) in spread_sample(cands, 2 * MAX_PER_TYPE, rng, pos=lambda c: c[1][0]):
        passage = fit_passage(text, *ix.sents[i], a, b, ix.bounds)
        topic = passage and _topic_words(text, *passage, (a, b + len(noun) + 1), ix.freq)
        if not topic:
            continue
        slots = {"topic": topic, "what": what, "noun": noun}
        it = _make(text, rng, phrasings, "number", slots, a, b, passage)
        if it:
            items.append(it)
    return items


def _place_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """ "Which place ..." from sentences naming exactly one known place after in/at/from/near/into."""
    text = ix.text
    per_sent: dict[int, list] = {}
    for m in _PLACE_CUE.finditer(text):
        p = _squash(m.group(1))
        if p not in ix.places:
            first = p.split()[0]
            if first not in ix.places:
                continue
            p = first
        i = ix.sentence_at(m.start())
        if i is not None:
            a = m.start(1)
            per_sent.setdefault(i, []).append(
                (a, a + len(m.group(1)) if p == _squash(m.group(1)) else a + len(p))
            )
    cands = [(i, v[0]) for i, v in per_sent.items() if len(v) == 1 and ix.substantive(i)]
    items = []
    for i, (a, b) in spread_sample(cands, 2 * MAX_PER_TYPE, rng, pos=lambda c: c[1][0]):
        passage = fit_passage(text, *ix.sents[i], a, b, ix.bounds)
        topic = passage and _topic_words(text, *passage, (a, b), ix.freq)
        if not topic:
            continue
        it = _make(text, rng, phrasings, "place", {"topic": topic}, a, b, passage)
        if it:
            items.append(it)
    return items


def _book_find_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """ "Find the passage that says ..." from substantive sentences of 10-60 words."""
    text = ix.text
    cands = [
        i
        for i, (s, e) in enumerate(ix.sents)
        if 50 <= e - s <= 450 and ix.substantive(i) and 10 <= len(text[s:e].split()) <= 60
    ]
    items = []
    for i in spread_sample(cands, 2 * MAX_PER_TYPE, rng):
        s, e = ix.sents[i]
        it = _find_item(text, rng, phrasings, s, e, ix.bounds)
        if it:
            items.append(it)
    return items


# ---- plays ---------------------------------------------------------------------------------

_PERSONAE_HEAD = re.compile(
    r"^\s*(?:PERSONS REPRESENTED|Persons Represented|Persons represented"
    r"|DRAMATIS PERSON[AÆ]E|Dramatis Person[aæ]e)\.?\s*$",
    re.M,
)
_PERSONA_LINE = re.compile(
    r"^(?P<name>[A-Z][A-Za-z'\- ]{1,40}?),[ \t]+(?P<desc>[^\n]{3,200}?)\.?[ \t]*$", re.M
)
_ACT_HEAD = re.compile(r"^\s*(?:ACT|Act|SCENE|Scene|PROLOGUE|INDUCTION)\b", re.M)
_SPEECH_TAG = re.compile(
    r"^(?P<tag>[A-Z][A-Z'\-]+(?: [A-Z][A-Z'\-]+){0,3})\.[ \t]*\n(?P<line>[^\n\[]{20,})", re.M
)


def _personae(text: str) -> list[re.Match]:
    """The "NAME, description." lines of the play's "Persons represented" list (before ACT I)."""
    head = _PERSONAE_HEAD.search(text)
    if not head:
        return []
    act = _ACT_HEAD.search(text, head.end())
    end = act.start() if act else min(len(text), head.end() + 5000)
    return list(_PERSONA_LINE.finditer(text, head.end(), end))


def _play_characters(text: str, rng, phrasings) -> list[QAItem]:
    """ "Who is Orlando?" from the play's "Persons represented" list (answer: the description)."""
    lines = _personae(text)
    names = Counter(m.group("name").strip().title() for m in lines)
    items = []
    for m in lines:
        name = m.group("name").strip().title()
        if names[name] > 1 or name.split()[0] in ("A", "An", "Two", "Three", "Other", "Several", "The"):
            continue
        a, b = strip_span(text, m.start("desc"), m.end("desc"))
        it = _make(
            text,
            rng,
            phrasings,
            "character",
            {"name": name},
            a,
            b,
            fit_passage(text, m.start(), m.end(), a, b),
        )
        if it:
            items.append(it)
    return items


def _play_speakers(text: str, rng, phrasings) -> list[QAItem]:
    """ "Who says '...'?" from a speech heading ("ORLANDO.") and the first line of the speech."""
    cands = [
        m
        for m in _SPEECH_TAG.finditer(text)
        if not m.group("tag").startswith(("ACT", "SCENE")) and len(m.group("tag")) <= 30
    ]
    items = []
    for m in spread_sample(cands, 2 * MAX_PER_TYPE, rng, pos=lambda m: m.start()):
        w = _quote_window(text, m.start("line"), m.end("line"), rng)
        if w is None or not _unique(text, *w):
            continue
        a, b = m.start("tag"), m.end("tag")
        passage = fit_passage(text, a, m.end("line"), a, b)
        if passage is None or passage[1] < w[1]:
            continue
        it = _make(text, rng, phrasings, "speaker", {"quote": _squash(text[w[0] : w[1]])}, a, b, passage)
        if it:
            items.append(it)
    return items


def mine_book(text: str, rng: random.Random, phrasings: str = "train", play: bool = False) -> list[QAItem]:
    """Character, speaker, number, place and find items from a book, poem or (play=True) play."""
    ix = BookIndex(text)
    by_type: dict[str, list[QAItem]] = {}
    if play:  # the dramatis personae and speakers are people, whatever "from Cordelia" suggests
        people = {w.title() for m in _SPEECH_TAG.finditer(text) for w in m.group("tag").split()}
        people |= {w.title() for m in _personae(text) for w in m.group("name").split()}
        ix.places = {p for p in ix.places if not set(p.split()) & people}
        by_type["character"] = _play_characters(text, rng, phrasings)
        by_type["speaker"] = _play_speakers(text, rng, phrasings)
    else:
        by_type["character"] = _character_items(ix, rng, phrasings)
        by_type["speaker"] = _speaker_items(ix, rng, phrasings)
    by_type["number"] = _number_items(ix, rng, phrasings)
    by_type["place"] = _place_items(ix, rng, phrasings)
    by_type["find"] = _book_find_items(ix, rng, phrasings)
    return _bounded(by_type, rng)


def mine_document(path: str, text: str, rng: random.Random, phrasings: str = "train") -> list[QAItem]:
    """Mine one corpus document; `path` (relative to the corpora dir) picks the miner: stacks/ ->
    LaTeX, shakespeare/ -> plays (and poems), anything else (books/, milton/) -> prose/verse."""
    p = str(path).replace("\\", "/")
    if p.startswith("stacks/") or p.endswith(".tex"):
        return mine_stacks(text, rng, phrasings)
    return mine_book(text, rng, phrasings, play=p.startswith("shakespeare/"))


# --------------------------------------------------------------------------------------------
# token spans and the QA files
# --------------------------------------------------------------------------------------------


def char_to_token_span(offsets: Sequence[tuple[int, int]] | np.ndarray, s: int, e: int) -> tuple[int, int]:
    """[ts, te): the tokens that overlap the character span [s, e) (`offsets` from
    tokenizer.encode_with_offsets: monotone (start, end) per token)."""
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    ts = int(np.searchsorted(off[:, 1], s, side="right"))
    te = int(np.searchsorted(off[:, 0], e, side="left"))
    return ts, max(te, ts + 1) if e > s else ts


def _doc_rng(seed: int, split: str, rel: str) -> random.Random:
    """A per-document generator: items do not depend on which other documents are mined."""
    return random.Random(f"drt-mine:{seed}:{split}:{rel}")


def _split_documents(splits: dict, split: str) -> list[str]:
    """The split's documents (books corpus first, then stacks), as in data.py's order."""
    from .data import CORPORA

    return [d for c in CORPORA for d in splits[split].get(c, [])]


def build_qa_data(
    corpora_dir,
    splits_path,
    out_dir,
    tokenizer_path=None,
    seed: int = 0,
    splits: Sequence[str] = ("train", "val"),
) -> dict:
    """Mine every document of `splits` (never "test") and write OUT/qa/{split}.bin, .jsonl and
    meta.json; return {split: {qtype: count}}. Train items use the train phrasings, val items
    both (recorded per item). Texts are read as drt_core.train.data reads them (data.read_text)."""
    from store.chunk_store import atomic_write

    from ..tokenizer import _resolve

    if "test" in splits:
        raise ValueError("the test split is never mined")
    root, out = Path(corpora_dir), Path(out_dir) / "qa"
    split_doc = json.loads(Path(splits_path).read_text())
    out.mkdir(parents=True, exist_ok=True)
    meta: dict = {"seed": seed, "splits": {}}
    t0 = time.time()
    for split in splits:
        docs = _split_documents(split_doc, split)
        meta["splits"][split] = _write_split(root, docs, split, out, seed, tokenizer_path)
    tp = _resolve(tokenizer_path)
    meta["tokenizer_sha256"] = hashlib.sha256((tp / "tokenizer.json").read_bytes()).hexdigest()[:16]
    meta["seconds"] = round(time.time() - t0, 1)
    atomic_write(out / "meta.json", lambda f: f.write((json.dumps(meta, indent=2) + "\n").encode()))
    return {split: m["per_type"] for split, m in meta["splits"].items()}


def _write_split(root: Path, docs: Sequence[str], split: str, out: Path, seed: int, tokenizer_path) -> dict:
    """Tokenize and mine the split's documents; write out/{split}.bin and .jsonl; return its meta."""
    from store.chunk_store import atomic_write

    from .data import TOKEN_DTYPE, read_text
    from ..tokenizer import EOT_ID, encode_with_offsets

    phrasings = "train" if split == "train" else "both"
    lines: list[str] = []
    per_type: Counter = Counter()
    per_phrasing: Counter = Counter()
    n_tok = 0
    t_tok = t_mine = 0.0

    def write_bin(f) -> None:
        nonlocal n_tok, t_tok, t_mine
        for rel in docs:
            text = read_text(root / rel)
            t1 = time.time()
            ids, offs = encode_with_offsets(text, tokenizer_path)
            t2 = time.time()
            items = mine_document(rel, text, _doc_rng(seed, split, rel), phrasings)
            t_tok, t_mine = t_tok + t2 - t1, t_mine + time.time() - t2
            off = np.asarray(offs, dtype=np.int64).reshape(-1, 2)
            for it in items:
                lines.append(json.dumps(_item_record(rel, n_tok, len(ids), it, off), ensure_ascii=False))
                per_type[it.qtype] += 1
                per_phrasing[phrasing_of(it.qtype, it.template)] += 1
            f.write(np.asarray(ids, dtype=TOKEN_DTYPE).tobytes())
            f.write(np.asarray([EOT_ID], dtype=TOKEN_DTYPE).tobytes())
            n_tok += len(ids) + 1
            log.info("%s %s: %d tokens, %d items", split, rel, len(ids), len(items))

    atomic_write(out / f"{split}.bin", write_bin)
    atomic_write(out / f"{split}.jsonl", lambda f: f.write("".join(x + "\n" for x in lines).encode("utf-8")))
    return {
        "documents": len(docs),
        "tokens": n_tok,
        "items": sum(per_type.values()),
        "per_type": {t: per_type[t] for t in QTYPES},
        "phrasing": {"train": per_phrasing["train"], "heldout": per_phrasing["heldout"]},
        "tokenize_seconds": round(t_tok, 1),
        "mine_seconds": round(t_mine, 1),
    }


def _item_record(rel: str, doc_start: int, doc_len: int, it: QAItem, off: np.ndarray) -> dict:
    """One jsonl line: token spans relative to the document's start in the .bin."""
    return {
        "doc": rel,
        "doc_start": doc_start,
        "doc_len": doc_len,
        "question": it.question,
        "answer": it.answer,
        "target": answer_target(it.answer),
        "qtype": it.qtype,
        "template": it.template,
        "phrasing": phrasing_of(it.qtype, it.template),
        "ans_tok": list(char_to_token_span(off, it.ans_start, it.ans_end)),
        "passage_tok": list(char_to_token_span(off, it.passage_start, it.passage_end)),
        "ans_char": [it.ans_start, it.ans_end],
        "passage_char": [it.passage_start, it.passage_end],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m drt_core.train.mine", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--data", default="data", help="data dir holding splits.json; writes DATA/qa/")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="train,val")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    t0 = time.time()
    counts = build_qa_data(
        args.corpora,
        Path(args.data) / "splits.json",
        args.data,
        args.tokenizer,
        args.seed,
        tuple(args.splits.split(",")),
    )
    if args.json:
        print(json.dumps({"counts": counts, "seconds": round(time.time() - t0, 1)}))
    else:
        for split, c in counts.items():
            print(f"{split}: " + ", ".join(f"{t} {n}" for t, n in c.items()) + f" (total {sum(c.values())})")
        print(f"{time.time() - t0:.0f} s; wrote {Path(args.data) / 'qa'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
