"""What a PDF's layout says beyond its text, read in ingest.parse's child process: the running heads
and the printed page numbers standing alone on a page's first or last line (taken out of the text),
and, for a PDF without bookmarks, its numbered section headings set in bold larger than its text (its
outline)."""

from __future__ import annotations

import re
from collections import Counter


_SECTION_NUMBER = re.compile(r"(\d{1,2}(?:\.\d{1,2})*)\.?")
_APPENDIX = re.compile(r"[A-Z]")  # an appendix's letter on a line of its own, its title on the next
_SECTION = re.compile(r"(\d{1,2}(?:\.\d{1,2})*)\.?\s+(\S.{0,98})")


def _bold(span: dict) -> bool:
    font = span.get("font", "")
    return bool(span.get("flags", 0) & 16) or "Bold" in font or "bold" in font or "CMBX" in font.upper()


def _mostly_bold(spans: list[dict]) -> bool:
    """A line set in bold: its first span and most of its characters (a title with math in it, ccc16's
    "Reconstruction for arbitrary rank" with "rank" in math italic, is still a heading)."""
    chars = sum(len(sp["text"].strip()) for sp in spans)
    return _bold(spans[0]) and 2 * sum(len(sp["text"].strip()) for sp in spans if _bold(sp)) > chars


def _joined(spans: list[dict]) -> str:
    """A line's spans as text, a space where the next span starts apart from the last (some PDFs
    place each word as a span of its own, with no space character between)."""
    out, x1 = "", None
    for sp in spans:
        gap = x1 is not None and sp["bbox"][0] - x1 > 0.15 * sp["size"]
        out += (" " if gap else "") + sp["text"]
        x1 = sp["bbox"][2]
    return " ".join(out.split())


def styled_headings(doc, flags: int) -> list[list]:
    """A PDF without bookmarks: its numbered top-level section headings, as bookmarks [1, title,
    page]. A heading is a line set in bold (mostly: `_mostly_bold`) at least a point larger than the
    body text (the size most of its characters have), reading "1 Introduction" or "2. Results", or a
    bold number or an appendix's capital letter alone whose next line (same size, bold) is the title.
    A line printed alike on three pages or more (a running head) is none. Kept: the chain numbered
    from 1 upwards, then lettered from A (a number or a letter may be missed), of two or more."""
    sizes: Counter = Counter()
    lines = []  # (page, size, bold, text)
    for pno in range(doc.page_count):
        tp = doc.load_page(pno).get_textpage(flags=flags)
        for block in tp.extractDICT().get("blocks", []):
            for line in block.get("lines", []):
                spans = [sp for sp in line.get("spans", []) if sp.get("text", "").strip()]
                if not spans:
                    continue
                text = _joined(spans)
                size = round(2 * max(sp["size"] for sp in spans)) / 2
                sizes[size] += len(text)
                if len(text) <= 100:
                    lines.append((pno + 1, size, _mostly_bold(spans), text))
    if not sizes:
        return []
    body = sizes.most_common(1)[0][0]
    seen = Counter(re.sub(r"\d+", "#", t) for _, _, _, t in lines)
    out: list[list] = []
    for i, (pg, size, bold, text) in enumerate(lines):
        if not bold or size < body + 1:
            continue
        m = _SECTION.fullmatch(text)
        if m:
            (number, title), printed = m.groups(), text
        elif (_SECTION_NUMBER.fullmatch(text) or _APPENDIX.fullmatch(text)) and i + 1 < len(lines):
            npg, nsize, nbold, ntext = lines[i + 1]
            if (npg != pg or nsize != size or not nbold or _SECTION_NUMBER.fullmatch(ntext)
                    or _APPENDIX.fullmatch(ntext)):
                continue
            number, title, printed = text.rstrip("."), ntext, ntext
        else:
            continue
        if seen[re.sub(r"\d+", "#", printed)] >= 3:
            continue  # a running head ("12 Journal of Tests" atop every page)
        if "." not in number and not title[:1].isdigit():
            out.append([1, f"{number} {title}", pg])
    # the sections in order from 1, then the appendices from A, one missed at most between two found (its
    # part joins the one before); a bold number elsewhere (a table's "3 4") numbers no chain
    chain, last, last_letter = [], 0, 0
    for entry in out:
        num = entry[1].split()[0]
        n = int(num) if num.isdigit() else 0
        letter = ord(num) - ord("A") + 1 if _APPENDIX.fullmatch(num) else 0
        if n and not last_letter and last < n <= last + 2:
            chain.append(entry)
            last = n
        elif letter and last and last_letter < letter <= last_letter + 2:
            chain.append(entry)
            last_letter = letter
    return chain if len(chain) >= 2 else []


_BARE_NUMBER = re.compile(r"\d{1,4}")


_ROMAN = re.compile(r"(?=[mdclxvi]+$)m{0,4}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})")
_ROMAN_VALUES = {"m": 1000, "d": 500, "c": 100, "l": 50, "x": 10, "v": 5, "i": 1}


