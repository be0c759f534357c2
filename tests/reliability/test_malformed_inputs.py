"""Rows 6, 7, 8 and 10 of the reliability plan: malformed PDFs, EPUBs and TeX, encrypted PDFs,
decompression bombs, page and size caps. Every input is built here. tests/ingest/test_parse.py
already covers an empty file, random bytes named .pdf, a truncated real PDF, a password asset and
the worker limits; tests/ingest/test_pipeline.py checks that such files leave the library as it was.

Every bad input must give an IngestError whose message is one line and names the file."""

from __future__ import annotations

import threading
import time
import zlib

import pytest

from ingest.errors import (
    DamagedFile,
    EmptyDocument,
    IngestError,
    ParseOutOfMemory,
    ParseTimeout,
    PasswordRequired,
    TooLarge,
    UnsupportedFile,
    WrongPassword,
)
from ingest.parse import ParseLimits, parse_file
from tests.epub import write_epub
from tests.ingest.conftest import snapshot
from tests.reliability.conftest import make_pdf


def _one_line(e: BaseException, name: str) -> None:
    msg = str(e)
    assert "\n" not in msg and "Traceback" not in msg and name in msg, msg


def _pdf_bytes(tmp_path, pages=("Alpha page one.", "Beta page two.", "Gamma page three.")) -> bytes:
    p = tmp_path / "base.pdf"
    make_pdf(p, list(pages))
    return p.read_bytes()


