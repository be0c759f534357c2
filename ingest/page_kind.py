"""What a page is: a licence page, a contents list or an index, told from its text (`matter_of`).

Apart from ingest.boilerplate, which tags a document's chunks with it (and with a paper's reference
list, which ingest.parts finds), so that ingest.parts can tell such pages from the text without
importing the tagging.
"""

from __future__ import annotations

import re

LICENCE_MARKERS = ("project gutenberg", "gutenberg literary archive", "gutenberg-tm", "gutenberg™",
                   "electronic works", "this ebook is for the use of anyone", "terms of the project gutenberg",
                   "full project gutenberg license", "donations", "trademark")
_NUMBERED_LINE = re.compile(r"^\s*(chapter|book|part|section|[ivxlc]+\.|\d+\.?)\b.{0,80}$", re.I | re.M)
_INDEX_LINE = re.compile(r"^.{1,60},\s*\d+(\s*[,–-]\s*\d+)*\.?\s*$", re.M)  # "Formica flava, 239." too
_LEADER_LINE = re.compile(r"^\s*(?P<head>\S.{0,100}?)(?:\s?\.){4,}\s*[\dxivlc]+\s*$", re.M | re.I)  # "1.2 X . . 3"
# a chapter named by its number ("CHAPTER XII", "Chapter 12"): a contents list names many on one page,
# even when its entries run on as one paragraph (a PDF made from a plain-text edition)
_CHAPTER_NAMED = re.compile(r"\bchapter\s+([ivxlc]{1,7}|\d{1,3})\b", re.I)
CONTENTS_CHAPTERS = 6  # distinct chapters named on one page, at most CONTENTS_CHARS characters apart on average:
CONTENTS_CHARS = 200   # its contents list (prose names one or two; a commentary chapter by chapter, a paragraph each)
# the line a Project Gutenberg edition's header ends with ("*** START OF THIS PROJECT GUTENBERG EBOOK THE
# TIME MACHINE ***", its title wrapped over two lines in a PDF): the book's own text follows it, often on
# the same page
# the line a Project Gutenberg edition ends its text with; the licence follows it, on the same page
GUTENBERG_END = re.compile(r"\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG EBOOK"
                           r"|End of (?:the )?Project Gutenberg'?s? (?:EBook|E-text|Etext)?", re.I)
GUTENBERG_START = re.compile(r"\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^*]{0,200}?\*\*\*", re.I)


def matter_of(text: str) -> str | None:
    """"licence" when the page speaks of the Gutenberg licence (two markers or more), "contents"
    when most of its non-empty lines are short numbered headings or it names CONTENTS_CHAPTERS
    chapters by number or more, close together, "index" when most are
    "term, page" lines; most lines led by dots to a page number ("2.1 Naming . . . 3",
    "asn1_copy_node . . . 11") are "contents" when most are numbered, else "index"; None for
    ordinary text. A page that holds a Gutenberg header's end line (GUTENBERG_START) with more of the
    book's text after it than header before it is judged by that text alone: the book has begun."""
    start = GUTENBERG_START.search(text)
    if start and len(text[start.end():].strip()) > len(text[:start.start()].strip()):
        text = text[start.end():]
    low = text.lower()
    if sum(m in low for m in LICENCE_MARKERS) >= 2:
        return "licence"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) >= 8:
        if len(_INDEX_LINE.findall(text)) >= 0.6 * len(lines):
            return "index"
        leaders = [m.group("head") for m in _LEADER_LINE.finditer(text)]
        if len(leaders) >= 0.6 * len(lines):  # dot leaders: a contents list, or an index of terms
            numbered = sum(bool(_NUMBERED_LINE.match(h) or re.match(r"[A-Z](\.\d+)+\b", h)) for h in leaders)
            return "contents" if numbered >= 0.5 * len(leaders) else "index"
        if len(_NUMBERED_LINE.findall(text)) >= 0.6 * len(lines):
            return "contents"
    named = _CHAPTER_NAMED.findall(text)  # distinct chapters: prose may name its own chapter often
    if len({n.lower() for n in named}) >= CONTENTS_CHAPTERS and len(text.strip()) <= CONTENTS_CHARS * len(named):
        return "contents"
    return None
