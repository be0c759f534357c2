"""A document's page as a PNG, with a passage (a chunk) highlighted; the passage in its context.

    png = render_page(library, doc_id, 12, highlight=340)     # bytes of a PNG
    ctx = passage_context(library, doc_id, 340)                # {"before", "text", "after", ...}

- PDF and EPUB: the original file, kept at ingest under `$DRT_HOME/files/<doc_id>.<pdf|epub>`
  (`keep_original`; `forget_original` when the document is removed), is opened with PyMuPDF (an
  EPUB with the parser's layout, `parse.EPUB_PAGE`) and the page rendered with `get_pixmap`.
  The highlight is found by words, not by character offsets: the chunk's part on this page (a
  chunk may run over a page break; each page shows its own part) is split into words and aligned
  (difflib, near the place the stored text puts it) with the page's words from
  `page.get_text("words")`, extracted with the parser's flags, so line breaks, hyphenation and
  ligatures match the stored text. The matched words (one rectangle per line run) are tinted on
  the rendered pixmap like a highlighter (multiplied by yellow: text stays black), so a PDF and an
  EPUB page are marked the same way and the file is never changed.
- text, Markdown, TeX: there is no layout to show, so the stored page text is typeset on a new
  in-memory PDF page (Times for prose, Courier for TeX; long lines wrapped) and the chunk's
  characters get yellow rectangles under the text.
- every bad request is an `IngestError` of one line: a page or a chunk not in the document, a chunk
  not on that page, a PDF or EPUB added before drt-reader kept files.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import logging
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from .errors import IngestError
from .parts import pages_ref

logger = logging.getLogger(__name__)

KEPT_KINDS = ("pdf", "epub")  # kinds whose original file is kept (the others are their text)
FILES_DIR = "files"
YELLOW = (1.0, 0.93, 0.2)  # highlight colour (multiplied onto a rendered page)
MAX_PIXELS = 40_000_000  # a poster-sized page is rendered at a lower zoom rather than exhaust memory
TEXT_PAGE = (595.0, 842.0, 50.0)  # width, minimum height, margin (points) of typeset text pages
TEXT_FONTS = {"tex": "cour"}  # PyMuPDF base-14 font per kind; the others: "tiro" (Times)
TEXT_FONTSIZE = 10.5
TEXT_LEADING = 1.35  # line height / font size
MAX_TEXT_LINES = 200  # a longer page (a text file with form feeds) shows the window around the chunk
_MUPDF = threading.Lock()  # MuPDF is not thread-safe: one render at a time (the UI's handler threads)


# ---------------------------------------------------------------------------------------------
# the kept original file
# ---------------------------------------------------------------------------------------------


def original_path(home: str | Path, doc_id: str, kind: str) -> Path:
    """Where the original file of a PDF or EPUB document is kept: <home>/files/<doc_id>.<kind>."""
    return Path(home) / FILES_DIR / f"{doc_id}.{kind}"


def keep_original(home: str | Path, doc_id: str, path: str | Path, kind: str) -> Path | None:
    """Copy the ingested file to `original_path` (PDF and EPUB only; once). Never raises: a file
    that cannot be kept is logged as a warning, and only its page images are lost.

    The copy goes to a temporary name and is renamed into place, so a crash never leaves half a
    file under the final name; its sha256 is checked against `doc_id` (the file may have changed
    since it was hashed). A copy rather than a hard link: a PDF editor that saves in place
    (incremental update) would otherwise change the kept file too."""
    if kind not in KEPT_KINDS:
        return None
    dst = original_path(home, doc_id, kind)
    if dst.is_file():
        return dst
    tmp: str | None = None
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{doc_id[:12]}.", suffix=".tmp")
        h = hashlib.sha256()
        with open(path, "rb") as src, os.fdopen(fd, "wb") as out:
            while block := src.read(1 << 20):
                h.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != doc_id:
            raise OSError(f"{Path(path).name} changed while it was being added")
        os.replace(tmp, dst)
        tmp = None
        return dst
    except OSError as e:
        logger.warning("could not keep a copy of %s for its page images: %s", Path(path).name, e)
        return None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def forget_original(home: str | Path, doc_id: str) -> None:
    """Delete a removed document's kept file (either kind; a missing one is no error)."""
    for kind in KEPT_KINDS:
        with contextlib.suppress(OSError):
            original_path(home, doc_id, kind).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# what to show: the page, the chunk's part of it
