"""A document's parts (chapters, sections): what a summary covers one by one, and `--chapter N`.

Four sources, tried in order:
  outline   a PDF's bookmarks (stored at ingest; a PDF with none, or one, gets its numbered section
            headings set in bold larger than its text: ingest.pdf_structure.styled_headings): the level with
            the most entries, and a shallower entry with no part among its children or half a page of
            its own text before the first (a paper's Introduction, Open Problems), boilerplate entries
            ("Contents", "Index", the licence) left out; a part starts where its title is printed on
            its page (the page's start when the title is not found there; of two titles placed at one
            position, the first), or where the shallower entry above it that makes no part is printed
            (an appendix's heading opens its first subsection's part, never ends the part before)
  headings  lines that look like headings in the text, after a blank line: "CHAPTER IV", "Book V",
            "Lecture II. ...", "12 THE JOURNEY" (a number and a title in capitals), a lone Roman
            numeral, or TeX's \\chapter / \\section. Each form (indented or not) is a family; the
            family with the most headings (at least 2, spread over a quarter of the text) makes the
            parts. A run of headings closer than a few lines apart is a contents list, and a title
            that recurs with a page number (a page's running head) is no heading either, though the
            heading it repeats stays. When the family's first heading is numbered n > 1 ("Chapter 2"),
            the last line before it that reads as heading n - 1 opens the family even without a
            blank line before it (a PDF prints "Chapter 1" in the title's text block). A heading right
            under a part's, book's or volume's heading ("PART THE SECOND--SPRING", "BOOK TWO: 1805")
            starts there and is titled with it: chapters numbered afresh in each part say whose they are.
  sections  lines numbered and titled as a licence's or a report's sections ("0. Definitions.",
            "1. Source Code.", a blank line before them or not: `numbered_sections`), when no
            heading family is found
  pages     equal page spans (about the square root of the page count, 2 to 20 parts), when
            none of these is found.
Text before the first part (title page, preface) is part 0 only when it is long enough to matter
(a tenth of the document); otherwise it joins part 1.
A paper's one "References" (or "Bibliography") line starts a part of its own, "back matter", whatever
the source: bookmarks often leave it out.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import asdict, dataclass

from .page_kind import GUTENBERG_END, GUTENBERG_START, matter_of
from .errors import IngestError

MIN_CONTENTS_GAP = 400  # characters: headings closer than this to the next of their family are a contents list
OWN_TEXT_PAGES = 0.5  # pages (the mean) of its own text that make a bookmark above the parts' level a part
MIN_SPAN = 0.25  # a family's headings must spread over a quarter of the text at least
_NUM_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
              r"sixteen|seventeen|eighteen|nineteen|twenty|first|second|third|fourth|fifth|sixth|seventh|"
              r"eighth|ninth|tenth|last")
_KEYWORDS = r"chapter|book|part|lecture|section|sect\.|act|scene|letter|stave|canto|volume|essay|article"
HEADING_FORMS = (
    # "PART THE FIRST--WINTER" (Under the Greenwood Tree), "BOOK THE SECOND: RICHES" (Little Dorrit)
    ("keyword", re.compile(rf"^(?P<key>{_KEYWORDS})\s+(?:[ivxlcdm]+|\d+|(?:the\s+)?(?:{_NUM_WORDS}))\b[^\n]{{0,80}}$",
                           re.I)),
    ("numbered", re.compile(r"^\d{1,3}\.?\s+[A-Z][A-Z0-9 ,;:’'\".!?()—–-]{2,80}$")),
    ("roman", re.compile(r"^[IVXLC]{1,7}\.?(?:\s+[A-Z][A-Z0-9 ,;:’'\".!?()—–-]{2,80})?$")),
    ("tex", re.compile(r"^\\(?P<key>chapter|section)\*?\{(?P<title>[^\n]{0,120})\}")),
)
_BOILER_TITLES = re.compile(r"^\s*(contents|table of contents|index|the full project gutenberg|"
                            r".*project gutenberg|.*licen[cs]e)\b", re.I)


@dataclass
class Part:
    number: int  # 1-based; 0 for front matter long enough to be a part of its own
    title: str
    char_start: int
    char_end: int
    page_first: int
    page_last: int
    source: str  # "outline" | "headings" | "pages" | "front matter" | "back matter"

    def to_json(self) -> dict:
        return asdict(self)


def _page_of(pages: list[dict], pos: int) -> int:
    starts = [p["char_start"] for p in pages]
    return pages[max(0, bisect_right(starts, pos) - 1)]["number"]


def _from_outline(outline: list[dict], pages: list[dict]) -> list[tuple[str, int]]:
    """(title, char start) of the bookmarks of the best level, and of the shallower ones that open
    text of their own: a paper's "Introduction" or "Open Problems" beside the subsections of its other
    sections (see `_own_text`)."""
    entries = [o for o in outline if not _BOILER_TITLES.match(o["title"])]
    if not entries:
        return []
    levels = sorted({o["level"] for o in entries}, key=lambda lv: (-sum(o["level"] == lv for o in entries), lv))
    by_number = {p["number"]: p for p in pages}
    placed = []  # (entry, char start) of the entries on a page of the document
    for o in entries:
        if o["page"] not in by_number:
            continue
        pg = by_number[o["page"]]
        at = _find_title(pg.get("text") or "", o["title"])
        placed.append((o, pg["char_start"] + (at if at >= 0 else 0)))
    keep = _own_text(placed, levels[0], OWN_TEXT_PAGES * pages[-1]["char_end"] / len(pages) if pages else 0)
    return [(o["title"], pos) for o, pos in _opened_by_parent(placed, keep, levels[0])]


def _opened_by_parent(placed: list[tuple[dict, int]], keep: list[bool], level: int) -> list[tuple[dict, int]]:
    """The kept bookmarks, each first kept child of a shallower bookmark that makes no part starting
    at that bookmark's heading: an appendix's heading and its few lines before its first subsection
    ("A Further Analysis and Extensions of Algorithm 1", itcs20 p. 50) open that subsection's part;
    they ran on at the end of the part before it (there, the References, and appendix C's 900
    characters of its own under "Bounding Block Sizes")."""
    out, opener = [], None  # opener: where the unkept shallower bookmarks above the next kept one begin
    for (o, pos), kept in zip(placed, keep):
        if kept:
            out.append((o, min(pos, opener) if opener is not None else pos))
            opener = None
        elif o["level"] < level and opener is None:
            opener = pos
    return out


def _own_text(placed: list[tuple[dict, int]], level: int, min_chars: float) -> list[bool]:
    """Which bookmarks make parts: those of `level`, and each shallower one with no part among its
    children (itcs20's Open Problems) or with `min_chars` of text or more before its first child that
    makes one (itcs20's Introduction: 4 pages before its Related Work; Sections 3-5: 0.7-0.9 of a page);
    deeper ones join the part they lie in. The shallower ones are decided deepest first, so a kept
    section counts as a part for its chapter."""
    keep = [o["level"] == level for o, _ in placed]
    for lv in sorted({o["level"] for o, _ in placed if o["level"] < level}, reverse=True):
        for i, (o, pos) in enumerate(placed):
            if o["level"] != lv:
                continue
            inside = []  # the children that make parts, up to the next entry at this level or shallower
            for j in range(i + 1, len(placed)):
                if placed[j][0]["level"] <= lv:
                    break
                inside += [placed[j][1]] if keep[j] else []
            keep[i] = not inside or inside[0] - pos >= min_chars
    return keep


def _find_title(text: str, title: str) -> int:
    """Where `title` is printed in `text` (case and spacing ignored), or -1."""
    words = re.findall(r"\w+", title)
    if not words:
        return -1
    m = re.search(r"\W+".join(map(re.escape, words)) + r"(?!\w)", text, re.I)  # "Chapter 1" is not "Chapter 12"
    return m.start() if m else -1


def headings(text: str) -> list[tuple[str, int]]:
    """(title, char start) of the headings of the most frequent family (see the module docstring)."""
    fams: dict[str, list[tuple[str, int]]] = {}
    run_in: dict[str, list[tuple[str, int]]] = {}  # keyword headings with no blank line before (a PDF's text)
    prev_blank = True
    pos = 0
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if s and len(s) <= 100:
            for name, rx in HEADING_FORMS:
                m = rx.match(s) if prev_blank or name == "keyword" else None
                if m:
                    key = m.groupdict().get("key")
                    fam = f"{name}:{key.lower()}" if key else name
                    fam += ":indented" if line[:1].isspace() else ""  # a centred contents list is its own family
                    title = m.group("title") if name == "tex" else s
                    hit = (title.strip(), pos + line.index(s[0]))
                    run_in.setdefault(fam, []).append(hit) if name == "keyword" else None
                    if prev_blank:
                        fams.setdefault(fam, []).append(hit)
                    break
        prev_blank = not s or (s.startswith("\\") and not s.startswith("\\section") and not s.startswith("\\chapter"))
        pos += len(line)
    # a PDF's text keeps no blank line between a heading and the paragraph before it, so a chapter that
    # opens mid-page ("...went home.\nCHAPTER V. Anne's History\n...") reads as a keyword line anywhere;
    # such lines count only as the chain numbered 1, 2, 3 ... (a line of prose that opens with "Chapter
    # 3" rarely extends it)
    for fam, hits in run_in.items():
        chain = _numbered_chain(_not_contents(hits))
        if len(chain) > len(fams.get(fam, ())):
            fams[fam] = chain
    best: list[tuple[str, int]] = []
    best_fam = ""
    for fam, hits in fams.items():
        # running heads ("CHAPTER 1. ANCESTRY 3", "... 4" atop every page) repeat their title: not headings
        # the heading itself ("Chapter 1", no page number) stays though its running head repeats its words
        seen = Counter(_running(t) for t, _ in hits if _running(t) != t)
        hits = [h for h in hits if _running(h[0]) == h[0] or seen[_running(h[0])] < 3 or fam.startswith("tex")]
        kept = _not_contents(hits)
        if len(kept) < 2 or kept[-1][1] - kept[0][1] < MIN_SPAN * len(text):
            continue  # a contents list: its headings sit together at one end of the text
        if len(kept) > len(best):
            best, best_fam = kept, fam
    if not best:
        return best
    best = _missing_first(text, best, best_fam)
    if best_fam.startswith("tex"):
        return best
    # a PDF's heading set over two lines after a blank one too ("CHAPTER V. Advice from a" / "Caterpillar")
    return _in_divisions(text, _after_last(text, [(_wrapped_title(text, t, pos), pos) for t, pos in best]), fams,
                         best_fam)


_DIVISIONS = ("part", "book", "volume")


def _last_of_each(headings: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The headings whose words (case and punctuation aside) no later one repeats: a contents list's
    entry is printed again as the heading itself."""
    words = [" ".join(re.findall(r"\w+", t.lower())) for t, _ in headings]
    return [h for i, h in enumerate(headings) if words[i] not in words[i + 1:]]


def _in_divisions(text: str, best: list[tuple[str, int]], fams: dict[str, list[tuple[str, int]]],
                  best_fam: str) -> list[tuple[str, int]]:
    """The headings, each one right under a part's, book's or volume's heading (another family's,
    within MIN_CONTENTS_GAP characters) titled and started with it: "PART THE SECOND--SPRING, CHAPTER I:
    PASSING BY THE SCHOOL". Under the Greenwood Tree numbers its chapters afresh in each of its five
    parts, and its outline listed "CHAPTER I" five times with nothing to say which part each opened
    (walk 12), the part's heading left at the end of the chapter before; so do War and Peace's books.
    When the chapters are numbered afresh under their divisions (`_afresh`), each later chapter says
    whose it is too, by the divisions' keywords and numbers ("PART THE SECOND, CHAPTER II: A MEETING OF
    THE QUIRE"): its "CHAPTER II" recurred five times in the outline and the summary's menu."""
    key = best_fam.split(":")[1] if best_fam.startswith("keyword:") else ""
    divs = sorted((h for fam, hits in fams.items() if fam.startswith("keyword:") and fam.split(":")[1] != key
                   and fam.split(":")[1] in _DIVISIONS for h in _not_contents(hits)), key=lambda h: h[1])
    # a contents list's last entry recurs as the heading ("PART SIXTH" above Jude the Obscure's "Part
    # First"); a line ending with a colon introduces something ("Volume one begins:", Grant's Memoirs)
    divs = [d for d in _last_of_each(divs) if not d[0].endswith(":")]
    divs = [d for d in divs if d[0][:1].isupper()]  # a heading opens with a capital ("part I have quoted them")
    passed, aboves, prev = [], [], -1
    for title, pos in best:
        passed.append([d for d in divs if prev < d[1] < pos])  # the divisions' headings since the heading before
        above = []  # those right above this one, nearest last ("VOLUME I", "BOOK FIRST")
        for t, p in reversed(passed[-1]):
            if (above[0][1] if above else pos) - p >= MIN_CONTENTS_GAP:
                break
            above.insert(0, (t, p))
        aboves.append(above)
        # one further above is a contents list's entry when a "CONTENTS" line comes before it, after the
        # heading before, with no paragraph of prose between (Notre-Dame's second volume lists "BOOK
        # TENTH. I. Gringoire has Many Good Ideas ..." above its seventh book's first chapter)
        passed[-1] = [d for d in passed[-1] if d in above or not _listed(text, max(prev, 0), d[1])]
        prev = pos
    afresh = _afresh(best, passed)
    out: list[tuple[str, int]] = []
    within: list[tuple[str, str, str, int]] = []  # (kind, label, heading, position) of the divisions it lies in
    groups = [_group(got) for got in passed]
    above_of = {(a[0], b[0]) for g in groups for a, b in zip(g, g[1:])}  # "volume" above "book": one after another
    for (title, pos), group, above in zip(best, groups, aboves):
        if group:  # a heading replaces the divisions of its kind and those inside it
            within = [w for w in within if _higher(w[0], group[0][0], above_of)] + group
        if afresh:  # the divisions right above by their headings, the others by their labels
            heads = [h if p in {q for _, q in above} else label for _, label, h, p in within]
        else:
            heads = [t for t, _ in above]
        out.append((", ".join(heads + [title]), above[0][1] if above else pos))
    return out


def _afresh(best: list[tuple[str, int]], passed: list[list[tuple[str, int]]]) -> bool:
    """Whether the chapters are numbered afresh in their divisions: after more than half the division
    headings past the first chapter, the next chapter is numbered lower than the one before it
    (Under the Greenwood Tree, War and Peace, Emma; not Middlemarch, whose chapters run on through
    its books)."""
    restarts = []
    for i in range(1, len(best)):
        if passed[i]:
            a, b = heading_number(best[i - 1][0]), heading_number(best[i][0])
            if a is not None and b is not None:
                restarts.append(b[1] < a[1])
    return sum(restarts) * 2 > len(restarts) > 0


_CONTENTS_LINE = re.compile(r"^[ \t]*(?:table of )?contents\.?[ \t]*$", re.I | re.M)


def _listed(text: str, start: int, pos: int) -> bool:
    """Whether the line at `pos` lies in a contents list: after a "CONTENTS" line at `start` or later,
    with no paragraph of prose (`prose`) between."""
    got = None
    for got in _CONTENTS_LINE.finditer(text, start, pos):
        pass
    return got is not None and not any(map(prose, re.split(r"\n[ \t]*\n", text[got.end():pos])))


_ENTRY = re.compile(rf"\s*(?:(?i:{_KEYWORDS})\s+(?i:[ivxlcdm]+|\d+|the|{_NUM_WORDS})\b|[IVXLC]+\.\s|\d+\.?\s)")


def prose(paragraph: str) -> bool:
    """Whether a paragraph reads as prose, not a heading or a list of titles: 150 characters or more,
    most of its words in lower case (a contents list capitalises its titles' words), not opening as
    a numbered entry does ("Chapter iii -- An odd accident which befel Mr Allworthy ...", Tom Jones's
    contents list, "I. Of the difference between ...") or as front matter's heading ("Preface").
    """
    words = re.findall(r"[^\W\d_]+", paragraph)
    return (len(paragraph) >= 150 and sum(w[0].islower() for w in words) >= 0.6 * len(words)
            and not _ENTRY.match(paragraph) and not _FRONT.match(paragraph.lstrip()))


_DIVISION_LABEL = re.compile(rf"^(?P<key>part|book|volume)\s+(?:the\s+)?(?:[ivxlcdm]+|\d+|{_NUM_WORDS})\b", re.I)


def _group(got: list[tuple[str, int]]) -> list[tuple[str, str, str, int]]:
    """The division headings passed since the chapter before as (kind, label, heading, position)
    ("volume", "VOLUME II", "VOLUME II.--COSETTE", ...), the higher first ("VOLUME II", "BOOK FIRST"),
    each replacing one of its kind before it and those after that one."""
    group: list[tuple[str, str, str, int]] = []
    for t, p in got:
        m = _DIVISION_LABEL.match(t)
        if m is not None:
            kind = m.group("key").lower()
            group = group[:next((i for i, g in enumerate(group) if g[0] == kind), len(group))]
            group.append((kind, m.group(0), t, p))
    return group


def _higher(a: str, b: str, above_of: set[tuple[str, str]]) -> bool:
    """Whether divisions of kind `a` hold those of kind `b`: as the document prints them one after the
    other ("PART I" then "Book I" in The Brothers Karamazov, "BOOK I" then "PART I" in Hume's
    Treatise), else volume, part, book in that order."""
    if (a, b) in above_of or (b, a) in above_of:
        return (a, b) in above_of
    return _DIVISIONS_ORDER.index(a) < _DIVISIONS_ORDER.index(b)


_DIVISIONS_ORDER = ("volume", "part", "book")


_CLOSING = re.compile(r"^(?:epilogue|afterword|postscript|l[’']envoi)\b[^\n]{0,60}$", re.I)


def _after_last(text: str, best: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The headings, and after the last one an "EPILOGUE" (afterword, postscript) printed as a line of
    its own after a blank one, before any Gutenberg licence: The Time Machine's epilogue read as the
    end of chapter XII (walk 11). Before the first heading a contents list may name it, so only after."""
    end = GUTENBERG_END.search(text, best[-1][1])  # (the licence's first line)
    stop = end.start() if end else len(text)
    pos = text.find("\n", best[-1][1])
    prev_blank = False
    while 0 <= pos < stop:
        nxt = text.find("\n", pos + 1)
        line = text[pos + 1: nxt if nxt >= 0 else len(text)]
        s = line.strip()
        if s and prev_blank and _CLOSING.match(s) and pos + 1 < stop:
            return best + [(s, pos + 1 + line.index(s[0]))]
        prev_blank = not s
        pos = nxt
    return best


_TITLE_SMALL = frozenset("a an and as at by for from in into of on or the to with".split())
_NOT_TITLE = re.compile(r"[.,;:!?\"“”‘’()\[\]]")


def _wrapped_title(text: str, title: str, pos: int) -> str:
    """A PDF's heading set over two lines ("CHAPTER I. Mrs. Rachel Lynde is" / "Surprised"): the title
    and its next line, when the title ends without punctuation and that line is short, in title case
    and without a sentence's marks (not the first line of the chapter's text, nor a line of speech)."""
    end = text.find("\n", pos)
    if end < 0 or _NOT_TITLE.search(title[-1:]):
        return title
    stop = text.find("\n", end + 1)
    nxt = text[end + 1: stop if stop >= 0 else len(text)].strip()
    words = nxt.split()
    if (not words or len(nxt) > 40 or _NOT_TITLE.search(nxt.rstrip("?!")) or not any(w[:1].isupper() for w in words)
            or not all(w[:1].isupper() or w in _TITLE_SMALL for w in words)):  # ("a Long Tale", "Tarts?")
        return title
    return f"{title} {nxt}"


def _not_contents(hits: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """A family's headings without a contents list's entries: a heading followed closely by the next of
    its family has no body; the last entry of a list (close to the one before) goes when its title recurs."""
    close = [i > 0 and h[1] - hits[i - 1][1] < MIN_CONTENTS_GAP for i, h in enumerate(hits)]
    return [h for i, h in enumerate(hits)
            if not (i + 1 < len(hits) and close[i + 1]) and not (close[i] and any(t == h[0] for t, _ in hits[i + 1:]))]


def _numbered_chain(hits: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The longest run of `hits` numbered 1 (or 2), then each the one before's number plus 1 or 2 (one
    heading may be missed), in the text's order: a book's chapters, not the prose lines that name one."""
    nums = [heading_number(t) for t, _ in hits]
    best: list[tuple[str, int]] = []
    for i, n in enumerate(nums):
        if n is None or n[1] > 2:
            continue
        run, last = [hits[i]], n[1]
        for h, m in zip(hits[i + 1:], nums[i + 1:]):
            if m is not None and last < m[1] <= last + 2:
                run.append(h)
                last = m[1]
        if len(run) > len(best):
            best = run
    return best


_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
_WORDS = {w: i for i, w in enumerate(("one two three four five six seven eight nine ten eleven twelve thirteen "
                                       "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split(), 1)}
_WORDS |= {w: i for i, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth".split(), 1)}


def _roman(s: str) -> int | None:
    s = s.lower()
    if not s or any(c not in _ROMAN for c in s):
        return None
    vals = [_ROMAN[c] for c in s]
    return sum(-v if i + 1 < len(vals) and v < vals[i + 1] else v for i, v in enumerate(vals))


def heading_number(title: str) -> tuple[str, int, str] | None:
    """("chapter", 2, "arabic") for "Chapter 2", ("", 4, "roman") for "IV. THE END": a heading's
    keyword (lower case; "" for none), its number and how the number is written."""
    m = re.match(rf"^(?:(?P<key>{_KEYWORDS})\s+(?:the\s+)?)?(?P<n>[ivxlcdm]+|\d+|{_NUM_WORDS})\b", title.strip(), re.I)
    if not m:
        return None
    tok, key = m.group("n"), (m.group("key") or "").lower()
    if tok.isdigit():
        return key, int(tok), "arabic"
    if tok.lower() in _WORDS:
        return key, _WORDS[tok.lower()], "word"
    n = _roman(tok)
    return (key, n, "roman") if n else None


def _missing_first(text: str, best: list[tuple[str, int]], fam: str) -> list[tuple[str, int]]:
    """The family's first headings when they open no blank-line block (a PDF prints "Chapter 1" right
    under the book's title, in one text block): while the first heading is numbered n > 1 ("Chapter 2"),
    the last line before it that reads as heading n - 1 of the same form ("Chapter 1", "CHAPTER I.")
    opens the family. Without it the text before "Chapter 2" would join part 1 under that title."""
    if fam.startswith("tex"):
        return best
    rx = dict(HEADING_FORMS)[fam.split(":")[0]]
    lines, pos = [], 0  # the lines before the first heading that read as headings of this form
    for line in text[:best[0][1]].splitlines(keepends=True):
        s = line.strip()
        if s and len(s) <= 100 and rx.match(s):
            lines.append((s, pos + line.index(s[0])))
        pos += len(line)
    while True:
        num = heading_number(best[0][0])
        if num is None or num[1] <= 1:
            return best
        # the last such line numbered n - 1 with a body after it (a contents list's entries have none)
        found = None
        for i, (s, p) in enumerate(lines):
            nxt = lines[i + 1][1] if i + 1 < len(lines) else best[0][1]
            got = heading_number(s)
            if got is not None and got[:2] == (num[0], num[1] - 1) and p < best[0][1] and nxt - p >= MIN_CONTENTS_GAP:
                found = (s, p)
        if found is None:
            return best
        best = [found] + best


def page_labels(library, doc_id: str) -> dict[int, str]:
    """A document's printed page labels by page number, what `pages_ref` prints."""
    return {p["number"]: p["label"] for p in library.pages(doc_id)}


def pages_ref(pages, labels: dict | None = None, escape=str) -> str:
    """"p. iv" / "pp. 12-14": the first and last of `pages` by their printed labels (the number
    without one), each passed through `escape` (Markdown output escapes them)."""
    a, b = (str((labels or {}).get(p) or p) for p in (pages[0], pages[-1]))
    return f"p. {escape(a)}" if a == b else f"pp. {escape(a)}-{escape(b)}"


def document_text(library, doc_id: str, pages_apart: bool = False) -> str:
    """The document's text as the chunk char spans index it (`joined_text` of its pages)."""
    return joined_text(library.pages(doc_id, with_text=True), pages_apart)


def joined_text(pages: list[dict], pages_apart: bool = False) -> str:
    """Each page's text at its char_start: the separators between pages, which belong to no page,
    become spaces, so a sentence runs on over a page break; with `pages_apart`, line breaks, so a
    page's first line starts a line (a heading atop a page, a statement's). After a page that ends
    with a line break (a text file's page, cut at a paragraph break) they are line breaks too: the
    paragraph break stays one, and a heading ending the page does not open the next page's sentence."""
    text = ""
    for p in pages:
        gap = "\n" if pages_apart or text.endswith("\n") else " "
        text += gap * max(p["char_start"] - len(text), 0) + p["text"]
    return text


def _running(title: str) -> str:
    """A heading's title without the page number a running head puts at its end or, on a left-hand
    page, at its start ("VOLUME I 12" -> "VOLUME I", "4 CONTENTS" -> "CONTENTS"); "Chapter 12" stays:
    a number after the keyword alone is the chapter's. A numbered heading ("12 THE JOURNEY") loses its
    number here too, but only a title seen three times or more with a number counts as a running head."""
    words = title.split()
    if len(words) > 2 and words[-1].isdigit():
        return " ".join(words[:-1])
    if len(words) >= 2 and words[0].isdigit():
        return " ".join(words[1:])
    return title


def equal_spans(n_pages: int) -> int:
    return max(2, min(20, round(math.sqrt(n_pages)))) if n_pages >= 4 else 1


def document_parts(library, doc_id: str) -> list[Part]:
    """The document's parts in order (see the module docstring); they tile the whole text."""
    pages = library.pages(doc_id, with_text=True)
    n_chars = pages[-1]["char_end"] if pages else 0
    starts: list[tuple[str, int]] = []
    source = "pages"
    text = joined_text(pages, pages_apart=True)  # a page opens after a blank line
    outline = library.outline(doc_id)
    if outline:
        starts, source = _from_outline(outline, pages), "outline"
    if len(starts) < 2:
        starts, source = _heading_starts(text, pages), "headings"
        if len(starts) < 2:
            starts = numbered_sections(text)
    if len(starts) >= 2:
        starts += _references(text, pages, starts)
    if len(starts) < 2:
        k = equal_spans(len(pages))
        per = len(pages) / k
        starts = [(f"pp. {pages[int(i * per)]['label']}-{pages[min(len(pages), int((i + 1) * per)) - 1]['label']}",
                   pages[int(i * per)]["char_start"]) for i in range(k)]
        source = "pages"
    at: dict[int, str] = {}
    for t, pos in starts:  # two titles at one place: the first stays ("Chapter 1" and "Chapter 2" on one page)
        if pos < n_chars:  # (a view cut at a page: none past its end)
            at.setdefault(pos, t)
    starts = sorted(at.items())
    # a heading printed twice in a row is a contents entry, then the chapter ("CHAPTER I. Down the
    # Rabbit-Hole" on the contents page and on the next): the later one starts the part
    starts = [st for i, st in enumerate(starts)
              if i + 1 >= len(starts) or " ".join(st[1].split()).lower() != " ".join(starts[i + 1][1].split()).lower()]
    if starts and source != "pages":  # a preface, an introduction: entries of their own before part 1
        starts = [(pos, t) for t, pos in front_matter(text, starts[0][0])] + starts
    parts: list[Part] = []
    if starts and starts[0][0] > 0:
        if starts[0][0] >= 0.1 * n_chars:
            parts.append(Part(0, "front matter", 0, starts[0][0], 1, 1, "front matter"))
        else:
            starts[0] = (0, starts[0][1])
    for i, (pos, title) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else n_chars
        parts.append(Part(i + 1, title, pos, end, 0, 0, source))
    for p in parts:
        p.source = "back matter" if _REFERENCES.fullmatch(p.title.strip()) else p.source
        p.page_first = _page_of(pages, p.char_start)
        p.page_last = _page_of(pages, max(p.char_start, p.char_end - 1))
    return parts


_FRONT = re.compile(
    r"^(?:the\s+)?(?:(?:author|authoress|translator|editor|publisher)(?:['’]?s)?\s+)?"
    r"(?:preface|introduction|introductory|foreword|prologue|dedication|prefatory|advertisement|to\s+the\s+reader)\b"
    r"|^(?:the\s+)?(?:author|translator|editor|publisher)(?:['’]?s)?\s+(?:note|to\s+the\s+reader)\b"
    r"|^note\s+to\s+the\s+(?:[\w-]+\s+){0,2}edition\b", re.I)
FRONT_PROSE_WITHIN = 3000  # characters: a front-matter heading's first paragraph of prose begins this close


def front_matter(text: str, end: int) -> list[tuple[str, int]]:
    """(title, char start) of the headings of front matter before `end` (the first part's start), after
    a Gutenberg header's end line: a line of its own after a blank one that opens with "Preface",
    "Introduction", "Foreword", "Prologue", "Dedication", "Advertisement", "To the Reader" ("AUTHOR’S
    PREFACE", "THE PUBLISHER TO THE READER.", "EDITOR'S NOTE", "NOTE TO THE THIRD EDITION"; not a
    PDF's running head, "PREFACE iii"), with a
    paragraph of prose (`prose`) under it within FRONT_PROSE_WITHIN characters, before the next such
    heading. A contents list's entries are none: its lines are no prose, and its last entry recurs as
    the heading (walk 12: Under the Greenwood Tree's PREFACE was read as the start of chapter I)."""
    start = GUTENBERG_START.search(text, 0, end)
    pos = start.end() if start else 0
    hits: list[tuple[str, int]] = []
    prev_blank = True
    for line in text[pos:end].splitlines(keepends=True):
        s = line.strip()
        if (s and prev_blank and len(s) <= 80 and s[0].isupper() and _FRONT.match(s)
                and not re.search(r"\s(?:\d+|[ivxlc]+)$", s)):  # "PREFACE iii": a PDF's running head
            hits.append((s, pos + line.index(s[0])))
        prev_blank = not s
        pos += len(line)
    hits = _last_of_each(hits)
    out = []
    for i, (title, at) in enumerate(hits):
        stop = min(hits[i + 1][1] if i + 1 < len(hits) else end, at + FRONT_PROSE_WITHIN)
        body = text[at + len(title):stop]
        if any(prose(m.group(0)) for m in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", body)):
            out.append((title, at))
    return out


_NUMBERED_LINE = re.compile(r"^[ \t]{0,4}(\d{1,2})\.[ \t]+([A-Z][^\n.]{2,70}?)\.?[ \t]*$", re.M)
_SMALL = frozenset("a an and as at but by for from in into its nor of on or over per the this that to upon via "
                   "with".split())
MIN_SECTION_GAP = 200  # characters: numbered titles closer than this to the next are a contents list


def numbered_sections(text: str) -> list[tuple[str, int]]:
    """(title, char start) of sections titled on a line of their own as "1. Source Code." (a licence,
    a contract, a report), blank line before or not: the title's words of three letters or more
    capitalised but the small ones ("of", "and", "with"); the sections numbered one after another
    (from 0 or 1, one number missed at most between two found; the longest such run), four or
    more, spread over a quarter of the text at least, none closer than MIN_SECTION_GAP characters
    to the next (a contents list)."""
    hits = []
    for m in _NUMBERED_LINE.finditer(text):
        title = m.group(2).strip()
        words = re.findall(r"[^\W\d_][\w'’-]*", title)
        if not words or any(len(w) >= 3 and w[0].islower() and w.lower() not in _SMALL for w in words):
            continue
        hits.append((int(m.group(1)), f"{m.group(1)}. {title}", m.start(1)))
    hits = [h for i, h in enumerate(hits) if i + 1 == len(hits) or hits[i + 1][2] - h[2] >= MIN_SECTION_GAP]
    best: list[tuple[int, str, int]] = []
    for i, h in enumerate(hits):  # the longest run from each start numbered 0 or 1
        if h[0] > 1:
            continue
        run = [h]
        for nxt in hits[i + 1:]:
            if run[-1][0] < nxt[0] <= run[-1][0] + 2:
                run.append(nxt)
        if len(run) > len(best):
            best = run
    if len(best) < 4 or best[-1][2] - best[0][2] < MIN_SPAN * len(text):
        return []
    return [(t, pos) for _, t, pos in best]


def _heading_starts(text: str, pages: list[dict]) -> list[tuple[str, int]]:
    """Headings not on a licence page (contents lists are told apart by their spacing: `headings`)."""
    kinds = {p["number"]: matter_of(p["text"]) for p in pages}
    return [(t, pos) for t, pos in headings(text) if kinds.get(_page_of(pages, pos)) != "licence"]


_REFERENCES = re.compile(r"(?:\d{1,2}\.?[ \t]+)?(?:references|bibliography)", re.I)
_REFERENCES_LINE = re.compile(rf"^[ \t]*({_REFERENCES.pattern})[ \t]*$", re.I | re.M)


def _references(text: str, pages: list[dict], starts: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """A paper's bibliography as a part of its own (back matter): its heading, the one line of the
    document that reads "References" or "Bibliography" (numbered or not) outside contents and licence
    pages, after the first part's start. A paper's bookmarks often leave it out (itcs20's run from
    Open Problems to the appendices, so its entries were quoted as sentences of the section before);
    a book with a list after each chapter has no such one line."""
    by_number = {p["number"]: p for p in pages}
    hits = [(m.group(1), m.start(1)) for m in _REFERENCES_LINE.finditer(text)
            if matter_of(by_number[_page_of(pages, m.start(1))]["text"]) not in ("contents", "licence")]
    return hits if len(hits) == 1 and hits[0][1] > min(pos for _, pos in starts) else []


def select(parts: list[Part], *, chapter: int | None = None, pages: tuple[int, int] | None = None) -> list[Part]:
    """The parts a summary covers: all but a paper's references (back matter: a bibliography's
    entries are no sentences of the paper), part number `chapter` (the references too, when asked
    for), or the page range cut into the parts it overlaps (each clipped to the range's characters
    by the caller)."""
    if chapter is not None:
        got = [p for p in parts if p.number == chapter]
        if not got:
            numbers = [p.number for p in parts]
            raise IngestError(f"no chapter {chapter}: this document has parts {numbers[0]}-{numbers[-1]} "
                              "(drt-reader outline DOC lists them)")
        return got
    if pages is not None:
        a, b = pages
        return [p for p in parts if p.page_last >= a and p.page_first <= b]
    return [p for p in parts if p.source != "back matter"] or parts
