"""ingest.page and `drt-reader page`: the kept file, page images with a chunk highlighted (across a
page break too), text documents typeset, the passage in its context, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest.errors import IngestError
from ingest.page import (
    keep_original,
    match_words,
    original_path,
    passage_context,
    png_size,
    render_page,
    wrap_lines,
)
from ingest.pipeline import ingest, remove_document
from tests.epub import write_epub, xhtml
from tests.ingest.conftest import one_json


def _add(library, fake_engine, path: Path) -> str:
    return ingest(path, library=library, engine=fake_engine, prefill=False).doc_id


def _yellow(png: bytes, clip: tuple[float, float, float, float] | None = None) -> int:
    """Pixels that are yellow (red and green high, blue low), in `clip` (fractions of the image)."""
    pix = pymupdf.Pixmap(png)
    n, w, h = pix.n, pix.width, pix.height
    x0, y0, x1, y1 = (0, 0, w, h) if clip is None else (
        int(clip[0] * w), int(clip[1] * h), int(clip[2] * w), int(clip[3] * h))
    s = pix.samples
    count = 0
    for y in range(y0, y1):
        row = s[y * pix.stride + x0 * n : y * pix.stride + x1 * n]
        count += sum(1 for r, g, b in zip(row[0::n], row[1::n], row[2::n]) if r > 200 and g > 190 and b < 120)
    return count


def _cross_chunk(library, doc_id: str) -> dict:
    return next(c for c in library.chunks(doc_id) if c["page_first"] < c["page_last"])


@pytest.fixture
def emma(library, fake_engine, assets) -> str:
    return _add(library, fake_engine, assets / "emma-pp2-21.pdf")


def test_the_original_pdf_is_kept_and_removed_with_the_document(library, emma, assets, cli):
    kept = original_path(library.home, emma, "pdf")
    assert kept == Path(library.home) / "files" / f"{emma}.pdf"
    assert kept.read_bytes() == (assets / "emma-pp2-21.pdf").read_bytes()
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    rc, _, err = cli("rm", emma[:12])
    assert rc == 0, err
    assert not kept.exists()


def test_text_documents_keep_no_file(library, fake_engine, assets):
    doc_id = _add(library, fake_engine, assets / "frankenstein_excerpt.txt")
    files = Path(library.home) / "files"
    assert not files.exists() or not list(files.iterdir())
    remove_document(library, doc_id)  # nothing to delete is no error


def test_keep_original_never_fails(tmp_path, assets, caplog):
    pdf = assets / "emma-pp2-21.pdf"
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "files").write_text("a file where the folder should be")
    assert keep_original(blocked, "0" * 64, pdf, "pdf") is None
    # a file that is not the document's (its sha256 differs) is not kept either
    home = tmp_path / "home"
    assert keep_original(home, "0" * 64, pdf, "pdf") is None
    assert not list((home / "files").iterdir())  # nor a temporary left behind
    assert "could not keep" in caplog.text
    assert keep_original(home, "0" * 64, pdf, "text") is None


def test_ingest_again_keeps_the_file_of_a_document_added_before(library, fake_engine, emma, assets):
    kept = original_path(library.home, emma, "pdf")
    kept.unlink()  # as if added before drt-reader kept files
    with pytest.raises(IngestError, match="not kept"):
        render_page(library, emma, 1)
    _add(library, fake_engine, assets / "emma-pp2-21.pdf")
    assert kept.is_file()
    assert png_size(render_page(library, emma, 1))[0] > 0


def test_pdf_page_with_and_without_highlight(library, emma):
    chunk = next(c for c in library.chunks(emma) if c["page_first"] == c["page_last"] == 5)
    plain = render_page(library, emma, 5)
    marked = render_page(library, emma, 5, highlight=chunk["idx"])
    assert plain[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = png_size(plain)
    assert (w, h) == png_size(marked)
    page = pymupdf.open(str(original_path(library.home, emma, "pdf")))[4].rect
    assert abs(w - 1.5 * page.width) <= 1 and abs(h - 1.5 * page.height) <= 1
    assert _yellow(plain) == 0
    assert _yellow(marked) > 2000
    small = render_page(library, emma, 5, zoom=0.5)
    assert png_size(small)[0] < w


def test_highlight_is_where_the_chunk_text_is(library, emma):
    """The yellow pixels cover the words of the chunk, found by pymupdf's own search."""
    chunk = next(c for c in library.chunks(emma) if c["page_first"] == c["page_last"] == 5)
    words = chunk["text"].split()
    probe = " ".join(words[len(words) // 2 : len(words) // 2 + 3])
    doc = pymupdf.open(str(original_path(library.home, emma, "pdf")))
    found = doc[4].search_for(probe)
    assert found, probe
    r = found[0]
    page = doc[4].rect
    clip = (r.x0 / page.width, r.y0 / page.height, r.x1 / page.width, r.y1 / page.height)
    png = render_page(library, emma, 5, highlight=chunk["idx"])
    inside = _yellow(png, clip)
    area = (clip[2] - clip[0]) * (clip[3] - clip[1]) * png_size(png)[0] * png_size(png)[1]
    assert inside > 0.3 * area  # most of the probe's box is yellow (the rest: its black letters)
    # and a far-away passage is not
    other = next(c for c in library.chunks(emma) if c["page_first"] == c["page_last"] == 5
                 and abs(c["idx"] - chunk["idx"]) > 3)
    assert _yellow(render_page(library, emma, 5, highlight=other["idx"]), clip) < 0.05 * area


def test_a_chunk_over_a_page_break_is_highlighted_on_both_pages(library, emma):
    c = _cross_chunk(library, emma)
    first, last = c["page_first"], c["page_last"]
    end = render_page(library, emma, first, highlight=c["idx"])
    start = render_page(library, emma, last, highlight=c["idx"])
    assert _yellow(end, (0, 0.6, 1, 1)) > 500  # the bottom of the first page
    assert _yellow(end, (0, 0, 1, 0.5)) == 0
    assert _yellow(start, (0, 0, 1, 0.4)) > 200  # the top of the next page
    assert _yellow(start, (0, 0.5, 1, 1)) == 0


def test_match_words_finds_the_span_and_the_cut_words():
    text = "one two three four five six seven eight nine ten"
    words = text.split()
    a = text.index("three")
    b = text.index("six") + 3
    assert match_words(text, (a, b), words) == [2, 3, 4, 5]
    # cut inside words at both ends: the page words they belong to count
    assert match_words(text, (a + 2, b - 1), words) == [2, 3, 4, 5]
    # the page lists a line elsewhere (another order): still found
    moved = ["nine", "ten", *words[:8]]
    assert [moved[i] for i in match_words(text, (a, b), moved)] == ["three", "four", "five", "six"]
    # a repeated phrase: the occurrence where the stored text puts it
    text2 = "the cat sat down here and the cat sat down there"
    a2 = text2.rindex("the cat")
    hits = match_words(text2, (a2, len(text2)), text2.split())
    assert hits == [6, 7, 8, 9, 10]


def test_text_document_pages_are_typeset(library, fake_engine, assets):
    doc_id = _add(library, fake_engine, assets / "frankenstein_excerpt.txt")
    c = _cross_chunk(library, doc_id)
    plain = render_page(library, doc_id, c["page_first"])
    w, h = png_size(plain)
    assert 800 < w < 1000 and h >= 1200
    assert _yellow(plain) == 0
    for page in (c["page_first"], c["page_last"]):
        assert _yellow(render_page(library, doc_id, page, highlight=c["idx"])) > 1000
    n_pages = library.document(doc_id)["n_pages"]
    assert png_size(render_page(library, doc_id, n_pages))[0] == w


def test_tex_document_renders(library, fake_engine, assets):
    doc_id = _add(library, fake_engine, assets / "stacks-brauer.tex")
    assert png_size(render_page(library, doc_id, 1, highlight=0))[0] > 0


def test_wrap_lines_keeps_offsets():
    text = "a long line of words that must wrap\n\nshort"
    lines = wrap_lines(text, len, 10)
    assert all(len(s.rstrip()) <= 10 for _, s in lines)  # a space at the break may overhang
    for off, s in lines:
        assert text[off : off + len(s)] == s
    assert "".join(s for _, s in lines[:-2]) == "a long line of words that must wrap"


def _epub(path: Path, paragraphs: list[str]) -> Path:
    return write_epub(path, xhtml("".join(f"<p>{p}</p>" for p in paragraphs)), title="Owls")


def test_epub_pages_use_the_parser_layout(library, fake_engine, tmp_path):
    words = "the quick brown fox jumps over a lazy dog while seven silent owls watch from old oaks".split()
    paras = [" ".join(words[(i * 7 + k) % len(words)] for k in range(80)) + f" paragraph{i}."
             for i in range(30)]
    doc_id = _add(library, fake_engine, _epub(tmp_path / "owls.epub", paras))
    assert library.document(doc_id)["kind"] == "epub"
    assert original_path(library.home, doc_id, "epub").is_file()
    c = _cross_chunk(library, doc_id)
    for page in (c["page_first"], c["page_last"]):
        png = render_page(library, doc_id, page, highlight=c["idx"], zoom=1.0)
        assert png_size(png) == (420, 595)  # parse.EPUB_PAGE
        assert _yellow(png) > 300


def test_passage_context(library, emma):
    c = _cross_chunk(library, emma)
    ctx = passage_context(library, emma, c["idx"], chars=200)
    assert ctx["text"] == c["text"] and ctx["pages"] == [c["page_first"], c["page_last"]]
    assert 150 < len(ctx["before"]) <= 200 and 150 < len(ctx["after"]) <= 200
    assert library.chunks(emma, [c["idx"] + 1])[0]["text"].startswith(ctx["after"][:100])
    assert library.chunks(emma, [c["idx"] - 1])[0]["text"].endswith(ctx["before"][-100:])
    first = passage_context(library, emma, 0)
    assert first["before"] == ""
    n = library.document(emma)["n_chunks"]
    assert passage_context(library, emma, n - 1)["after"] == ""


ERRORS = [  # (page, chunk, message) on emma-pp2-21.pdf: 20 pages, 288 chunks, chunk 5 on p. 1
    (900, None, "page 900 is not in this document (1-20)"),
    (0, None, "page 0 is not in this document (1-20)"),
    (1, 5000, "chunk 5000 is not in this document (0 to 287)"),
    (3, 5, "chunk 5 is on p. 1, not on p. 3"),
]


def test_errors_are_one_line(library, emma):
    for page, chunk, message in ERRORS:
        with pytest.raises(IngestError) as e:
            render_page(library, emma, page, highlight=chunk)
        assert str(e.value) == message
    with pytest.raises(IngestError, match=r"^chunk -1 is not in this document"):
        passage_context(library, emma, -1)
    with pytest.raises(IngestError, match="zoom"):
        render_page(library, emma, 1, zoom=100)


def test_cli_page(cli, assets, tmp_path):
    rc, out, err = cli("ingest", str(assets / "emma-pp2-21.pdf"), "--json")
    assert rc == 0, err
    doc_id = one_json(out)["doc_id"]
    dest = tmp_path / "p2.png"
    rc, out, err = cli("page", "emma", "2", "--highlight", "8", "--out", str(dest), "--json")
    assert rc == 0, err
    obj = one_json(out)
    assert set(obj) == {"doc_id", "page", "highlight", "out", "width", "height"}
    assert obj["doc_id"] == doc_id and obj["page"] == 2 and obj["highlight"] == 8
    assert (obj["width"], obj["height"]) == png_size(dest.read_bytes())
    rc, out, err = cli("page", doc_id[:8], "3", "--out", str(tmp_path / "p3.png"))
    assert rc == 0 and out.strip() == str(tmp_path / "p3.png")
    assert (tmp_path / "p3.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_page_errors(cli, assets, tmp_path):
    rc, _, err = cli("ingest", str(assets / "emma-pp2-21.pdf"), "--json")
    assert rc == 0, err
    for page, chunk, message in ERRORS:
        argv = [str(page)] + (["--highlight", str(chunk)] if chunk is not None else [])
        rc, out, err = cli("page", "emma", *argv, "--out", str(tmp_path / "x.png"))
        assert rc == 2 and out == ""
        assert err.strip() == f"drt-reader: error: {message}"
        assert not (tmp_path / "x.png").exists()
    rc, _, err = cli("page", "emma", "1", "--out", str(tmp_path / "no" / "such" / "x.png"))
    assert rc == 2 and err.startswith("drt-reader: error: cannot write")


def test_cli_page_needs_out(cli):
    with pytest.raises(SystemExit):
        cli("page", "emma", "1")


def test_cli_page_of_a_pdf_without_its_file(cli, assets, tmp_path, drt_home):
    rc, out, _ = cli("ingest", str(assets / "emma-pp2-21.pdf"), "--json")
    doc_id = one_json(out)["doc_id"]
    (drt_home / "files" / f"{doc_id}.pdf").unlink()
    rc, _, err = cli("page", "emma", "1", "--out", str(tmp_path / "x.png"), "--json")
    assert rc == 2
    assert "the original file of this document is not kept" in err and "add it again" in err
    assert len(err.strip().splitlines()) == 1
