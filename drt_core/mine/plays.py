"""Plays (``shakespeare/``): characters from the "Persons represented" list and speakers from the
``HAMLET.`` speech headings (book.mine_book calls these with `play=True`)."""

from __future__ import annotations

import re
from collections import Counter

from .items import MAX_PER_TYPE, QAItem, squash
from .spans import fit_passage, is_unique, make_item, quote_window, spread_sample, strip_span

_PERSONAE_HEAD = re.compile(
    r"^\s*(?:PERSONS REPRESENTED|Persons Represented|Persons represented"
    r"|DRAMATIS PERSON[AÆ]E|Dramatis Person[aæ]e)\.?\s*$",
    re.M,
)
_PERSONA_LINE = re.compile(
    r"^(?P<name>[A-Z][A-Za-z'\- ]{1,40}?),[ \t]+(?P<desc>[^\n]{3,200}?)\.?[ \t]*$", re.M
)
_ACT_HEAD = re.compile(r"^\s*(?:ACT|Act|SCENE|Scene|PROLOGUE|INDUCTION)\b", re.M)
SPEECH_TAG = re.compile(
    r"^(?P<tag>[A-Z][A-Z'\-]+(?: [A-Z][A-Z'\-]+){0,3})\.[ \t]*\n(?P<line>[^\n\[]{20,})", re.M
)


def personae(text: str) -> list[re.Match]:
    """The "NAME, description." lines of the play's "Persons represented" list (before ACT I)."""
    head = _PERSONAE_HEAD.search(text)
    if not head:
        return []
    act = _ACT_HEAD.search(text, head.end())
    end = act.start() if act else min(len(text), head.end() + 5000)
    return list(_PERSONA_LINE.finditer(text, head.end(), end))


def play_characters(text: str, rng, phrasings) -> list[QAItem]:
    """ "Who is Orlando?" from the play's "Persons represented" list (answer: the description)."""
    lines = personae(text)
    names = Counter(m.group("name").strip().title() for m in lines)
    items = []
    for m in lines:
        name = m.group("name").strip().title()
        if names[name] > 1 or name.split()[0] in ("A", "An", "Two", "Three", "Other", "Several", "The"):
            continue
        a, b = strip_span(text, m.start("desc"), m.end("desc"))
        it = make_item(
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


def play_speakers(text: str, rng, phrasings) -> list[QAItem]:
    """ "Who says '...'?" from a speech heading ("ORLANDO.") and the first line of the speech."""
    cands = [
        m
        for m in SPEECH_TAG.finditer(text)
        if not m.group("tag").startswith(("ACT", "SCENE")) and len(m.group("tag")) <= 30
    ]
    items = []
    for m in spread_sample(cands, 2 * MAX_PER_TYPE, rng, pos=lambda m: m.start()):
        w = quote_window(text, m.start("line"), m.end("line"), rng)
        if w is None or not is_unique(text, *w):
            continue
        a, b = m.start("tag"), m.end("tag")
        passage = fit_passage(text, a, m.end("line"), a, b)
        if passage is None or passage[1] < w[1]:
            continue
        it = make_item(text, rng, phrasings, "speaker", {"quote": squash(text[w[0] : w[1]])}, a, b, passage)
        if it:
            items.append(it)
    return items
