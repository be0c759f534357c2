"""`mine_stacks`: items from Stacks Project LaTeX: definition terms (``{\\it term}``,
``\\emph{term}``, ``\\textit{term}``), lemma/proposition/theorem statements named by their
``\\label``, slogans and partial quotes ("find")."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from .items import QTYPES, QAItem, squash
from .spans import bounded, cap_end, find_item, fit_passage, make_item, strip_span

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
        term = squash(raw)
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
        say = _SAY_SUBJECT.search(squash(before) + " ")
        slots = {"term": term, "a_term": f"{art.group(1).lower()} {term}" if art else ""}
        if say and "{" not in say.group(1):
            slots["subject"] = say.group(1)
            slots["be_term"] = f"{say.group(2)} {term}" if say.group(2) else term
        item = make_item(text, rng, phrasings, "definition", slots, a, b,
                         fit_passage(text, env.start, b, a, b))
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
        it = make_item(text, rng, phrasings, "statement", {"kind": env.kind, "topic": topic}, a, b, passage)
        if it:
            out.append(it)
    if env.slogan:
        gist = squash(text[env.slogan[0] : env.slogan[1]])
        it = make_item(text, rng, phrasings, "find", {"gist": gist}, a, b, passage)
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
    return find_item(text, rng, phrasings, s, e, mask=mask, keywords=False)


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
    return bounded(by_type, rng)