def _raw_pdf(content: bytes) -> bytes:
    """A one-page PDF around a Flate-compressed content stream (already compressed), with a
    correct xref, so MuPDF reads it as written."""
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources "
        b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    body, offsets = b"%PDF-1.7\n", []
    for i, o in enumerate(objs, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    body += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return body


# -- row 6: malformed PDFs -------------------------------------------------------------------------


def test_pdf_without_its_xref_is_repaired_and_says_so(tmp_path):
    data = _pdf_bytes(tmp_path)
    cut = data[: data.rindex(b"xref")] + b"%%EOF\n"  # the xref table, trailer and startxref removed
    path = tmp_path / "no-xref.pdf"
    path.write_bytes(cut)
    doc = parse_file(path)
    assert "Gamma page three." in doc.text and len(doc.pages) == 3
    assert any("repaired" in w for w in doc.warnings)


def test_pdf_with_a_garbled_xref(tmp_path):
    data = bytearray(_pdf_bytes(tmp_path))
    i = data.rindex(b"xref")
    data[i + 5 : i + 200] = b"9" * 195  # offsets pointing nowhere
    path = tmp_path / "bad-xref.pdf"
    path.write_bytes(bytes(data))
    try:
        doc = parse_file(path)
    except IngestError as e:
        _one_line(e, path.name)
    else:
        assert any("repaired" in w for w in doc.warnings)


@pytest.mark.parametrize("keep", [0.05, 0.3, 0.6, 0.95])
def test_truncated_pdfs(tmp_path, keep):
    data = _pdf_bytes(tmp_path)
    path = tmp_path / f"cut-{keep}.pdf"
    path.write_bytes(data[: max(9, int(len(data) * keep))])
    try:
        doc = parse_file(path)
    except (DamagedFile, EmptyDocument) as e:
        _one_line(e, path.name)
    else:
        assert any("repaired" in w for w in doc.warnings)


def test_pdf_header_then_random_bytes(tmp_path):
    import random

    path = tmp_path / "header-only.pdf"
    path.write_bytes(b"%PDF-1.7\n" + random.Random(3).randbytes(20_000))
    with pytest.raises((DamagedFile, EmptyDocument)) as e:
        parse_file(path)
    _one_line(e.value, path.name)


# -- row 6: malformed EPUBs and TeX --------------------------------------------------------------


_XHTML = '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>{}</body></html>'


@pytest.mark.parametrize("case", ["truncated", "no-container", "no-chapter", "empty-chapter", "broken-xml"])
def test_malformed_epubs(tmp_path, case):
    path = tmp_path / f"{case}.epub"
    if case == "truncated":
        write_epub(path, _XHTML.format("<p>words</p>" * 2000))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif case == "no-container":
        write_epub(path, _XHTML.format("<p>Some text.</p>"), container=False)
    elif case == "no-chapter":
        write_epub(path, None)
    elif case == "empty-chapter":
        write_epub(path, _XHTML.format(""))
    else:
        write_epub(path, "<html><body><p>unclosed <b>tags & bad entities &nope;")
    try:
        doc = parse_file(path)
    except IngestError as e:
        _one_line(e, path.name)
    else:  # MuPDF may read what is left; then it must be text, with no NUL
        assert doc.kind == "epub" and doc.text.strip() and "\x00" not in doc.text


def test_epub_zip_bomb_is_stopped(tmp_path):
    """A 200 KB EPUB whose chapter inflates to 200 MB: a typed error within the limits."""
    path = tmp_path / "bomb.epub"
    body = "<p>" + "a " * (100 * 2**20) + "</p>"
    write_epub(path, _XHTML.format(body))
    assert path.stat().st_size < 1_000_000
    t0 = time.monotonic()
    with pytest.raises((ParseOutOfMemory, ParseTimeout, TooLarge)) as e:
        parse_file(path, limits=ParseLimits(timeout_s=10, memory_mb=512, max_chars=2_000_000))
    # regression: MuPDF's "calloc (...) failed" was reported as a damaged file
    assert time.monotonic() - t0 < 30
    _one_line(e.value, path.name)


@pytest.mark.parametrize(
    "tex",
    [
        "\\documentclass{article}\\begin{document}\\section{Unclosed {brace\\begin{itemize}\\item one",
        "\\documentclass{article}\n" + "\\begin{env}" * 5000,
        "\\documentclass{article}\\begin{document}\\title{" + "x" * 100_000,
    ],
    ids=["unbalanced", "deep-nesting", "unterminated-title"],
)
def test_malformed_tex_is_read_as_text(tmp_path, tex):
    """TeX is never run or expanded: broken TeX is text, kind "tex", read as it is."""
    path = tmp_path / "broken.tex"
    path.write_text(tex)
    doc = parse_file(path)
    assert doc.kind == "tex" and doc.text.strip()


def test_tex_with_binary_garbage(tmp_path):
    import random

    path = tmp_path / "garbage.tex"
    path.write_bytes(b"\\documentclass{article}\n" + random.Random(5).randbytes(50_000))
    with pytest.raises(UnsupportedFile) as e:
        parse_file(path)
    _one_line(e.value, path.name)


# -- row 7: encrypted PDFs built here ------------------------------------------------------------


def test_aes256_pdf_with_user_and_owner_passwords(tmp_path, library, drt_home):
    import pymupdf

    from ingest.pipeline import ingest

    path = tmp_path / "aes256.pdf"
    make_pdf(path, ["Secret text on page one."], encryption=pymupdf.PDF_ENCRYPT_AES_256,
             user_pw="user-pw", owner_pw="owner-pw")  # fmt: skip
    assert b"/V 5" in path.read_bytes() or b"/V5" in path.read_bytes()  # AES-256 (R6)
    before = snapshot(drt_home)
    with pytest.raises(PasswordRequired) as e:
        ingest(path, library=library, engine=None, prefill=False)
    _one_line(e.value, path.name)
    with pytest.raises(WrongPassword):
        ingest(path, library=library, engine=None, prefill=False, password="wrong")
    assert snapshot(drt_home) == before  # no partial rows
    for pw in ("user-pw", "owner-pw"):
        assert "Secret text" in parse_file(path, password=pw).text
    res = ingest(path, library=library, engine=None, prefill=False, password="user-pw")
    assert res.status == "stored" and res.pages == 1


def test_owner_password_only_opens_without_a_password(tmp_path):
    import pymupdf

    path = tmp_path / "owner-only.pdf"
    make_pdf(path, ["Readable by anyone."], encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner-pw",
             permissions=0)  # fmt: skip
    assert "Readable by anyone." in parse_file(path).text


# -- row 8: decompression bombs ------------------------------------------------------------------


def test_flate_bomb_is_killed_at_the_deadline_and_the_parent_stays_responsive(tmp_path):
    """114 KB of PDF whose content stream inflates to 32 MB of text operators (~290:1): about 35 s
    of MuPDF CPU and 24M characters. A 2 s deadline kills the worker; the caller's threads keep
    running meanwhile."""
    op = b"BT /F1 1 Tf (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa) Tj ET "
    c = zlib.compressobj(9)
    block = op * ((8 << 20) // len(op))
    stream = b"".join([c.compress(block) for _ in range(4)] + [c.flush()])
    path = tmp_path / "bomb.pdf"
    path.write_bytes(_raw_pdf(stream))
    assert path.stat().st_size < 200_000
    ticks = [0]
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.05)

    t = threading.Thread(target=tick)
    t.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(ParseTimeout, match="too complex") as e:
            parse_file(path, limits=ParseLimits(timeout_s=2))
    finally:
        stop.set()
        t.join()
    assert time.monotonic() - t0 < 10
    assert ticks[0] >= 20  # the parent was never blocked
    _one_line(e.value, path.name)


# -- row 10: page and size caps --------------------------------------------------------------------


def test_five_thousand_blank_pages(tmp_path):
    path = tmp_path / "blank-5000.pdf"
    make_pdf(path, [None] * 5000)
    with pytest.raises(TooLarge, match="5,000 pages; the limit is 1,000") as e:
        parse_file(path, limits=ParseLimits(max_pages=1000))  # refused before any page is read
    _one_line(e.value, path.name)
    t0 = time.monotonic()
    with pytest.raises(EmptyDocument, match="no extractable text on any of its 5000 pages"):
        parse_file(path)  # under the default cap: read, found empty, refused
    assert time.monotonic() - t0 < 60


def test_huge_text_is_refused_before_tokenizing(tmp_path, library, drt_home):
    from ingest.pipeline import ingest

    path = tmp_path / "huge.txt"
    path.write_text(("All work and no play makes Jack a dull boy. " * 45 + "\n\n") * 1000)  # ~2M chars
    limits = ParseLimits(max_chars=1_000_000)
    with pytest.raises(TooLarge, match="characters of text; the limit is 1,000,000") as e:
        ingest(path, library=library, engine=None, prefill=False, limits=limits)
    _one_line(e.value, path.name)
    assert library.documents() == []
    tiny = ParseLimits(max_chars=100_000)  # a file over 4x the cap is refused before it is decoded
    with pytest.raises(TooLarge, match="MB of text"):
        parse_file(path, limits=tiny)
    with pytest.raises(TooLarge, match="the limit is 1 MB"):
        parse_file(path, limits=ParseLimits(max_file_mb=1))  # refused before the worker starts