# ---------------------------------------------------------------------------------------------


def _page_row(library: Any, doc_id: str, page: int) -> dict:
    n = int(library.document(doc_id)["n_pages"])
    rows = library.pages(doc_id, with_text=True, numbers=[page]) if 1 <= page <= n else []
    if not rows:
        raise IngestError(f"page {page} is not in this document (1-{n})")
    return rows[0]


def _chunk_row(library: Any, doc_id: str, chunk: int) -> dict:
    n = int(library.document(doc_id)["n_chunks"])
    rows = library.chunks(doc_id, [chunk]) if 0 <= chunk < n else []
    if not rows:
        raise IngestError(f"chunk {chunk} is not in this document (0 to {n - 1})")
    return rows[0]


def _span_on_page(library: Any, doc_id: str, page: dict, chunk: int) -> tuple[int, int]:
    """The chunk's characters on this page, as offsets into the page's text."""
    c = _chunk_row(library, doc_id, chunk)
    if not c["page_first"] <= page["number"] <= c["page_last"]:
        where = pages_ref([c["page_first"], c["page_last"]])
        raise IngestError(f"chunk {chunk} is on {where}, not on p. {page['number']}")
    a = max(c["char_start"], page["char_start"]) - page["char_start"]
    b = min(c["char_end"], page["char_end"]) - page["char_start"]
    return a, max(a, b)


def render_page(
    library: Any, doc_id: str, page: int, highlight: int | None = None, zoom: float = 1.5
) -> bytes:
    """Page `page` (1-based) of a document as a PNG, with chunk `highlight`'s part on it marked.

    `doc_id` is a full id (`Library.resolve` turns a prefix or a title into one). Raises an
    IngestError (one line) for a page or chunk not in the document, a chunk not on that page, or a
    PDF/EPUB whose file was not kept."""
    if not 0.1 <= zoom <= 8:
        raise IngestError(f"zoom {zoom:g} is out of range (0.1 to 8)")
    doc = library.document(doc_id)
    row = _page_row(library, doc_id, int(page))
    span = _span_on_page(library, doc_id, row, int(highlight)) if highlight is not None else None
    if doc["kind"] not in KEPT_KINDS:
        with _MUPDF:
            return _render_text(row["text"], span, doc["kind"], zoom)
    path = original_path(library.home, doc_id, doc["kind"])
    if not path.is_file():
        raise IngestError(
            "the original file of this document is not kept (it was added before drt-reader kept "
            "files): add it again to see its pages"
        )
    with _MUPDF:
        return _render_file(path, doc["kind"], row, span, zoom)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of a PNG, from its IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def passage_context(library: Any, doc_id: str, chunk: int, chars: int = 600) -> dict:
    """The chunk's text with about `chars` characters of the document before and after it, cut at
    word boundaries: {"doc_id", "chunk", "pages": [first, last], "before", "text", "after"}.
    `before` and `after` may run over page breaks (the document text joins pages with a blank
    line); they are "" at the start and end of the document."""
    c = _chunk_row(library, doc_id, int(chunk))
    chars = max(0, int(chars))
    lo, hi = c["char_start"] - chars, c["char_end"] + chars
    pages = [p for p in library.pages(doc_id, with_text=True) if p["char_end"] > lo and p["char_start"] < hi]
    text, base = _join_pages(pages)
    cs, ce = c["char_start"] - base, c["char_end"] - base
    start, end = max(0, cs - chars), min(len(text), ce + chars)
    before, after = text[start:cs], text[ce:end]
    if start > 0 and not text[start - 1].isspace():  # cut inside a word: leave its end out
        before = re.sub(r"^\S+", "", before, count=1)
    if end < len(text) and not text[end].isspace():
        after = re.sub(r"\S+$", "", after, count=1)
    return {
        "doc_id": doc_id,
        "chunk": int(chunk),
        "pages": [c["page_first"], c["page_last"]],
        "before": before,
        "text": c["text"],
        "after": after,
    }


def _join_pages(pages: list[dict]) -> tuple[str, int]:
    """The document text over these consecutive pages (gaps filled with the page separator's
    blank line) and its offset in the document text."""
    if not pages:
        return "", 0
    base = pages[0]["char_start"]
    parts: list[str] = []
    pos = base
    for p in pages:
        parts.append("\n" * (p["char_start"] - pos))  # the separator between pages
        parts.append(p["text"])
        pos = p["char_end"]
    return "".join(parts), base


