"""File -> pages of text: PDF and EPUB with PyMuPDF, plain text, Markdown and TeX.

The file's CONTENT decides its kind (the name only tells Markdown from plain text):
`%PDF-` in the first KiB is a PDF, a zip whose first entry is `mimetype` = `application/epub+zip` is
an EPUB, anything that charset-normalizer decodes to sensible text is text (TeX when it has
`\\documentclass` / `\\begin{`); everything else is refused. So random bytes named `.pdf` get a clear
error, and a PDF named `.txt` is still read as a PDF.

Parsing runs in a child process (`python -m ingest.parse`) with a wall-clock limit and an
address-space limit (RLIMIT_AS, set in the child AFTER `import pymupdf`: the import itself needs
~100 MB of address space). MuPDF's C code cannot be interrupted from Python, so a parent that kills
the child is the only reliable deadline (docs/reliability.md §2). The child talks JSON over a pipe.

Reading order: `page.get_text("text", sort=True)` rebuilds lines in natural order, but it joins the
lines of side-by-side columns into one line. Pages whose text blocks split into columns around a
vertical gutter are therefore read region by region (full-width bands top to bottom, columns left
to right inside a band), each region still with `sort=True`. A page with a narrow column of margin notes beside its text
(tufte-style LaTeX) is read run by run of the main text's lines, each note after the run it stands
beside (`_margin_regions`): `sort=True` glued a note's line to the text line at its height.

Page numbers are 1-based. `label` is the printed label (`page.get_label()`, e.g. "vii") and falls
back to the number. Text files have no pages: they are cut at paragraph breaks into pages of 1,500-4,500
characters (the last break before 4,500: about 4,300 in a novel), or at form feeds when the file has
them, and a warning says so, with their mean size.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import (
    Cancelled,
    DamagedFile,
    EmptyDocument,
    IngestError,
    ParseCrashed,
    ParseOutOfMemory,
    ParseTimeout,
    PasswordRequired,
    TooLarge,
    UnsupportedFile,
    WrongPassword,
)
from .glyphs import expand, read_pages
from .hyphens import join_pages
from .pdf_structure import drop_page_numbers, drop_running_heads, styled_headings

ROOT = Path(__file__).resolve().parents[1]

PAGE_SEPARATOR = "\n\n"  # between pages in ParsedDocument.text; belongs to no page
TEXT_PAGE_CHARS = 3000  # synthetic page size for text files (about one printed page)
MAX_LAYOUT_BLOCKS = 300  # column detection is quadratic in blocks; denser pages keep sort=True order
EPUB_PAGE = (420.0, 595.0, 11.0)  # width, height (points, A5) and font size for the EPUB layout

# get_text flags: MuPDF's defaults for "text" without TEXT_PRESERVE_LIGATURES ("ﬁ" -> "fi")
_TEXT_FLAGS = 2 | 64 | 128  # PRESERVE_WHITESPACE | MEDIABOX_CLIP | CID_FOR_UNKNOWN_UNICODE


@dataclass
class Page:
    number: int  # 1-based physical page
    label: str  # printed label ("vii", "12"); the number when the file has none
    text: str
    char_start: int  # span in ParsedDocument.text
    char_end: int


@dataclass
class ParsedDocument:
    title: str
    kind: str  # "pdf" | "epub" | "text" | "markdown" | "tex"
    pages: list[Page]
    text: str  # the pages' text joined by PAGE_SEPARATOR
    warnings: list[str] = field(default_factory=list)
    outline: list[tuple[int, str, int]] = field(default_factory=list)  # the PDF's bookmarks: (level, title, page)


@dataclass(frozen=True)
class ParseLimits:
    timeout_s: float = 300.0  # wall clock for the whole parse, child start included
    memory_mb: int = 2048  # address space the child may add after its imports
    max_file_mb: int = 512
    max_pages: int = 50_000
    max_chars: int = 64_000_000  # about 16M tokens

    @classmethod
    def from_env(cls) -> "ParseLimits":
        """Defaults, overridden by DRT_PARSE_TIMEOUT_S / DRT_PARSE_MEMORY_MB when set."""
        kw: dict = {}
        if os.environ.get("DRT_PARSE_TIMEOUT_S"):
            kw["timeout_s"] = float(os.environ["DRT_PARSE_TIMEOUT_S"])
        if os.environ.get("DRT_PARSE_MEMORY_MB"):
            kw["memory_mb"] = int(os.environ["DRT_PARSE_MEMORY_MB"])
        return cls(**kw)


# ---------------------------------------------------------------------------------------------
# what kind of file is this (content, not name)
# ---------------------------------------------------------------------------------------------

_EPUB_MAGIC = b"PK\x03\x04"


def sniff(head: bytes) -> str:
    """Kind of file from its first bytes: "pdf", "epub", "zip", "empty" or "other" (maybe text)."""
    if not head:
        return "empty"
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(_EPUB_MAGIC):
        # EPUB OCF: the first entry is an uncompressed file named "mimetype" holding the media type
        name_len = int.from_bytes(head[26:28], "little")
        extra_len = int.from_bytes(head[28:30], "little")
        name = head[30 : 30 + name_len]
        body = head[30 + name_len + extra_len : 30 + name_len + extra_len + 20]
        if name == b"mimetype" and body.startswith(b"application/epub+zip"):
            return "epub"
        return "zip"
    return "other"


_TEX_STRONG = re.compile(r"\\documentclass\b|\\begin\{document\}")
_TEX_COMMANDS = re.compile(
    r"^\s*\\(begin\{|section\*?\{|chapter\*?\{|input\{|label\{|usepackage|title\{)", re.M
)
_MD_SYNTAX = re.compile(r"^(#{1,6} \S|[-*+] \S|\d+\. \S|```|> \S)", re.M)


def text_kind(text: str, name: str = "") -> str:
    """"tex", "markdown" or "text" for decoded text. TeX by content; Markdown by name or syntax."""
    head = text[:200_000]
    suffix = Path(name).suffix.lower()
    if _TEX_STRONG.search(head):
        return "tex"
    n_cmd = len(_TEX_COMMANDS.findall(head))
    if "\\begin{" in head and (n_cmd >= 3 or suffix in (".tex", ".ltx", ".sty")):
        return "tex"
    if suffix in (".tex", ".ltx") and n_cmd >= 1:
        return "tex"
    if suffix in (".md", ".markdown", ".mdown", ".mkd"):
        return "markdown"
    if head.startswith("# ") and len(_MD_SYNTAX.findall(head)) >= 3:
        return "markdown"
    return "text"


# ---------------------------------------------------------------------------------------------
# text hygiene
# ---------------------------------------------------------------------------------------------

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates (json/sqlite/tokenizer traps)


def clean_text(s: str) -> str:
    """Strip NUL and lone surrogates; normalise newlines to \\n."""
    s = _BAD_CHARS.sub("", s)
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
    return s


_TEX_QUOTES = re.compile(r"``(.+?)''")


def bookmark_title(s: str) -> str:
    """A bookmark's title as the page prints it: hyperref keeps TeX's quotes in them (itcs20's
    "Supporting ``First Return'' Queries" is Supporting “First Return” Queries)."""
    return _TEX_QUOTES.sub("\u201c\\1\u201d", clean_text(s)).strip()


_LEAD_WS = re.compile(r"^[ \t]{3,}", re.M)  # sort=True pads lines with spaces to mimic their x position
_TRAIL_WS = re.compile(r"[ \t]+$", re.M)
_INNER_WS = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")  # justified lines come back with padded gaps
_BLANKS = re.compile(r"\n{3,}")


def _tidy_pdf_text(s: str) -> str:
    s = clean_text(s)
    s = _TRAIL_WS.sub("", s)
    s = _LEAD_WS.sub("  ", s)
    s = _INNER_WS.sub(" ", s)
    s = _BLANKS.sub("\n\n", s)
    return s.strip("\n")


# ---------------------------------------------------------------------------------------------
# the parent side: run the child with limits
# ---------------------------------------------------------------------------------------------

_ERRORS = {
    c.__name__: c
    for c in (
        UnsupportedFile,
        EmptyDocument,
        PasswordRequired,
        WrongPassword,
        DamagedFile,
        ParseTimeout,
        ParseOutOfMemory,
        ParseCrashed,
        TooLarge,
        IngestError,
    )
}


def parse_file(
    path: str | os.PathLike,
    *,
    password: str | None = None,
    limits: ParseLimits | None = None,
    cancel: threading.Event | None = None,
) -> ParsedDocument:
    """Parse `path` in a child process with a time and memory limit; raise an IngestError on bad input.

    Args:
        path: the file. Its content decides the kind (see the module docstring).
        password: tried on encrypted PDFs; without it they raise PasswordRequired.
        limits: time, memory and size caps. Default: ParseLimits.from_env().
        cancel: set it from another thread to kill the child and raise Cancelled.
    """
    limits = limits or ParseLimits.from_env()
    p = Path(path)
    if not p.exists():
        raise IngestError(f"no such file: {p}")
    if not p.is_file():
        raise IngestError(f"not a file: {p}")
    size = p.stat().st_size
    if size == 0:
        raise EmptyDocument(f"{p.name} is empty")
    if size > limits.max_file_mb * 2**20:
        raise TooLarge(f"{p.name} is {size / 2**20:.0f} MB; the limit is {limits.max_file_mb} MB")
    request = {"path": str(p.resolve()), "name": p.name, "password": password, "limits": asdict(limits)}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONIOENCODING"] = "utf-8"
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ingest.parse"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(ROOT),
    )
    deadline = time.monotonic() + limits.timeout_s
    payload: bytes | None = json.dumps(request).encode()
    while True:
        try:
            out, err = proc.communicate(input=payload, timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            payload = None  # already written; communicate() must not be given it again
            if cancel is not None and cancel.is_set():
                _kill(proc)
                raise Cancelled("parsing was cancelled")
            if time.monotonic() > deadline:
                _kill(proc)
                raise ParseTimeout(
                    f"parsing {p.name} took longer than {limits.timeout_s:g} s and was stopped "
                    "(the document is too complex; raise DRT_PARSE_TIMEOUT_S to allow more)"
                )
    if cancel is not None and cancel.is_set():  # Ctrl-C reaches the child too: that is no crash
        raise Cancelled("parsing was cancelled")
    return _result(proc.returncode, out, err, p.name, limits)


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
        pass


def _result(rc: int, out: bytes, err: bytes, name: str, limits: ParseLimits) -> ParsedDocument:
    msg: dict | None = None
    if out:
        try:
            msg = json.loads(out.decode("utf-8", errors="replace"))
        except json.JSONDecodeError:
            msg = None
    if msg is not None and "error" in msg:
        cls = _ERRORS.get(msg["error"]["type"], IngestError)
        raise cls(msg["error"]["message"])
    if rc != 0 or msg is None:
        last = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        if rc in (-signal.SIGXCPU, -signal.SIGKILL):
            raise ParseTimeout(f"parsing {name} was stopped (CPU time limit or killed): {last}".rstrip(": "))
        if rc == -signal.SIGABRT or "bad_alloc" in last or "MemoryError" in last:
            raise ParseOutOfMemory(
                f"parsing {name} ran out of memory (limit {limits.memory_mb} MB; raise DRT_PARSE_MEMORY_MB)"
            )
        what = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        raise ParseCrashed(f"the parser crashed on {name} ({what}) {last}")
    return _assemble(msg["title"], msg["kind"], msg["pages"], msg["warnings"], msg.get("outline") or [])


def _assemble(title: str, kind: str, pages: list[list[str]], warnings: list[str],
              outline: list | None = None) -> ParsedDocument:
    """Build Page objects with character spans from [(label, text), ...]."""
    out: list[Page] = []
    pos = 0
    for i, (label, text) in enumerate(pages):
        if i:
            pos += len(PAGE_SEPARATOR)
        label = label or str(i + 1)
        out.append(Page(number=i + 1, label=label, text=text, char_start=pos, char_end=pos + len(text)))
        pos += len(text)
    full = PAGE_SEPARATOR.join(p.text for p in out)
    assert len(full) == pos, f"page spans {pos} != text length {len(full)}"
    n = len(out)
    toc = [(int(lv), bookmark_title(str(t)), int(pg)) for lv, t, pg in (outline or []) if 1 <= int(pg) <= n]
    return ParsedDocument(title=title, kind=kind, pages=out, text=full, warnings=list(warnings),
                          outline=[x for x in toc if x[1]])


# ---------------------------------------------------------------------------------------------
# the child side
# ---------------------------------------------------------------------------------------------


def _set_limits(limits: dict) -> None:
    """Address space = what we have after the imports + memory_mb; CPU time as a backstop."""
    import resource

    vm = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    vm = int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    cap = vm + int(limits["memory_mb"]) * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    cpu = int(limits["timeout_s"]) + 5
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or cpu < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))


def _worker_main() -> int:
    # the parent decides when to stop us (deadline, cancel); Ctrl-C in a terminal reaches the
    # whole process group, so leave SIGINT to the parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # C libraries may print to fd 1: keep our own copy for the answer and point fd 1 at stderr
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    limits = req["limits"]
    try:
        with open(req["path"], "rb") as f:
            head = f.read(4096)
        kind = sniff(head)
        if kind in ("pdf", "epub"):
            import pymupdf

            pymupdf.TOOLS.mupdf_display_errors(False)
            pymupdf.TOOLS.mupdf_display_warnings(False)
            _set_limits(limits)
            result = _parse_mupdf(pymupdf, req, kind)
        else:
            import charset_normalizer

            _set_limits(limits)
            result = _parse_text(charset_normalizer, req, kind)
        _check_result(result, req["name"], limits)
        body = {"title": result[0], "kind": result[1], "pages": result[2], "warnings": result[3],
                "outline": result[4] if len(result) > 4 else []}
    except IngestError as e:
        body = {"error": {"type": type(e).__name__, "message": str(e)}}
    except MemoryError:
        body = {"error": {"type": "ParseOutOfMemory", "message": _oom(req, limits)}}
    except Exception as e:  # MuPDF errors past open(), say; never a traceback to the user
        if "malloc" in str(e).lower() or _OOM.search(str(e)):  # calloc/realloc too (an EPUB zip bomb)
            body = {"error": {"type": "ParseOutOfMemory", "message": _oom(req, limits)}}
        else:
            message = f"cannot read {req['name']}: {type(e).__name__}: {e}"
            body = {"error": {"type": "DamagedFile", "message": message}}
    data = json.dumps(body, ensure_ascii=False).encode("utf-8", errors="replace")
    with os.fdopen(answer_fd, "wb") as f:
        f.write(data)
    return 0


def _oom(req: dict, limits: dict) -> str:
    return (
        f"parsing {req['name']} ran out of memory "
        f"(limit {limits['memory_mb']} MB; raise DRT_PARSE_MEMORY_MB)"
    )


def _check_result(result: tuple, name: str, limits: dict) -> None:
    title, kind, pages, warnings = result[:4]
    n_chars = sum(len(t) for _, t in pages)
    if n_chars > limits["max_chars"]:
        raise TooLarge(f"{name} has {n_chars:,} characters of text; the limit is {limits['max_chars']:,}")
    if not any(t.strip() for _, t in pages):
        if kind in ("pdf", "epub"):
            raise EmptyDocument(
                f"{name} has no extractable text on any of its {len(pages)} pages "
                "(scanned images? run OCR, e.g. ocrmypdf, first)"
            )
        raise EmptyDocument(f"{name} contains no text")


# MuPDF's ways of saying it ran out of memory (allocation failures; zlib's Z_MEM_ERROR has no message)
_OOM = re.compile(r"\b(?:m|c|re)alloc\b.*\bfailed|out of memory|zlib error: \(null\)", re.I)


def _parse_mupdf(pymupdf, req: dict, kind: str) -> tuple:
    errors = (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase)
    name = req["name"]
    warnings: list[str] = []
    try:
        doc = pymupdf.open(req["path"], filetype=kind)
    except errors as e:  # MuPDF's message names the file by its path: the name is enough
        why = str(e).replace(f"'{req['path']}'", name).replace(req["path"], name)
        raise DamagedFile(f"cannot open {name} as {kind.upper()}: {why}")
    if doc.needs_pass:
        password = req.get("password")
        if not password:
            raise PasswordRequired(f"{name} is encrypted: give its password (--password)")
        if not doc.authenticate(password):
            raise WrongPassword(f"the password does not open {name}")
    notes = " ".join(pymupdf.TOOLS.mupdf_warnings(reset=True).split())
    if _OOM.search(notes):
        raise ParseOutOfMemory(_oom(req, req["limits"]))
    if doc.is_repaired:
        notes = notes[:200]
        warnings.append(f"the file was damaged and MuPDF repaired it; check the text ({notes})")
    if kind == "epub":
        w, h, fs = EPUB_PAGE
        doc.layout(width=w, height=h, fontsize=fs)
    n = doc.page_count
    if n == 0:
        if doc.is_repaired:
            raise DamagedFile(f"{name} is damaged: MuPDF repaired it but found no readable pages")
        raise EmptyDocument(f"{name} has no pages")
    if n > req["limits"]["max_pages"]:
        raise TooLarge(f"{name} has {n:,} pages; the limit is {req['limits']['max_pages']:,}")
    pages: list[list[str]] = []
    failed: list[int] = []
    for i in range(n):
        try:
            page = doc.load_page(i)
            text = _page_text(pymupdf, page)
            label = printed_label(page.get_label()) if kind == "pdf" else ""
        except errors as e:
            if _OOM.search(str(e)):
                raise ParseOutOfMemory(_oom(req, req["limits"])) from e
            failed.append(i + 1)
            text, label = "", ""
        # under RLIMIT_AS MuPDF may also degrade silently (a failed inflate reads as end of
        # stream): its warnings are the only trace, so a page is never quietly truncated
        if _OOM.search(pymupdf.TOOLS.mupdf_warnings(reset=True)):
            raise ParseOutOfMemory(_oom(req, req["limits"]))
        pages.append([clean_text(label), text])
    if failed:
        warnings.append(f"{len(failed)} page(s) could not be read and are left empty: {page_ranges(failed)}")
    empty = [i + 1 for i, (_, t) in enumerate(pages) if not t.strip() and i + 1 not in failed]
    if empty and len(empty) < n:
        why = "lost to the damage, or images only" if doc.is_repaired else "images only? OCR them first"
        warnings.append(f"{len(empty)} page(s) have no text ({why}): {page_ranges(empty)}")
    glyph_table: dict[str, str] = {}
    if kind == "pdf":
        texts, glyph_table = read_pages([t for _, t in pages])  # ligatures in the private-use area
        pages = [[label, t] for (label, _), t in zip(pages, texts)]
        drop_running_heads(pages)
        drop_page_numbers(pages)
        for page, t in zip(pages, join_pages([t for _, t in pages])):  # "mem-" / "ory": one word again
            page[1] = t
    title = clean_text((doc.metadata or {}).get("title") or "").strip()
    if title.lower() in _JUNK_TITLES:  # producers' placeholders: fall back to the file name
        title = ""
    try:  # bookmarks: [level, title, 1-based page]; a broken outline is no reason to refuse the file
        toc = [[int(lv), str(t), int(pg)] for lv, t, pg, *_ in doc.get_toc(simple=True)]
    except errors:
        toc = []
    if len(toc) < 2 and kind == "pdf":
        try:  # no bookmarks (or one): the numbered section headings the PDF prints in bold, larger than its text
            toc = styled_headings(doc, _TEXT_FLAGS) or toc
        except errors:
            pass
    if glyph_table:
        title = expand(title, glyph_table)
        toc = [[lv, expand(t, glyph_table), pg] for lv, t, pg in toc]
    doc.close()
    return title, kind, pages, warnings, toc


_HEX_STRING = re.compile(r"<([0-9A-Fa-f\s]+)>")


def printed_label(raw: str) -> str:
    """A page label as printed: MuPDF hands over a label the PDF writes as a hex string as it is
    ("<FEFF0031>": UTF-16 with its byte-order mark, "1"), and the reader saw "p. 1 (<FEFF0031>)"."""
    m = _HEX_STRING.fullmatch(raw.strip())
    if not m:
        return raw
    digits = re.sub(r"\s", "", m.group(1))
    data = bytes.fromhex(digits + "0" * (len(digits) % 2))
    if data[:2] == b"\xfe\xff":
        return data[2:].decode("utf-16-be", errors="replace")
    return data.decode("latin-1")


def _page_text(pymupdf, page) -> str:
    """The page's text in reading order (columns one after another, margin notes apart); see the
    module docstring."""
    tp = page.get_textpage(flags=_TEXT_FLAGS)
    blocks = [b for b in tp.extractBLOCKS() if b[6] == 0 and b[4].strip()]
    width = page.rect.width
    margin = None
    if any(b[0] >= 0.55 * width or b[2] <= 0.3 * width for b in blocks):  # a block in a margin: notes, perhaps
        lines = [(tuple(ln["bbox"]), "".join(s["text"] for s in ln["spans"]))
                 for b in tp.extractDICT()["blocks"] if b["type"] == 0 for ln in b["lines"]]
        margin = _margin_regions([(box, t) for box, t in lines if t.strip()], width)
    if margin is not None:
        parts = []
        for r, what in margin:
            clip = pymupdf.Rect(r[0], r[1] - 1, r[2], r[3] + 1)
            got = page.get_text("text", sort=True, clip=clip, flags=_TEXT_FLAGS).strip("\n")
            # a note is a paragraph of its own, and so is a run of the text set apart from the one before
            parts.append(f"\n{got}\n" if what == "note" else f"\n{got}" if what == "apart" else got)
        return _tidy_pdf_text("\n".join(parts))
    regions = _reading_regions([tuple(b[:4]) for b in blocks], width)
    if regions is None:
        text = page.get_text("text", sort=True, textpage=tp)
    else:
        parts = []
        for r in regions:
            clip = pymupdf.Rect(r[0] - 1, r[1] - 1, r[2] + 1, r[3] + 1)
            parts.append(page.get_text("text", sort=True, clip=clip, flags=_TEXT_FLAGS))
        text = "\n".join(parts)
    return _tidy_pdf_text(text)


Box = tuple  # (x0, y0, x1, y1)

MARGIN_WIDTH = 0.35  # of the page's width at most: a column of margin notes
MARGIN_GUTTER = 8.0  # points: main text beside a note ends this far from the notes' column at least
MARGIN_SHARE = 0.5  # the notes hold at most this share of the page's characters
MARGIN_RATIO = 0.6  # and their column is at most this share of the main text's column wide


def _margin_regions(lines: list[tuple[Box, str]], width: float) -> list[tuple[Box, str]] | None:
    """Regions to read one after another on a page with margin notes (tufte-style LaTeX: a narrow
    column of notes beside the text, on the right, or on the left), each with what it is ("note",
    "main" text, or main text "apart" from the run before by a gap); None for a page without.
    `sort=True`, and the column reading (a note's block and the text's merge into one that crosses
    any gutter), read a note's line and the text line at its height as one line ("A ≤G B is
    G-equivariant inclusion.Proposition 1.5. For A ≤G B ...": the statement no longer opened a line,
    walk 12) and put a note's lines between the text's. A column of notes: the lines right of x = g
    (left of it, mirrored), most of them aligned on one edge, in a column under MARGIN_WIDTH of the
    page wide and MARGIN_RATIO of the main text's column (most of its lines), at most MARGIN_SHARE of
    the page's characters, of 12 characters a line on average (not a column of page numbers), while
    the main text's lines beside them end MARGIN_GUTTER before g and few lines cross g, each from the
    main text's column (a page of two columns has many, or its right column's longer lines); some
    note stands beside the text, with text above and under it (a running head, an author's name at a
    title page's foot are no notes). The main text is read in runs of lines (cut at a gap of more
    than 0.6 of a line, and where a full-width line begins or ends: those are read across the page),
    each note after the run it begins beside."""
    got = _right_margin(lines, width)
    if got is not None:
        return got
    flipped = [((width - b[2], b[1], width - b[0], b[3]), t) for b, t in lines]
    got = _right_margin(flipped, width)
    if got is None:
        return None
    return [((width - r[2], r[1], width - r[0], r[3]), note) for r, note in got]


def _right_margin(lines: list[tuple[Box, str]], width: float) -> list[tuple[Box, str]] | None:
    """`_margin_regions` for notes on the right of the page."""
    if len(lines) < 4:
        return None
    total = sum(len(t.strip()) for _, t in lines)
    for g in sorted({round(b[0]) for b, _ in lines if b[0] >= 0.55 * width}):
        wide = [(b, t) for b, t in lines if b[0] < g - 1 and b[2] > g - MARGIN_GUTTER]  # reaching the column
        right = [b[0] >= g - 1 for b, _ in lines]
        side = [r and not any(_beside(b, w) for w, _ in wide) for (b, _), r in zip(lines, right)]
        notes = [ln for ln, s in zip(lines, side) if s]
        if not notes or len(notes) == len(lines):
            continue
        # a right-hand column of text, not notes: many lines cross g, and many of its lines sit beside them
        if (sum(len(t.strip()) for _, t in wide) > 0.2 * total
                or sum(right) - len(notes) > max(1.0, 0.2 * sum(right))):
            continue
        chars = sum(len(t.strip()) for _, t in notes)
        if (max(b[2] for b, _ in notes) - g > MARGIN_WIDTH * width or chars > MARGIN_SHARE * total
                or chars < 12 * len(notes) or not _aligned([b for b, _ in notes], g)):
            continue
        main = [b for (b, _), s in zip(lines, side) if not s]
        column = [b for b in main if b[2] <= g - MARGIN_GUTTER]  # the main text's column left of the notes
        x0, x1 = sorted(b[0] for b in column), sorted(b[2] for b in column)
        if (not column or max(b[2] for b, _ in notes) - g > MARGIN_RATIO * (x1[9 * len(x1) // 10] - x0[len(x0) // 10])
                or any(b[0] > x1[9 * len(x1) // 10] for b, _ in wide)):
            continue  # a column as wide as the text's, or whose longer lines reach left of g: a page in two columns
        # beside the text, not above or under all of it (a running head, an author's name on a title page)
        if not any(any(m[3] <= n[1] for m in main) and any(m[1] >= n[3] for m in main) for n, _ in notes):
            continue
        return _margin_order([b for b, _ in notes], main, g, width)
    return None


def _aligned(notes: list[Box], g: float) -> bool:
    """Whether most notes' lines begin at g (a column set ragged right), or end at one x (ragged
    left: notes in the left margin, read mirrored here)."""
    end = max(b[2] for b in notes)
    return max(sum(abs(b[0] - g) <= 3 for b in notes), sum(abs(b[2] - end) <= 3 for b in notes)) >= 0.6 * len(notes)


def _beside(a: Box, b: Box) -> bool:
    """Whether two lines overlap vertically by more than a third of the lower one's height."""
    return min(a[3], b[3]) - max(a[1], b[1]) > min(a[3] - a[1], b[3] - b[1]) / 3


