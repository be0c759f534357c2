"""When `ask` says "Not found in this document": the question names a word the document never uses.

A reader's question about something the document does not contain ("Who is Raoul?" of a book where
no Raoul appears) still gets a best-scoring chunk, and the retrieval scores alone do not tell it
from a found passage well (RESULTS §6: the z-score calibrated on validation questions abstained on
33% of the answerable hand-written ones). What does tell: the question names a RARE word (one that
fewer than `min_share` of the training documents use, so not "text", "passage" or "renamed") and
the document never uses it, not even with another ending ("cofinal" covers "cofinality").

    common = load_common_words(model_dir)     # the model's list (common_words.txt), or None
    vocab = DocVocabulary(chunk_texts)        # the document's words (cached per document by ask)
    missing_words(question, vocab, common)    # -> ["raoul"]: abstain, and say which

The list is built from the training split only (`python -m qa.abstain --data data`), and
`min_share` was chosen on validation questions (docs/history/2026-12-03-word-lexical.md).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import math
from collections import Counter
from pathlib import Path
from typing import Iterable

import re
import unicodedata

from .baselines import words as _plain_words  # lower-cased letters and digits, as drt_core.words cuts them


class _Uncombined(dict):
    """str.translate's table that drops combining marks (accents once NFKD has split them off),
    filled as characters are met."""

    def __missing__(self, cp: int):
        self[cp] = None if unicodedata.combining(chr(cp)) else cp
        return self[cp]


_UNCOMBINED = _Uncombined()


def fold(text: str) -> str:
    """`text` with its accents taken off (NFKD, combining marks dropped; ASCII text as it is)."""
    return text if text.isascii() else unicodedata.normalize("NFKD", text).translate(_UNCOMBINED)


def words(text: str) -> list[str]:
    """Lower-cased words with their accents taken off, so a question's "étale" meets the LaTeX
    source's "\\'etale" and "Fère" meets "Fere"."""
    return _plain_words(fold(text))

COMMON_WORDS_FILE = "common_words.txt"
MIN_SHARE = 0.10  # a word in at least this share of the training documents is common
PREFIX = 5  # a question word is "used" if a document word shares its first max(PREFIX, len - 3) letters


_WRITTEN = re.compile(r"\b[A-Za-z]+\b")
_PLACE_PREPOSITIONS = ("in", "at", "from", "near", "into", "towards", "through")
PLACE_SHARE = 0.25
_INNER = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+\b")