# ---------------------------------------------------------------------------------------------
# PDF and EPUB: the page of the kept file
# ---------------------------------------------------------------------------------------------


def _open(path: Path, kind: str):
    import pymupdf

    from .parse import EPUB_PAGE

    try:
        doc = pymupdf.open(str(path), filetype=kind)
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
        raise IngestError(f"cannot open the kept file of this document: {e}") from e
    if doc.needs_pass and not doc.authenticate(os.environ.get("DRT_PDF_PASSWORD") or ""):
        doc.close()  # the library keeps no passwords
        raise IngestError(
            "the kept file of this document is encrypted: give its password in DRT_PDF_PASSWORD"
        )
    if kind == "epub":
        w, h, fs = EPUB_PAGE
        doc.layout(width=w, height=h, fontsize=fs)
    return doc


def _render_file(path: Path, kind: str, row: dict, span: tuple[int, int] | None, zoom: float) -> bytes:
    import pymupdf

    doc = _open(path, kind)
    try:
        if not 1 <= row["number"] <= doc.page_count:
            raise IngestError(f"page {row['number']} is not in the kept file ({doc.page_count} pages)")
        page = doc.load_page(row["number"] - 1)
        rects = _highlight_rects(page, row["text"], span) if span is not None else []
        return _png(page, zoom, rects)
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:  # a damaged page
        raise IngestError(f"cannot render page {row['number']}: {type(e).__name__}: {e}") from e
    finally:
        doc.close()


def _png(page: Any, zoom: float, rects: list | None = None) -> bytes:
    """The page rendered at `zoom` (lower for a poster-sized page), `rects` (page coordinates)
    tinted yellow."""
    import pymupdf

    r = page.rect
    zoom = min(zoom, (MAX_PIXELS / max(r.width * r.height, 1.0)) ** 0.5)
    m = pymupdf.Matrix(zoom, zoom)
    pix = page.get_pixmap(matrix=m, alpha=False)
    if rects:
        pix = _tint(pix, [rect * m for rect in rects])
    return pix.tobytes("png")


# multiply by YELLOW, one channel at a time (bytes.translate: no loop over pixels in Python)
_TINT = [bytes(round(v * c) for v in range(256)) for c in YELLOW]


def _tint(pix: Any, rects: list) -> Any:
    """A copy of an RGB pixmap with the pixels under `rects` (pixel coordinates) multiplied by
    YELLOW, like a highlighter: white turns yellow, black text stays black. Overlapping rectangles
    are tinted once."""
    import pymupdf

    n, stride = pix.n, pix.stride
    rows: dict[int, list[tuple[int, int]]] = {}
    for rect in rects:
        ir = rect.irect & pix.irect
        if ir.is_empty:
            continue
        for y in range(ir.y0, ir.y1):
            rows.setdefault(y, []).append((ir.x0, ir.x1))
    buf = bytearray(pix.samples)
    for y, spans in rows.items():
        spans.sort()
        merged = [list(spans[0])]
        for x0, x1 in spans[1:]:
            if x0 <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], x1)
            else:
                merged.append([x0, x1])
        for x0, x1 in merged:
            a, b = y * stride + x0 * n, y * stride + x1 * n
            seg = buf[a:b]
            for ch in range(min(n, 3)):
                seg[ch::n] = seg[ch::n].translate(_TINT[ch])
            buf[a:b] = seg
    return pymupdf.Pixmap(pix.colorspace, pix.width, pix.height, bytes(buf), False)


_WORD = re.compile(r"\W+")


def _norm(word: str) -> str:
    """The word without case and punctuation; punctuation alone ("—", ".") stays as it is."""
    return _WORD.sub("", word.casefold()) or word


def _highlight_rects(page: Any, text: str, span: tuple[int, int]) -> list:
    """Rectangles (one per line run) of the page's words that are the text[span[0]:span[1]]."""
    import pymupdf

    from .parse import _TEXT_FLAGS

    words = page.get_text("words", flags=_TEXT_FLAGS)  # (x0, y0, x1, y1, word, block, line, n)
    owners, page_words = _page_words([w[4] for w in words], text)
    hits = sorted({j for i in match_words(text, span, page_words) for j in owners[i]})
    rects: list = []
    key = None
    for i in hits:
        w = words[i]
        r = pymupdf.Rect(w[:4])
        if (w[5], w[6]) == key and rects:
            rects[-1] |= r
        else:
            rects.append(r)
            key = (w[5], w[6])
    return rects