def _margin_order(notes: list[Box], main: list[Box], g: float, width: float) -> list[tuple[Box, str]]:
    """The main text's runs of rows (full width where a line of the row crosses the notes' column,
    else left of it) and the notes' runs, each after the main run it begins beside (or before)."""
    def runs(boxes: list[Box], crossing) -> list[list[Box]]:
        rows: list[list[Box]] = []  # lines beside each other: one row (a formula's pieces)
        for b in sorted(boxes, key=lambda b: (b[1], b[0])):
            if rows and any(_beside(b, x) for x in rows[-1]):
                rows[-1].append(b)
            else:
                rows.append([b])
        out: list[list[Box]] = []
        height = sorted(b[3] - b[1] for b in boxes)[len(boxes) // 2]
        for row in rows:
            if (out and min(b[1] for b in row) - max(b[3] for b in out[-1]) <= 0.6 * height
                    and any(map(crossing, out[-1])) == any(map(crossing, row))):
                out[-1] += row
            else:
                out.append(row)
        return out

    crossing = lambda b: b[2] > g - MARGIN_GUTTER  # noqa: E731
    regions: list[tuple[Box, str]] = []
    height = sorted(b[3] - b[1] for b in main)[len(main) // 2] if main else 0
    for run in runs(main, crossing) if main else []:
        y0, y1 = min(b[1] for b in run), max(b[3] for b in run)
        apart = bool(regions) and y0 - regions[-1][0][3] > 0.6 * height
        regions.append(((0.0, y0, width if any(map(crossing, run)) else g - 1, y1), "apart" if apart else "main"))
    for run in runs(notes, lambda b: False):
        y0, y1 = min(b[1] for b in run), max(b[3] for b in run)
        if any(r[2] == width and r[1] <= y0 and y1 <= r[3] for r, _ in regions):
            continue  # read across the page with the main text's run it lies in
        at = sum(r[1] <= y0 for r, what in regions if what != "note")  # after the main runs that begin above it
        i = [k for k, (_, what) in enumerate(regions) if what != "note"][at - 1] + 1 if at else 0
        while i < len(regions) and regions[i][1] == "note":  # after the notes placed there already
            i += 1
        regions.insert(i, ((g - 1, y0, width, y1), "note"))
    return regions


def _reading_regions(boxes: list[Box], width: float) -> list[Box] | None:
    """Regions to read one after another, or None for a single-column page.

    A page has two columns when a vertical line x = g leaves substantial text entirely on each
    side (each side >= 20% of the text height and >= 2 blocks) with the two sides overlapping
    vertically. Blocks crossing g (titles, figures, page numbers) are full-width bands; between
    bands the left column is read before the right one.
    """
    if not 4 <= len(boxes) <= MAX_LAYOUT_BLOCKS:
        return None
    total = sum(b[3] - b[1] for b in boxes)
    if total <= 0:
        return None
    best: tuple[float, float] | None = None
    for cand in sorted({round(b[2]) for b in boxes}):
        if not 0.25 * width <= cand <= 0.75 * width:
            continue
        right = [b for b in boxes if b[0] >= cand]
        if len(right) < 2:
            continue
        g = (cand + min(b[0] for b in right)) / 2
        left = [b for b in boxes if b[2] <= g]
        if len(left) < 2:
            continue
        hl = sum(b[3] - b[1] for b in left)
        hr = sum(b[3] - b[1] for b in right)
        if hl < 0.2 * total or hr < 0.2 * total:
            continue
        lo = max(min(b[1] for b in left), min(b[1] for b in right))
        hi = min(max(b[3] for b in left), max(b[3] for b in right))
        if hi - lo < 0.3 * min(hl, hr):
            continue
        score = min(hl, hr)
        if best is None or score > best[0]:
            best = (score, g)
    if best is None:
        return None
    g = best[1]
    regions: list[Box] = []
    band: list[Box] = []

    def flush() -> None:
        for side in ([b for b in band if b[2] <= g], [b for b in band if b[0] >= g]):
            if side:
                regions.append(_union(side))
        band.clear()

    for b in sorted(boxes, key=lambda b: (b[1], b[0])):
        if b[0] < g < b[2]:  # crosses the gutter: a full-width band
            flush()
            regions.append(b)
        else:
            band.append(b)
    flush()
    return regions


def _union(boxes: list[Box]) -> Box:
    x0, y0, x1, y1 = zip(*boxes)
    return (min(x0), min(y0), max(x1), max(y1))


def page_ranges(nums, limit: int = 12) -> str:
    """[1, 2, 3, 7] -> "1-3, 7" (the first `limit` runs, then "...")."""
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a}-{b}" if a != b else f"{a}" for a, b in runs[:limit]]
    return ", ".join(parts) + (", ..." if len(runs) > limit else "")


def _parse_text(charset_normalizer, req: dict, kind: str) -> tuple:
    name = req["name"]
    if kind == "empty":
        raise EmptyDocument(f"{name} is empty")
    if kind == "zip":
        raise UnsupportedFile(
            f"{name} is a zip archive, not an EPUB; supported: PDF, EPUB, text, Markdown, TeX"
        )
    size = os.path.getsize(req["path"])
    if size > 4 * req["limits"]["max_chars"]:
        raise TooLarge(
            f"{name} is {size / 2**20:.0f} MB of text; the limit is {req['limits']['max_chars']:,} characters"
        )
    with open(req["path"], "rb") as f:
        data = f.read()
    text = _decode(charset_normalizer, data)
    if text is None:
        raise UnsupportedFile(
            f"{name} is neither a PDF, an EPUB nor text (unrecognised binary content); "
            "supported: PDF, EPUB, text, Markdown, TeX"
        )
    text = clean_text(text.lstrip("\ufeff"))
    if not text.strip():
        raise EmptyDocument(f"{name} contains no text")
    kind = text_kind(text, name)
    warnings = []
    if "\f" in text:
        pages = [p.strip("\n") for p in text.split("\f")]
    else:
        pages = split_pages(text)
        if len(pages) > 1:  # their mean size: a cut at the last paragraph break runs past TEXT_PAGE_CHARS
            size = round(sum(map(len, pages)) / len(pages), -2)
            warnings.append(f"text files have no pages: cut into {len(pages)} pages of about {size:,.0f} characters")
    return _text_title(text, kind), kind, [["", p] for p in pages], warnings


def _decode(charset_normalizer, data: bytes) -> str | None:
    # UTF-8 first: exact, fast, and right for nearly every file; charset-normalizer for the rest
    try:
        text = data.decode("utf-8")
        if _looks_like_text(text):
            return text
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(data).best()
    if best is None:
        return None
    if best.encoding.startswith(("utf_16", "utf_32")) and not _wide_text(data):
        return None  # NUL-laden binary "decodes" as UTF-16 mojibake
    text = str(best)
    return text if _looks_like_text(text) else None


def _wide_text(data: bytes) -> bool:
    """UTF-16/32 as files have it: a byte-order mark, or NUL bytes on one side of each 16-bit unit
    only (the high byte of Latin text). Binary with NULs scattered anywhere is not."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    sample = data[:1_000_000]
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    return min(even, odd) <= 0.02 * max(even, odd, 1)


_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufffd]")


def _looks_like_text(text: str) -> bool:
    """Text has (almost) no control characters; binary decoded as some 8-bit code page does."""
    if not text:
        return True
    sample = text[:1_000_000]
    return len(_CONTROL.findall(sample)) <= 0.01 * len(sample)


def split_pages(text: str, target: int = TEXT_PAGE_CHARS) -> list[str]:
    """Cut text into pages of about `target` characters, at a paragraph break, else a line break."""
    pages: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if n - i <= target * 1.5:
            pages.append(text[i:])
            break
        window_end = i + int(target * 1.5)
        cut = text.rfind("\n\n", i + target // 2, window_end)
        if cut < 0:
            cut = text.rfind("\n", i + target // 2, window_end)
        if cut < 0:
            cut = text.rfind(" ", i + target // 2, window_end)
        if cut < 0:
            cut = i + target
        pages.append(text[i:cut])
        i = cut
        while i < n and text[i] == "\n":  # the break itself is the page separator
            i += 1
    return [p for p in pages if p] or [""]


_JUNK_TITLES = {"untitled", "untitled document", "no title", "title", "document", "(anonymous)"}
_GUTENBERG_TITLE = re.compile(r"^Title: *(\S.*(?:\n {2,}\S.*)*)$", re.M)  # a header's title, continued indented
_TEX_TITLE = re.compile(r"\\title\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def _text_title(text: str, kind: str) -> str:
    if kind == "tex":
        m = _TEX_TITLE.search(text[:200_000])
        if m:
            return " ".join(m.group(1).split())
        return ""
    if kind == "markdown":
        m = re.search(r"^#{1,2} +(.+)$", text[:200_000], re.M)
        if m:
            return m.group(1).strip().strip("#").strip()
    m = _GUTENBERG_TITLE.search(text[:6_000])
    if m and "project gutenberg" in text[:600].lower():  # "The Project Gutenberg EBook of X, by Y": X
        return " ".join(m.group(1).split())
    for line in text[:20_000].splitlines():
        line = line.strip()
        if line:
            # "Frankenstein;" (a title continued on the next line): drop the trailing separator
            line = line.rstrip(";:,").strip()
            return line if len(line) <= 120 else ""
    return ""


if __name__ == "__main__":
    sys.exit(_worker_main())