def roman(word: str) -> int:
    """The value of a roman numeral written in one case ("lxxvii", "XIV"), else 0."""
    low = word.lower()
    if not word or word not in (low, word.upper()) or not _ROMAN.fullmatch(low):
        return 0
    vals = [_ROMAN_VALUES[c] for c in low]
    return sum(-v if i + 1 < len(vals) and v < vals[i + 1] else v for i, v in enumerate(vals))


_DIGITS = re.compile(r"\d+")
RUNNING_MIN = 3  # pages
RUNNING_NEAR = 2  # pages: a running head comes back on the next page or the one after


def _head_key(line: str) -> str:
    """A line as a running head is compared: without case, its page number ("#"), spaces collapsed."""
    words = [("#" if roman(w) else w) for w in _DIGITS.sub("#", line.lower()).split()]
    return " ".join(words)


def drop_running_heads(pages: list[list[str]]) -> int:
    """Take out, in place, the running heads: the line a page's top (or foot) repeats, the page
    number in it or not ("6 CONTENTS", "CONTENTS 7", "CCC'16", "REPORT OF LIEUTENANT-GENERAL
    GRANT"). Joined to the text they split the sentence running over the page break, as the page
    numbers did. A first (last) line counts as one where its form, page numbers aside, is the first
    (last) line of three pages or more, mostly within two pages of another (a line of dialogue that
    happens to end three scattered pages stays), and has two letters or more (an end-of-proof mark
    "◀" stays). Returns how many lines were taken out."""
    ends = _page_ends(pages)
    where: dict[tuple[str, str], list[int]] = {}  # (first | last, the line's form) -> the pages it ends
    found = []  # per page: {position: (line index, its key)}
    for i, (lines, at) in enumerate(ends):
        keys = {pos: (j, (pos, _head_key(lines[j]))) for pos, j in at.items()
                if at["first"] != at["last"] and len(lines[j].strip()) <= 90}  # a page's only line is no head
        for _, key in keys.values():
            where.setdefault(key, []).append(i)
        found.append(keys)
    heads = set()
    for key, at in where.items():
        near = sum(1 for a, b in zip(at, at[1:]) if b - a <= RUNNING_NEAR)
        if len(at) >= RUNNING_MIN and near >= 0.5 * (len(at) - 1) and len(re.findall(r"[^\W\d_]", key[1])) >= 2:
            heads.add(key)
    return _take_out(pages, ends, [{j for j, key in keys.values() if key in heads} for keys in found])


def _page_ends(pages: list[list[str]]) -> list[tuple[list[str], dict[str, int]]]:
    """Each page's lines and the indices of its first and last line with text ({} for a blank page)."""
    out = []
    for _, text in pages:
        lines = text.split("\n")
        filled = [j for j, line in enumerate(lines) if line.strip()]
        out.append((lines, {"first": filled[0], "last": filled[-1]} if filled else {}))
    return out


def _take_out(pages: list[list[str]], ends: list, drops: list[set[int]]) -> int:
    """Each page without its lines of `drops` (only first or last lines with text: what stays needs
    no other tidying), in place; how many lines were taken out."""
    taken = 0
    for page, (lines, _), drop in zip(pages, ends, drops):
        if drop:
            page[1] = "\n".join(x for j, x in enumerate(lines) if j not in drop).strip("\n")
            taken += len(drop)
    return taken


def drop_page_numbers(pages: list[list[str]]) -> int:
    """Take out, in place, the printed page number (arabic or roman) standing alone on a page's first or last line:
    joined to the next page's text it split sentences ("dynamically linked subprograms 4 that the
    work") and was quoted. A bare number counts as the page number where the document numbers its
    pages so: the same line (first or last) of three pages or more (of every page of a shorter
    document) holds page + a fixed offset, or the page's own label; a one-page document's own
    number. `pages`: [label, text] per page.
    Returns how many numbers were taken out."""
    ends = _page_ends(pages)
    found = []  # per page: {"first" | "last": (line index, its keys)}
    votes: Counter = Counter()
    for i, ((label, _), (lines, at)) in enumerate(zip(pages, ends)):
        keys_at = {}
        for pos, j in at.items():
            word = lines[j].strip()
            keys = []
            if _BARE_NUMBER.fullmatch(word):
                keys.append((pos, int(word) - (i + 1)))
            elif roman(word):  # "lxxvii": a book numbered in roman numerals throughout
                keys.append((pos, roman(word) - (i + 1)))
            if label and word == label:
                keys.append((pos, "label"))
            if keys:
                keys_at[pos] = (j, keys)
                votes.update(keys)
        found.append(keys_at)
    need = min(3, len(pages))  # two numbers in step could be chance (a table's last cell); three pages are not
    numbering = {k for k, v in votes.items() if v >= need and (need > 1 or k[1] in (0, "label"))}
    drops = []
    for (lines, _), keys_at in zip(ends, found):
        drop = {j for j, keys in keys_at.values() if numbering.intersection(keys)}
        # a page holding nothing but the number keeps it (a page is never emptied)
        drops.append(drop if len([x for x in lines if x.strip()]) > len(drop) else set())
    return _take_out(pages, ends, drops)