def _read_glyphs(words: list[str], text: str) -> tuple[list[int], list[str]]:
    """The page's words with a font's private-use ligatures read as the parser read them (the
    table learnt against the stored page text, ingest.glyphs), a word that lost its space after
    one split in two; with, for each, the index of the page word it comes from."""
    from . import glyphs

    if glyphs.PRIVATE.search(text):  # stored before the parser read glyphs: the page words stay as they are
        return list(range(len(words))), words
    table = glyphs.learn(" ".join(w for w in words if glyphs.PRIVATE.search(w)), known=[text])
    if not table:
        return list(range(len(words))), words
    marked = [i for i, w in enumerate(words) if glyphs.PRIVATE.search(w)]
    read = dict(zip(marked, glyphs.expand_all([words[i] for i in marked], table, known=[text])))
    owner, out = [], []
    for i, w in enumerate(words):
        parts = read[i].split() if i in read else [w]
        owner += [i] * len(parts)
        out += parts
    return owner, out


def _page_words(words: list[str], text: str) -> tuple[list[list[int]], list[str]]:
    """The page's words read as the parser read them: private-use ligatures read (`_read_glyphs`),
    line-end hyphenations joined (ingest.hyphens); with, for each, the page words it comes from."""
    from .hyphens import joined_words

    owner, read = _read_glyphs(words, text)
    if not any(w.endswith("-") for w in read):
        return [[i] for i in owner], read
    pairs = joined_words(read, text)
    return [sorted({owner[i] for i in idx}) for idx, _ in pairs], [w for _, w in pairs]


def match_words(text: str, span: tuple[int, int], page_words: list[str]) -> list[int]:
    """Indices (sorted) of `page_words` that are the words of text[span[0]:span[1]].

    Both come from the same extraction, so the words are the same; only their order may differ
    (the parser reads columns one after another). Words are compared without case and punctuation;
    a word the chunk boundary cuts matches the page word it is the start or end of. The alignment
    looks first near where the words before the span put it, then over the whole page."""
    a, b = span
    seg = text[a:b].split()
    if not seg or not page_words:
        return []
    head_cut = a > 0 and not text[a - 1].isspace() and not text[a].isspace()
    tail_cut = b < len(text) and not text[b].isspace() and not text[b - 1].isspace()
    s = [_norm(x) for x in seg]
    w = [_norm(x) for x in page_words]
    h = 1 if head_cut else 0
    core = s[h : len(s) - (1 if tail_cut else 0)]  # the whole words, aligned first
    expect = len(text[:a].split())  # the index of core[0] when both orders agree
    lo = max(0, expect - len(core) - 40)
    hi = min(len(w), expect + 2 * len(core) + 40)
    hits = _align(core, w[lo:hi])
    if len(hits) < 0.6 * len(core):
        lo, hits = 0, _align(core, w)
    out = {lo + j for _, j in hits}
    if hits:  # the words the chunk boundary cuts in two: the page word they are the end or start of
        (i0, j0), (i1, j1) = hits[0], hits[-1]
        before, after = lo + j0 - 1, lo + j1 + 1
        if head_cut and i0 == 0 and before >= 0 and w[before].endswith(s[0]):
            out.add(before)
        if tail_cut and i1 == len(core) - 1 and after < len(w) and w[after].startswith(s[-1]):
            out.add(after)
    return sorted(out)