class DocVocabulary:
    """The distinct words of a document's chunks, for exact and same-stem lookups, and in how many
    chunks each occurs (`idf`: the in-document idf of the model's word term, config lexical_words);
    the whole document as one line of its words, for the names it mentions (`mentions`); and, counted on
    first use, its words as written, for telling a name from a common word (`lower_case`)."""

    def __init__(self, texts: Iterable[str]):
        self.df: Counter = Counter()
        self.n = 0
        raw = []
        lines = []
        for t in texts:
            raw.append(t)
            ws = words(t)
            self.df.update(set(ws))
            lines.append(" ".join(ws))
            self.n += 1
        self.words = set(self.df)
        self.sorted = sorted(self.words)
        self.line = " " + " ".join(lines) + " "
        self._raw = "\n".join(raw)

    @functools.cached_property
    def _folded(self) -> str:
        """The document's text, accents off, as `written` and `inner` count it (folded once)."""
        return fold(self._raw)

    @functools.cached_property
    def written(self) -> Counter:
        """Each word as written, capitals kept ("Rose", "rose"): counted on first use (name questions)."""
        return Counter(_WRITTEN.findall(self._folded))

    @functools.cached_property
    def inner(self) -> Counter:
        """Capitalised words inside a sentence ("said Rose"), not opening one."""
        return Counter(_INNER.findall(self._folded))

    def place(self, word: str) -> bool:
        """Whether capitalised `word` names a place: a quarter of its mentions (two at least) follow "in",
        "at", "from", "near", "into", "towards" or "through" ("at Casterbridge"; "to" is left out: "said to
        Jude"). On the development documents people's names came to 8% at most, towns to 28-100%."""
        n = self.written.get(word, 0)
        if n < 2:
            return False
        w = word.lower()
        return sum(self.line.count(f" {p} {w} ") for p in _PLACE_PREPOSITIONS) >= PLACE_SHARE * n

    def lower_case(self, word: str, opening: bool = False, common: frozenset[str] | None = None) -> bool:
        """Whether capitalised `word` is a common word, not a name: the document writes it in lower case at
        least as often as with its capital ("Pouring", "Listen"), or, where it opens a sentence (`opening`),
        a quarter as often, or it is on the `common` list (the model's common words) and never written with
        its capital inside a sentence ("However", "Moreover": sentences open with them more often than they
        say them; "Tomlinson", seen once, opening a sentence, is not common)."""
        lower, capital = self.written.get(word.lower(), 0), self.written.get(word, 0)
        if opening:
            return (lower >= max(1, capital / 4)
                    or (common is not None and word.lower() in common and not self.inner.get(word)))
        return lower >= max(1, capital)

    def mentions(self, phrase: list[str]) -> bool:
        """Whether the document has these (lower-cased) words one after another ("colonel brandon"), across
        punctuation and line breaks."""
        return f" {' '.join(phrase)} " in self.line

    def idf(self, word: str) -> float:
        """relu(log((n + 1) / (1 + df))) over the document's n chunks, as drt_core.lexical.word_overlap."""
        return max(0.0, math.log((self.n + 1) / (1 + self.df.get(word, 0))))

    def uses(self, word: str) -> bool:
        """The document has `word`, or a word sharing its first max(PREFIX, len(word) - 3) letters
        (another ending: "recognises" / "recognised", "cofinality" / "cofinal")."""
        if word in self.words:
            return True
        k = max(PREFIX, len(word) - 3)
        if len(word) <= k:
            return False
        stem = word[:k]
        i = bisect.bisect_left(self.sorted, stem)
        return i < len(self.sorted) and self.sorted[i].startswith(stem)


def load_common_words(model_dir: str | Path | None) -> frozenset[str] | None:
    """The model's common-word list (one word a line, '#' comments), or None when it has none."""
    if model_dir is None:
        return None
    p = Path(model_dir) / COMMON_WORDS_FILE
    if not p.is_file():
        return None
    return frozenset(w for w in (line.strip() for line in p.read_text(encoding="utf-8").splitlines())
                     if w and not w.startswith("#"))


def missing_words(question: str, vocab: DocVocabulary, common: frozenset[str]) -> list[str]:
    """The question's rare words (not common, not numbers) that the document never uses, in order."""
    out = []
    for w in dict.fromkeys(words(question)):
        if w.isdigit() or w in common or vocab.uses(w):
            continue
        out.append(w)
    return out


def decisive(question: str, missing: list[str]) -> bool:
    """Whether the missing words say the document does not answer: one of them is a name (capitalised
    in the question, not as its first word: "Who is Raoul?"), or two or more are missing. A single
    missing lower-case word is most often the question's paraphrase ("hilltop" for "top of the
    hill", "renamed"): on the written validation questions it abstained on 3 of 40 answerable
    questions and on none of the 32 unanswerable ones (docs/history/2026-12-05-issue50-answers.md)."""
    if len(missing) >= 2:
        return True
    folded = fold(question)
    toks = re.findall(r"[^\W_]+", folded)
    names = {w.lower() for w in toks[1:] if w[:1].isupper()}
    return any(w in names for w in missing)


TITLES = frozenset("mr mrs miss ms dr sir lady lord dame colonel col captain capt major general admiral lieutenant "
                   "sergeant king queen prince princess duke duchess count countess earl baron baroness marquis "
                   "viscount vicomte madame monsieur mme mlle mademoiselle reverend rev professor prof father mother "
                   "sister brother uncle aunt cardinal saint abbe".split())
_NAME_TITLES = TITLES | {"st"}  # no name the question asks for: "Mr.", "Sergeant", "St."


