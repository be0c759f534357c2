"""The bold short answer for a question that asks for a count, a sum, an age or a year.

The cross-encoder's answer span is never shown (no span score reached 70% right on validation), but
"How many acres ...?", "How much did ... ask for ...?", "How old was ...?" and "In what year ...?"
say what form their answer takes. Where the quoted sentence states exactly one amount of that form
(a number followed by the question's noun, a number of years or months, a sum of money, a year) and
the question does not already hold it, that amount is the short answer: a piece of the quoted
sentence, shown in bold above the quote.

    count_answer("How many acres was Doc Burke trying to buy?",
                 "He was trying to buy seventy-five acres of land.")   # -> "seventy-five acres"

Measured on the development pool (docs/history/2026-12-08-thirteenth-session.md): shown for 10 answers,
8 right (token F1 at least 0.5 against the written answer).
"""

from __future__ import annotations

import re

_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
          "seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|"
          "million|billion|fourscore|threescore|dozen")  # number words
_ONE = rf"(?:\d[\d,.]*\d|\d|{_WORDS}|score|half|a|an)"
# "nearly half a million", "three hundred and sixty", "thirty or even forty", "twenty-five"
_AMOUNT = (rf"(?:(?:about|nearly|over|some|only|but|scarcely|almost|above|under|upwards\s+of|more\s+than|"
           rf"less\s+than|at\s+least)\s+)?{_ONE}(?:[\s-]+(?:and[\s-]+|or[\s-]+(?:even\s+)?)?{_ONE})*")
_MONEY = (r"(?:dollars?|cents?|pounds?|shillings?|pence|guineas?|crowns?|francs?|livres?|pistoles?|louis|sous?|"
          r"florins?|ducats?|marks?|rubles?|roubles?|sovereigns?)")
_AGE = r"(?:years?|months?|weeks?|days?)(?:\s+old|\s+of\s+age)?"
_NUMERAL = re.compile(rf"\d|\b(?:{_WORDS})\b", re.I)  # an amount holds one ("a dollar", "half" alone do not)
_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b")
_HOW_MANY = re.compile(r"^\s*how\s+many\s+([a-z][a-z-]*)", re.I)
_HOW_OLD = re.compile(r"^\s*(?:how\s+old|at\s+what\s+age)\b", re.I)
_HOW_MUCH = re.compile(r"^\s*how\s+much\b", re.I)
_TITLES = {"Mr", "Mrs", "Miss", "Ms", "Dr", "Sir", "Lady", "Lord", "St", "I", "The", "A", "An"}
_WHAT_YEAR = re.compile(r"^\s*(?:in\s+)?(?:what|which)\s+year\b", re.I)


def _form(question: str) -> re.Pattern | None:
    """What the answer looks like in a sentence (group 0 the amount with its noun), or None."""
    m = _HOW_MANY.match(question)
    if m:  # "How many acres" -> "seventy-five acres"; "How many tail-feathers" -> "forty tail-feathers"
        noun = m.group(1).lower()
        stem = noun[:-1] if noun.endswith("s") and not noun.endswith("ss") else noun
        return re.compile(rf"\b({_AMOUNT})[\s-]+{re.escape(stem)}[a-z-]*", re.I)
    if _HOW_OLD.match(question):
        return re.compile(rf"\b({_AMOUNT})\s+{_AGE}", re.I)
    if _HOW_MUCH.match(question):
        return re.compile(rf"\b({_AMOUNT})\s+{_MONEY}\b", re.I)
    return None


def _named(question: str) -> list[str]:
    """The capitalised words of a question after its first ("Julia", "Bertram", "Mansfield"), titles
    and a possessive's "'s" left out."""
    words = re.findall(r"\b[A-Z][\w'’]*", question.split(None, 1)[1] if len(question.split()) > 1 else "")
    return [w for w in (re.sub(r"['’]s$", "", x) for x in words) if w not in _TITLES]


def _one(found: set[str], quote: str | None) -> str | None:
    """The one amount found, where the quote (if given) shows it."""
    return next(iter(found)) if len(found) == 1 and (quote is None or next(iter(found)) in quote) else None


def count_answer(question: str, sentence: str, quote: str | None = None) -> str | None:
    """The one amount of the form `question` asks for that `sentence` states (see the module's
    docstring), as the sentence writes it with its spaces flattened; None where the question asks
    for no amount, or the sentence states none, or several, of that form, or where `quote` (the text
    shown around the sentence; the sentence itself if None) lacks a name the question gives (an amount
    about someone else: "How old was Mr. Bart when he died?" quoting "Mrs. Bart had died" is kept, an
    amount from a passage on another plantation is not) or the amount itself (a sentence longer than
    the quote is cut)."""
    if not sentence:
        return None
    shown = sentence if quote is None else quote
    if any(not re.search(rf"\b{re.escape(w)}\b", shown) for w in _named(question)):
        return None
    q = " ".join(question.lower().split())
    if _WHAT_YEAR.match(question):
        found = {m.group(0) for m in _YEAR.finditer(sentence)} - set(_YEAR.findall(question))
        return _one(found, quote)
    form = _form(question)
    if form is None:
        return None
    found = {" ".join(m.group(0).split()) for m in form.finditer(sentence) if _NUMERAL.search(m.group(1))}
    found = {f for f in found if f.lower() not in q}
    return _one(found, quote)
