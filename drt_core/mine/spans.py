"""What the miners share: sampling spread through a document, words and names to skip, answer spans
cut at word ends, gold passages fitted around an answer, the "find the passage" items, and the cap
of items per type (`bounded`)."""

from __future__ import annotations

import bisect
import random
import re
import string
from collections import Counter
from typing import Callable, Sequence

from .items import ANSWER_MAX_CHARS, MAX_PER_TYPE, PASSAGE_MAX, PASSAGE_MIN, QTYPES, QAItem, render, squash

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

NAME_STOP = frozenset(
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

TITLES = (
    "Mr|Mrs|Miss|Ms|Dr|Sir|Lady|Lord|Captain|Colonel|Major|General|Madame|Mme|Mademoiselle|Mlle|Monsieur|"
    "Father|Mother|Aunt|Uncle|Prince|Princess|Count|Countess|Baron|Baroness|Professor|Mistress|Master|"
    "Doctor|King|Queen|Duke|Duchess|Don|Herr|Frau|Signor|Signora|Squire|Judge|Brother|Sister"
)

WORD = re.compile(r"\S+")
ALPHA = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


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
    for i, m in enumerate(WORD.finditer(text, s, e)):
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


def topic_words(text: str, s: int, e: int, skip: tuple[int, int], freq: Counter, k: int = 4) -> str:
    """Up to `k` content words of text[s:e] outside `skip` (the answer), the rarest in the document
    first, given in sentence order: the "about {topic}" of number and place questions."""
    words = []
    for m in ALPHA.finditer(text, s, e):
        if skip[0] <= m.start() < skip[1] or m.end() - m.start() < 3:
            continue
        w = m.group()
        lw = w.lower()
        if "'" in w or "’" in w or lw in STOPWORDS or lw in NUM_WORDS or w in NAME_STOP:
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


def quote_keywords(quote: str) -> str:
    """A light paraphrase of a quote: its content words (function words and punctuation dropped)."""
    words = [w.strip(string.punctuation + "“”‘’_") for w in quote.split()]
    words = [w for w in words if w and w.lower() not in STOPWORDS]
    return " ".join(words) if len(words) >= 3 else ""


def is_unique(text: str, s: int, e: int) -> bool:
    """Whether text[s:e] occurs exactly once in `text` (a quote must point at one place)."""
    piece = text[s:e]
    return text.find(piece) == s and text.find(piece, s + 1) < 0


def make_item(text, rng, phrasings, qtype, slots, a, b, passage) -> QAItem | None:
    """Render a question and assemble the item, or None (no usable template / passage)."""
    if passage is None or b <= a:
        return None
    r = render(qtype, slots, rng, phrasings)
    if r is None:
        return None
    q, t = r
    return QAItem(q, text[a:b], qtype, t, a, b, passage[0], passage[1])


def find_item(text, rng, phrasings, s, e, sents=None, mask=None, keywords: bool = True) -> QAItem | None:
    """ "Find" item from the sentence [s, e): its first 40-60% of words are quoted (or, as a light
    paraphrase, 30% of the time, only their content words), the answer is the rest of the sentence."""
    src = mask if mask is not None else text
    words = list(WORD.finditer(src, s, e))
    n = len(words)
    if n < 8:
        return None
    k = max(3, min(n - 3, round(n * rng.uniform(0.4, 0.6))))
    q_end = words[k - 1].end()
    a, b = words[k].start(), words[-1].end()
    b = cap_end(src, a, b, 40)
    if b - a < 10 or not is_unique(text, s, q_end):
        return None
    quote = squash(text[s:q_end])
    kw = quote_keywords(quote) if keywords and rng.random() < 0.3 else ""
    slots = {"keywords": kw} if kw else {"quote": quote}
    return make_item(text, rng, phrasings, "find", slots, a, b, fit_passage(text, s, e, a, b, sents))


NUM_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand million score dozen""".split()
)


def quote_window(text: str, s: int, e: int, rng) -> tuple[int, int] | None:
    """A contiguous piece of 5-12 words of the quote [s, e) (all of it if short)."""
    words = list(WORD.finditer(text, s, e))
    if len(words) < 5:
        return None
    k = min(len(words), rng.randint(6, 12))
    i = rng.randrange(0, len(words) - k + 1)
    a, b = words[i].start(), words[i + k - 1].end()
    while b > a and text[b - 1] in ",;:.!?-—":
        b -= 1
    return a, b


def bounded(by_type: dict[str, list[QAItem]], rng: random.Random) -> list[QAItem]:
    """At most MAX_PER_TYPE items per type, spread through the document; sorted by position."""
    out = []
    for t in QTYPES:
        out += spread_sample(
            by_type.get(t, []), MAX_PER_TYPE, rng, pos=lambda it: (it.ans_start, it.question)
        )
    return sorted(out, key=lambda it: (it.ans_start, it.qtype, it.question))