def names(question: str) -> list[list[str]]:
    """The titled names a question gives ("Colonel Brandon", "Mr. Knightley", "Captain Frederick
    Wentworth"): a capitalised title, then one or more capitalised words, as the question writes them.
    Untitled capitals are left to the word test (`missing_words`): "Russian Emperor" is the book's
    "Emperor of Russia", "In Hume's example" names no one."""
    folded = fold(question)
    toks = list(re.finditer(r"[^\W_]+", folded))
    if len(toks) > 2 and all(m.group()[:1].isupper() or m.group().isdigit() for m in toks):
        return []  # A Question In Title Case names nothing by its capitals
    out = []
    for i, m in enumerate(toks):
        if not (m.group()[:1].isupper() and m.group().lower() in TITLES):
            continue
        run = [m.group()]
        for prev, nxt in zip(toks[i:], toks[i + 1:]):
            if not (nxt.group()[:1].isupper() and re.fullmatch(r"\.?\s*", folded[prev.end():nxt.start()])):
                break
            run.append(nxt.group())
        if len(run) >= 2 and not (out and out[-1][-len(run):] == run):
            out.append(run)
    return out


def missing_names(question: str, vocab: DocVocabulary) -> list[str]:
    """The question's names (`names`) that the document never mentions as such, as the question
    wrote them: asked of a library, "Who is Colonel Brandon?" is not answered by a novel's "Lady
    Brandon" although both of its words are there. A longer run counts as mentioned when its title
    and the next word are ("the King James Bible" of a book that says "the King James version")."""
    out = []
    for n in names(question):
        ws = words(" ".join(n))
        if not (vocab.mentions(ws) or vocab.mentions(words(" ".join(n[:2])))):
            out.append(" ".join(n))
    return out


_ASKS_YEAR = re.compile(r"^\s*(?:in\s+)?what\s+year\b", re.I)
_ASKS_NUMBER = re.compile(r"^\s*how\s+(?:many|much|old)\b", re.I)
_ASKS_NAME = re.compile(r"^\s*what\s+(?:was|is|were|are)\s+(?:the\s+)?(?:[\w'’]+\s+){0,3}?names?\b|"
                        r"\b(?:christian|first|last|maiden|real|family|sur)\s*name\b|^\s*under\s+what\s+name\b", re.I)
_ASKS_PLACE = re.compile(r"\b(?:towns?|city|village|county|place|house|estate|farm|farm-house|street|country|island|"
                         r"river|inn|hotel|parish|school|college|restaurant|plantation|mountain|lake|road)\b", re.I)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
_SENTENCE_OPENERS = frozenset(
    "the a an he she it i we you they his her its their our my your this that these those there then but and or so "
    "if when while as at in on of to for by with from not no yes oh ah well what who whom whose which where why how "
    "all some one two three never now here once".split())
_OPENS = ".!?;:\"“‘'(—-"
_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b|\b(?:eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|"
                   r"eighteen|nineteen)[- ]hundred\b", re.I)
_NUMBER = re.compile(r"\b(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
                     r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
                     r"eighty|ninety|hundreds?|thousands?|millions?|dozens?|score|half|once|twice|thrice|both|"
                     r"single|pair|none|nothing|pounds?|shillings?|pence|penny|guineas?|dollars?|cents?|francs?|"
                     r"crowns?|sovereigns?|sous?|livres?|pistoles?|louis)\b", re.I)


def asked_kind(question: str) -> str | None:
    """"year" for "In what year ...?", "number" for "How many / much / old ...?", "name" for "What was the
    name of ...?" ("What is X's Christian name?", "Under what name ...?"), else None."""
    return ("year" if _ASKS_YEAR.match(question) else "number" if _ASKS_NUMBER.match(question)
            else "name" if _ASKS_NAME.search(question) else None)


def holds_kind(kind: str, text: str, question: str = "", vocab: DocVocabulary | None = None,
               common: frozenset[str] | None = None) -> bool:
    """Whether `text` holds a word of the kind a question asks for (`asked_kind`): a year (1066, "eighteen
    hundred"), or a number, a quantity or a sum of money ("twenty", "a dozen", "a shilling"), or a name the
    question does not give (`_holds_name`; `vocab`, the document's words, and `common`, the model's common
    words, tell a name from a common word opening a sentence). A quote that holds none cannot be the answer:
    on the development pool (395 answerable and 126 unanswerable written questions, 2026-12-07) no right
    quote lacked a year or number, and 12 unanswerable questions' quotes did; with v6 and v7 (479
    answerable, 153 unanswerable), no right quote lacked a name, and 5 unanswerable questions' quotes did
    (and one answerable question's wrong quote). With v8 (563 / 180) the name test reading the document's
    words and places (2026-12-07, fourteenth session): unanswerable abstaining 50.6% -> 58.9%, answerable
    8.5% -> 8.9% (two wrong quotes), no right quote lost."""
    if kind == "name":
        return _holds_name(text, question, vocab, common)
    return bool((_YEAR if kind == "year" else _NUMBER).search(text))


