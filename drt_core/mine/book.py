"""`mine_book`: items from prose and verse (and, with `play=True`, plays: `plays`): characters (first
descriptive mention), speakers (``"...," said X``), numbers (sums, years, durations, distances,
counts), places (``in/at/from X``) and partial quotes ("find"), on one `BookIndex` of the text
(sentence spans, word frequencies, person and place names)."""

from __future__ import annotations

import bisect
import random
import re
from collections import Counter

from .items import MAX_PER_TYPE, QAItem, squash
from .plays import SPEECH_TAG, personae, play_characters, play_speakers
from .spans import (NAME_STOP, NUM_WORDS, STOPWORDS, TITLES, bounded, cap_end, find_item, fit_passage,
                    is_unique, make_item, quote_window, spread_sample, strip_span, topic_words)


# a sentence ends after . ! ? before a capital, at a blank line, and before a play's speech heading
_SENT_BREAK = re.compile(
    r"[.!?]+[\"”’')\]_]*(?=\s+[\"“‘'(\[_]*[A-Z])|\n[ \t]*\n|\n(?=[A-Z][A-Za-z'\- ]{0,30}\.[ \t]*\n)"
)
_ABBREV = frozenset(
    "Mr Mrs Ms Dr St Mme Mlle M Messrs Capt Col Gen Lt Sr Jr No Vol vol p pp Rev Hon Esq Prof Sq Mt".split()
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
_TITLE_NAME = re.compile(rf"\b(?:{TITLES})\.?[ \n]+{_CAP}(?:[ \n]{_CAP})?\b")
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
    place_cue = Counter(squash(p) for p in _PLACE_CUE.findall(text))

    def rare_lower(w: str) -> bool:
        return (
            w not in NAME_STOP
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
    persons |= {t for t, c in titled.items() if c >= min_count and t.split()[-1] not in NAME_STOP}
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
    if len(words) == 3 and words[2] in NAME_STOP:
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
_PART_OF_NAME = re.compile(rf"(?:\b[A-Z][a-z]+|\b(?:{TITLES})\.?)[ \n]+$")
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
        it = make_item(
            text, rng, phrasings, "character", {"name": name}, a, b, fit_passage(text, s, e, a, b, ix.bounds)
        )
        if it:
            items.append(it)
    return items


_NAME_RX = rf"(?:(?:{TITLES})\.?\s+)?{_CAP}(?:[ ]{_CAP})?"
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


def _speaker_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """ "Who said '...'?" from quotations attributed to a named speaker (said X / X said)."""
    text = ix.text
    cands = set()
    for rx in _SPEAKER_PATTERNS:
        for m in rx.finditer(text):
            if m.group("name").split()[-1] in NAME_STOP:  # "said The ...", "said Mrs" alone
                continue
            cands.add((m.start("q"), m.end("q"), m.start("name"), m.end("name"), m.start(), m.end()))
    items = []
    for qs, qe, a, b, ms, me in spread_sample(list(cands), 3 * MAX_PER_TYPE, rng, pos=lambda c: c[0]):
        w = quote_window(text, qs, qe, rng)
        if w is None or not is_unique(text, *w):
            continue
        i, j = ix.sentence_at(ms), ix.sentence_at(me - 1)
        lo = ix.sents[i][0] if i is not None else ms
        hi = ix.sents[j][1] if j is not None else me
        passage = fit_passage(text, lo, hi, min(w[0], a), max(w[1], b), ix.bounds)  # quote and name
        it = make_item(text, rng, phrasings, "speaker", {"quote": squash(text[w[0] : w[1]])}, a, b, passage)
        if it and it.passage_start <= w[0] and w[1] <= it.passage_end:
            items.append(it)
    return items


_NUMW = "|".join(sorted(NUM_WORDS, key=len, reverse=True))
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
        topic = passage and topic_words(text, *passage, (a, b + len(noun) + 1), ix.freq)
        if not topic:
            continue
        slots = {"topic": topic, "what": what, "noun": noun}
        it = make_item(text, rng, phrasings, "number", slots, a, b, passage)
        if it:
            items.append(it)
    return items


def _place_items(ix: BookIndex, rng, phrasings) -> list[QAItem]:
    """ "Which place ..." from sentences naming exactly one known place after in/at/from/near/into."""
    text = ix.text
    per_sent: dict[int, list] = {}
    for m in _PLACE_CUE.finditer(text):
        p = squash(m.group(1))
        if p not in ix.places:
            first = p.split()[0]
            if first not in ix.places:
                continue
            p = first
        i = ix.sentence_at(m.start())
        if i is not None:
            a = m.start(1)
            per_sent.setdefault(i, []).append(
                (a, a + len(m.group(1)) if p == squash(m.group(1)) else a + len(p))
            )
    cands = [(i, v[0]) for i, v in per_sent.items() if len(v) == 1 and ix.substantive(i)]
    items = []
    for i, (a, b) in spread_sample(cands, 2 * MAX_PER_TYPE, rng, pos=lambda c: c[1][0]):
        passage = fit_passage(text, *ix.sents[i], a, b, ix.bounds)
        topic = passage and topic_words(text, *passage, (a, b), ix.freq)
        if not topic:
            continue
        it = make_item(text, rng, phrasings, "place", {"topic": topic}, a, b, passage)
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
        it = find_item(text, rng, phrasings, s, e, ix.bounds)
        if it:
            items.append(it)
    return items


def mine_book(text: str, rng: random.Random, phrasings: str = "train", play: bool = False) -> list[QAItem]:
    """Character, speaker, number, place and find items from a book, poem or (play=True) play."""
    ix = BookIndex(text)
    by_type: dict[str, list[QAItem]] = {}
    if play:  # the dramatis personae and speakers are people, whatever "from Cordelia" suggests
        people = {w.title() for m in SPEECH_TAG.finditer(text) for w in m.group("tag").split()}
        people |= {w.title() for m in personae(text) for w in m.group("name").split()}
        ix.places = {p for p in ix.places if not set(p.split()) & people}
        by_type["character"] = play_characters(text, rng, phrasings)
        by_type["speaker"] = play_speakers(text, rng, phrasings)
    else:
        by_type["character"] = _character_items(ix, rng, phrasings)
        by_type["speaker"] = _speaker_items(ix, rng, phrasings)
    by_type["number"] = _number_items(ix, rng, phrasings)
    by_type["place"] = _place_items(ix, rng, phrasings)
    by_type["find"] = _book_find_items(ix, rng, phrasings)
    return bounded(by_type, rng)
