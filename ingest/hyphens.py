"""Words a PDF hyphenated at a line's end, joined again where the document says they are one word.

A typeset page breaks "memory" as "mem-" / "ory"; read as it is, the word is lost to search, to the
tokenizer, to names ("Mousque-" / "ton") and to every quote ("a mem- ory"). But a line may also end
in a real hyphen ("cucumber-" / "frame"). So a broken word is joined only where the document itself
writes the joined form more often than the hyphenated one elsewhere, or, written neither way, where
the joined form is a known word (the shipped encoder's vocabulary, ingest.glyphs.lexicon) or the
second half is no word at all ("luxu-" / "riant"); otherwise it stays as printed ("in-" / "law").
The rest of the line moves down with its second half:

    "a mem-\\nory of" -> "a memory\\nof"

The parser joins a PDF's pages (ingest.parse); the page view joins the page's words the same way,
so its highlight still finds "memory" on the page (ingest.page).
"""

from __future__ import annotations

import re
from collections import Counter

from .glyphs import lexicon

_BROKEN = re.compile(r"([^\W\d_]+)-\n([ \t]*)([a-zà-öø-ÿ][^\W\d_]*)([ \t]+|(?![\w-]))")  # 2nd half lower case
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


def join_pages(pages: list[str]) -> list[str]:
    """The pages with their line-end hyphenations joined where the document tells (see above); a
    word broken over a page break goes whole to the page it starts on."""
    whole = "\n".join(pages)
    counts = Counter(w.lower() for w in _WORD.findall(_BROKEN.sub(" ", whole)))
    lex = lexicon()

    def join(m: re.Match) -> str:
        left, indent, right, space = m.groups()
        joined, hyphened = (left + right).lower(), f"{left}-{right}".lower()
        unseen = not counts[hyphened] and not counts[joined]
        fragment = right.lower() not in lex and not counts[right.lower()]  # "luxu-" / "riant"; not "in-" / "law"
        if counts[joined] > counts[hyphened] or (unseen and (joined in lex or fragment)):
            return f"{left}{right}\n{indent}" if space else f"{left}{right}"  # ("rade." : the lines join)
        return m.group()

    out = [_BROKEN.sub(join, p) if "-\n" in p else p for p in pages]
    for i in range(len(out) - 1):  # "punc-" at a page's foot, "tuality." at the next one's head
        m = re.search(r"([^\W\d_]+)-$", out[i])
        nxt = re.match(r"\s*([a-zà-öø-ÿ][^\W\d_]*)([^\w\s]*)[ \t]*", out[i + 1])
        if m and nxt:
            glued = join(_BROKEN.match(f"{m.group(1)}-\n{nxt.group(1)} "))
            if "-" not in glued:  # joined: the word (and its stop) goes to the page it starts on
                out[i] = out[i][:m.start()] + m.group(1) + nxt.group(1) + nxt.group(2)
                out[i + 1] = out[i + 1][nxt.end():]
    return out


def joined_words(words: list[str], text: str) -> list[tuple[list[int], str]]:
    """A page's words (`page.get_text("words")`) with each hyphenated pair the stored text `text`
    holds joined ("mem-", "ory" -> "memory"): [(the page words' indices, the word)]."""
    have = {w.lower() for w in _WORD.findall(text)}
    out: list[tuple[list[int], str]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.endswith("-") and i + 1 < len(words):
            m = re.match(r"([^\W\d_]+)([^\w]*)$", words[i + 1])
            left = re.search(r"([^\W\d_]+)-$", w)
            if m and left and (left.group(1) + m.group(1)).lower() in have and f"{left.group(1)}-{m.group(1)}".lower() \
                    not in have:
                out.append(([i, i + 1], w[:-1] + words[i + 1]))
                i += 2
                continue
        out.append(([i], w))
        i += 1
    return out