# capitalised words that name no one: days, months, peoples, faiths and the compass ("on Saturday", "an
# Irishman", "a Papist", "the West")
_NOT_NAMES = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december christmas easter english englishman englishmen englishwoman irish irishman "
    "scotch scottish scotsman welsh welshman british french frenchman frenchwoman german germans spanish spaniard "
    "portuguese italian dutch dutchman chinese chinaman malay american americans canadian indian indians negro "
    "negroes roman romans greek grecian russian turkish turk jew jewish christian christians protestant catholic "
    "papist pagan heathen northern southern eastern western north south east west god lord heaven".split())


def _holds_name(text: str, question: str, vocab: DocVocabulary | None = None,
                common: frozenset[str] | None = None) -> bool:
    """Whether `text` holds a capitalised word that `question` does not (nor its family's plural: "Trenor" for
    "the Trenors'"), other than a title ("Mr.", "Sergeant"), "I", a day, month, people or faith
    (`_NOT_NAMES`: "an Irishman", "on Saturday"), a function word opening a sentence ("But", "The", "Never"),
    and, given the document's words, a common word (`DocVocabulary.lower_case`: "Pouring", "Listen",
    "Moreover" opening a sentence) and, unless the question asks for a place ("the name of the village"), a
    place (`DocVocabulary.place`: "Christminster" for "the name of the undergraduate"): the name asked for,
    if it is there.
    "What was the name of Lady Verinder's favourite canary?" quoting "In the breakfast-room I found my
    aunt's favourite canary singing in his cage." holds none."""
    asked = {w.lower() for w in re.findall(r"[^\W\d_]+", fold(question))}
    place_asked = bool(_ASKS_PLACE.search(question))
    t = fold(text)
    for m in _CAPITALISED.finditer(t):
        w = m.group().lower()
        if w in asked or w + "s" in asked or w in _NAME_TITLES or w in _NOT_NAMES or m.group() == "I":
            continue
        before = t[:m.start()].rstrip()
        opening = not before or before[-1] in _OPENS
        if opening and w in _SENTENCE_OPENERS:
            continue
        if vocab is not None and vocab.lower_case(m.group(), opening, common):
            continue
        if vocab is not None and not place_asked and vocab.place(m.group()):
            continue
        return True
    return False


def build_common_words(corpora: str | Path, splits: dict, min_share: float = MIN_SHARE) -> tuple[list[str], int]:
    """Words found in at least `min_share` of the TRAINING documents of `splits` (data/splits.json),
    sorted; and the number of documents read."""
    df: Counter = Counter()
    n = 0
    for paths in splits["train"].values():
        for rel in paths:
            df.update(set(words((Path(corpora) / rel).read_text(encoding="utf-8", errors="replace"))))
            n += 1
    return sorted(w for w, c in df.items() if c >= min_share * n), n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qa.abstain", description="write a model's common-word list")
    ap.add_argument("--corpora", default="../shared/corpora")
    ap.add_argument("--data", default="data", help="holds splits.json (drt-reader data)")
    ap.add_argument("--min-share", type=float, default=MIN_SHARE)
    ap.add_argument("--out", default="checkpoints/drt-tiny/" + COMMON_WORDS_FILE)
    a = ap.parse_args(argv)
    splits = json.loads((Path(a.data) / "splits.json").read_text())
    common, n = build_common_words(a.corpora, splits, a.min_share)
    head = (f"# words used by at least {a.min_share:.0%} of the {n} training documents (python -m qa.abstain);\n"
            "# ask abstains when a question names a word that is not here and not in the document\n")
    Path(a.out).write_text(head + "\n".join(common) + "\n", encoding="utf-8")
    print(f"{len(common)} common words of {n} training documents -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