def _align(s: list[str], w: list[str]) -> list[tuple[int, int]]:
    """(i, j) pairs with s[i] == w[j]: difflib's matching blocks of at least 3 words (all of `s`
    when it is shorter), shorter blocks within 3 words of a kept one (a formula's words come out of
    a PDF in another order), and the words between two kept blocks when both gaps are as long."""
    if not w or not s:
        return []
    blocks = [m for m in difflib.SequenceMatcher(None, s, w, autojunk=False).get_matching_blocks() if m.size]
    keep = [m.size >= min(3, len(s)) for m in blocks]
    for order in (range(1, len(blocks)), range(len(blocks) - 2, -1, -1)):
        for k in order:
            other = k - 1 if order.step > 0 else k + 1
            if keep[other] and not keep[k] and _near(*sorted((blocks[k], blocks[other]))):
                keep[k] = True
    pairs: list[tuple[int, int]] = []
    prev = None
    for m in (m for m, kept in zip(blocks, keep) if kept):
        if prev is not None:
            gi, gj = m.a - (prev.a + prev.size), m.b - (prev.b + prev.size)
            if gi == gj and 0 < gi <= 3:  # a word extracted differently: fill it in
                pairs += [(prev.a + prev.size + k, prev.b + prev.size + k) for k in range(gi)]
        pairs += [(m.a + k, m.b + k) for k in range(m.size)]
        prev = m
    return pairs


def _near(p: Any, m: Any, gap: int = 3) -> bool:
    """Block m starts at most `gap` words after block p ends, in both sequences."""
    return 0 <= m.a - (p.a + p.size) <= gap and 0 <= m.b - (p.b + p.size) <= gap


# ---------------------------------------------------------------------------------------------
# text, Markdown, TeX: the stored text, typeset
# ---------------------------------------------------------------------------------------------


def _render_text(text: str, span: tuple[int, int] | None, kind: str, zoom: float) -> bytes:
    import pymupdf

    width, min_height, margin = TEXT_PAGE
    font = pymupdf.Font(TEXT_FONTS.get(kind, "tiro"))
    fs, lh = TEXT_FONTSIZE, TEXT_FONTSIZE * TEXT_LEADING
    shown = _printable(text, font)
    lines = wrap_lines(shown, lambda s: font.text_length(s, fontsize=fs), width - 2 * margin)
    first = 0
    if len(lines) > MAX_TEXT_LINES:  # show the window around the highlight (or the start)
        at = next((i for i, (o, s) in enumerate(lines) if span and o + len(s) > span[0]), 0)
        first = max(0, min(at - MAX_TEXT_LINES // 4, len(lines) - MAX_TEXT_LINES))
        lines = lines[first : first + MAX_TEXT_LINES]
    height = max(min_height, 2 * margin + len(lines) * lh)
    out = pymupdf.open()
    page = out.new_page(width=width, height=height)
    if span is not None:
        for k, (off, s) in enumerate(lines):
            a, b = max(span[0], off) - off, min(span[1], off + len(s)) - off
            if a < b:
                x0 = margin + font.text_length(s[:a], fontsize=fs)
                x1 = margin + font.text_length(s[:b], fontsize=fs)
                top = margin + k * lh
                page.draw_rect(pymupdf.Rect(x0, top, x1, top + lh), color=None, fill=YELLOW, overlay=False)
    tw = pymupdf.TextWriter(page.rect)
    for k, (_, s) in enumerate(lines):
        if s.strip():
            tw.append((margin, margin + k * lh + 0.8 * lh), s, font=font, fontsize=fs)
    tw.write_text(page)
    png = _png(page, zoom)
    out.close()
    return png


def _printable(text: str, font: Any) -> str:
    """The text with the same length (offsets stay valid): tabs and control characters as spaces,
    characters the font has no glyph for as "?"."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
        elif ch < " " or ch == "\x7f":
            out.append(" ")
        elif ch == " " or font.has_glyph(ord(ch)):
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


def wrap_lines(text: str, measure: Any, width: float) -> list[tuple[int, str]]:
    """The text as (offset, line) pairs no wider than `width` (by `measure`), broken after spaces
    (inside a word only when the word alone is too wide); newlines end lines and belong to none."""
    lines: list[tuple[int, str]] = []
    pos = 0
    for raw in text.split("\n"):
        start = pos
        pos += len(raw) + 1
        while measure(raw) > width:
            cut = _fit(raw, measure, width)
            lines.append((start, raw[:cut]))
            start, raw = start + cut, raw[cut:]
        lines.append((start, raw))
    return lines


def _fit(line: str, measure: Any, width: float) -> int:
    """How many leading characters of `line` to put on this line (at least one)."""
    lo, hi = 1, len(line)
    while lo < hi:  # the longest prefix that fits
        mid = (lo + hi + 1) // 2
        if measure(line[:mid]) <= width:
            lo = mid
        else:
            hi = mid - 1
    space = line.rfind(" ", 0, lo + 1)
    return space + 1 if space > 0 else lo
