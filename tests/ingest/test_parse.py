"""ingest.parse on real files (tests/assets, see its README) and on built-in-test edge cases."""

from __future__ import annotations

import re
import shutil

import pytest

from ingest.errors import (
    DamagedFile,
    EmptyDocument,
    IngestError,
    ParseOutOfMemory,
    ParseTimeout,
    PasswordRequired,
    UnsupportedFile,
    WrongPassword,
)
from ingest.parse import PAGE_SEPARATOR, ParseLimits, clean_text, parse_file, sniff, split_pages, text_kind
from tests.epub import write_epub, xhtml


def _spans_consistent(doc) -> None:
    assert doc.text == PAGE_SEPARATOR.join(p.text for p in doc.pages)
    for i, p in enumerate(doc.pages):
        assert p.number == i + 1
        assert doc.text[p.char_start : p.char_end] == p.text
    assert "\x00" not in doc.text


def test_sniff_is_by_content():
    assert sniff(b"%PDF-1.7\n...") == "pdf"
    assert sniff(b"\xef\xbb\xbfjunk %PDF-1.4") == "pdf"  # leading junk is allowed by readers
    assert sniff(b"") == "empty"
    def local_header(name: bytes) -> bytes:
        return b"PK\x03\x04" + bytes(22) + len(name).to_bytes(2, "little") + bytes(2) + name

    assert sniff(local_header(b"mimetype") + b"application/epub+zip") == "epub"
    assert sniff(local_header(b"word/x.xml") + b"<xml/>") == "zip"
    assert sniff(b"hello") == "other"


def test_text_kind():
    assert text_kind("\\documentclass{article}\n\\begin{document}x\\end{document}") == "tex"
    assert text_kind("\\input{preamble}\n\\begin{document}\n\\section{A}\n\\label{s}\n") == "tex"
    assert text_kind("\\begin{lemma} x \\end{lemma}", "notes.tex") == "tex"
    assert text_kind("# Title\n\n- a\n- b\n", "x.md") == "markdown"
    assert text_kind("# Title\n\n- a\n- b\n\n## more\n", "x.txt") == "markdown"
    assert text_kind("Just prose, with a \\begin{ somewhere.", "x.txt") == "text"


def test_clean_text_strips_nul_and_lone_surrogates():
    assert clean_text("a\x00b\ud800c\udfffd\r\ne\rf") == "abcd\ne\nf"


def test_split_pages_at_paragraphs():
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 100 for i in range(40))
    pages = split_pages(text, 3000)
    assert 5 <= len(pages) <= 12
    assert all(p.startswith("Paragraph") for p in pages)
    assert sum(len(p) for p in pages) + 2 * (len(pages) - 1) == len(text)


def test_book_pdf(assets):
    doc = parse_file(assets / "emma-pp2-21.pdf")
    assert doc.kind == "pdf" and doc.title == "Emma"
    assert len(doc.pages) == 20
    _spans_consistent(doc)
    assert "Emma Woodhouse, handsome, clever, and rich" in doc.pages[0].text
    assert [p.label for p in doc.pages[:3]] == ["1", "2", "3"]  # no printed labels: the number
    assert doc.warnings == []
    assert "  " not in doc.pages[1].text.replace("\n  ", "\n")  # sort=True padding is tidied


def test_page_labels_roman_then_arabic(assets):
    doc = parse_file(assets / "geotopo-pp1-10.pdf")
    assert [p.label for p in doc.pages] == ["i", "ii", "iii", "1", "2", "3", "4", "5", "6", "7"]
    assert doc.title == "Geometrie und Topologie"
    assert "Topologische Räume" in doc.text
    _spans_consistent(doc)


def test_encrypted_pdf(assets):
    path = assets / "005-libreoffice-writer-password.pdf"
    with pytest.raises(PasswordRequired, match="encrypted"):
        parse_file(path)
    with pytest.raises(WrongPassword):
        parse_file(path, password="not-it")
    doc = parse_file(path, password="openpassword")
    assert "Lorem ipsum" in doc.text


def test_malformed_pdf_is_a_clear_error(assets):
    with pytest.raises(DamagedFile, match="damaged") as e:
        parse_file(assets / "017-unreadable-meta-data__unreadablemetadata.pdf")
    assert "\n" not in str(e.value)


def test_arabic_pdf(assets):
    doc = parse_file(assets / "015-arabic__habibi.pdf")
    assert "حَبيبي" in doc.text and "habibi" in doc.text


def test_multicolumn_reading_order(assets):
    """sort=True alone joins the two columns line by line; the left column must come first."""
    text = parse_file(assets / "026-latex-multicolumn__multicolumn.pdf").pages[0].text
    left_end = text.index("Nulla malesuada porttitor diam")
    right_start = text.index("pellentesque ante. Phasellus adipiscing semper elit.")
    assert text.index("Abstract") < left_end < right_start
    for line in text.splitlines():  # no line mixes the two columns
        assert not ("Curabitur consectetuer" in line and "luctus et ultrices" in line)


def test_tex_keeps_labels_and_refs(assets):
    doc = parse_file(assets / "stacks-brauer.tex")
    assert doc.kind == "tex" and doc.title == "Brauer groups"
    assert "\\label{section-introduction}" in doc.text
    assert "\\ref{" in doc.text
    assert len(doc.pages) > 3 and any("no pages" in w for w in doc.warnings)
    _spans_consistent(doc)


def test_titles_without_trailing_separator_or_placeholder(assets, tmp_path):
    """Regression (end-to-end run): "Frankenstein;" was the title of the Frankenstein excerpt, and
    a PDF whose producer wrote "untitled" into its metadata was listed as "untitled"."""
    import pymupdf

    assert parse_file(assets / "frankenstein_excerpt.txt").title == "Frankenstein"
    pdf = tmp_path / "placeholder.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Some text on a page.")
    doc.set_metadata({"title": "untitled"})
    doc.save(pdf)
    doc.close()
    assert parse_file(pdf).title == ""  # the pipeline then falls back to the file name


def test_a_gutenberg_text_is_titled_by_its_header_not_its_first_line(tmp_path):
    """Regression (new-user walk): a Gutenberg text was listed as "The Project Gutenberg EBook of The
    Autobiography o..." (its first line); its header's "Title:" line says what the book is called."""
    book = tmp_path / "148.txt"
    book.write_text("The Project Gutenberg EBook of The Autobiography of Benjamin Franklin, by\nBenjamin Franklin\n\n"
                    "This eBook is for the use of anyone anywhere at no cost.\n\n"
                    "Title: The Autobiography of Benjamin Franklin\n\nAuthor: Benjamin Franklin\n\n"
                    + "I had a brother.\n" * 50)
    assert parse_file(book).title == "The Autobiography of Benjamin Franklin"
    two = tmp_path / "two.txt"  # a title continued on an indented line
    two.write_text("The Project Gutenberg eBook of Katrine\n\nTitle: Katrine\n       A Novel\n\nAuthor: E. Lane\n\n"
                   + "Words of the book.\n" * 50)
    assert parse_file(two).title == "Katrine A Novel"
    plain = tmp_path / "notes.txt"  # no Gutenberg header: the first line, as before, even with a "Title:" line
    plain.write_text("My notes\n\nTitle: something else\n" + "More words here.\n" * 50)
    assert parse_file(plain).title == "My notes"


def test_content_not_name_decides(assets, tmp_path):
    pdf_as_txt = tmp_path / "looks-like.txt"
    shutil.copy(assets / "015-arabic__habibi.pdf", pdf_as_txt)
    assert parse_file(pdf_as_txt).kind == "pdf"
    tex_as_txt = tmp_path / "chapter.txt"
    shutil.copy(assets / "stacks-brauer.tex", tex_as_txt)
    assert parse_file(tex_as_txt).kind == "tex"
    with pytest.raises(UnsupportedFile, match="neither a PDF"):
        parse_file(assets / "random-bytes.pdf")


def test_empty_file(assets, tmp_path):
    with pytest.raises(EmptyDocument, match="empty"):
        parse_file(assets / "empty.txt")
    blank = tmp_path / "blank.md"
    blank.write_text("  \n\n \t\n")
    with pytest.raises(EmptyDocument):
        parse_file(blank)


def test_missing_file(tmp_path):
    with pytest.raises(IngestError, match="no such file"):
        parse_file(tmp_path / "nope.pdf")


def test_text_encodings_and_nul(tmp_path):
    latin = tmp_path / "latin1.txt"
    line = "Ça va très bien, merci. Über die Brücke gehen wir nicht.\n"
    latin.write_bytes((line * 30).encode("cp1252"))
    doc = parse_file(latin)
    assert doc.kind == "text" and "Über die Brücke" in doc.text
    u16 = tmp_path / "u16.txt"
    u16.write_bytes(("Hello world, UTF-16 without a byte order mark.\n" * 30).encode("utf-16-le"))
    assert "UTF-16 without" in parse_file(u16).text
    stray = tmp_path / "stray-nul.txt"
    stray.write_bytes(b"One stray\x00 NUL in plain text.\n" + b"Ordinary line of text here.\n" * 50)
    assert "stray NUL" in parse_file(stray).text
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\x00\x01\x02\x03binary\x00\x00" * 500)
    with pytest.raises(UnsupportedFile):
        parse_file(binary)


def _pdf(path, pages: list[str | None]) -> None:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        if text is None:  # an image only, like a scanned page
            pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 32, 32), False)
            pix.clear_with(128)
            page.insert_image(pymupdf.Rect(50, 50, 300, 300), pixmap=pix)
        elif text:
            page.insert_text((72, 72), text)
    doc.save(path)


def test_pages_without_text_are_reported(tmp_path):
    path = tmp_path / "mixed.pdf"
    _pdf(path, ["First page has text.", None, "", "Fourth page too."])
    doc = parse_file(path)
    assert len(doc.pages) == 4
    assert not doc.pages[1].text.strip() and not doc.pages[2].text.strip()
    assert any("no text" in w and "2-3" in w for w in doc.warnings)


def test_no_text_at_all_is_an_error(tmp_path):
    path = tmp_path / "scanned.pdf"
    _pdf(path, [None, None])
    with pytest.raises(EmptyDocument, match="no extractable text"):
        parse_file(path)


def test_truncated_pdf_is_repaired_and_says_so(assets, tmp_path):
    data = (assets / "emma-pp2-21.pdf").read_bytes()
    cut = tmp_path / "truncated.pdf"
    cut.write_bytes(data[: len(data) * 2 // 3])
    doc = parse_file(cut)
    assert len(doc.pages) == 20 and "Emma Woodhouse" in doc.text
    assert any("repaired" in w for w in doc.warnings)
    assert any("lost to the damage" in w for w in doc.warnings)  # the pages whose objects were cut off


def test_epub_is_laid_out_into_pages(tmp_path):
    path = tmp_path / "book.epub"
    chapter = "".join(f"<p>Paragraph {i} of the tiny test book, long enough to wrap.</p>" for i in range(120))
    write_epub(path, xhtml(f"<h1>Chapter One</h1>{chapter}", title="C1"), title="Tiny Test Book", language="en")
    doc = parse_file(path.rename(tmp_path / "book.bin"))  # the name says nothing
    assert doc.kind == "epub" and doc.title == "Tiny Test Book"
    assert len(doc.pages) > 2
    assert "Chapter One" in doc.pages[0].text and "Paragraph 119" in doc.text
    _spans_consistent(doc)


def test_timeout_kills_the_worker(assets):
    with pytest.raises(ParseTimeout, match="longer than") as e:
        parse_file(assets / "emma-pp2-21.pdf", limits=ParseLimits(timeout_s=0.01))
    assert "\n" not in str(e.value)


def test_memory_limit_is_a_clear_error(assets):
    with pytest.raises(ParseOutOfMemory, match="out of memory"):
        parse_file(assets / "geotopo-pp1-10.pdf", limits=ParseLimits(memory_mb=1))


def test_worker_deaths_are_one_line_errors():
    """A signal from MuPDF's C code (or the OOM killer) must become a clear error, never a traceback."""
    from ingest.errors import ParseCrashed
    from ingest.parse import _result

    limits = ParseLimits()
    with pytest.raises(ParseCrashed, match="SIGSEGV"):
        _result(-11, b"", b"Fatal Python error: Segmentation fault\n", "x.pdf", limits)
    with pytest.raises(ParseOutOfMemory):
        abort = b"terminate called after throwing an instance of 'std::bad_alloc'\n"
        _result(-6, b"", abort, "x.pdf", limits)
    with pytest.raises(ParseTimeout):
        _result(-9, b"", b"", "x.pdf", limits)
    with pytest.raises(ParseCrashed, match="exit status 1") as e:
        _result(1, b"not json", b"Traceback (most recent call last):\nValueError: boom\n", "x.pdf", limits)
    assert "\n" not in str(e.value)


def test_pdf_bookmarks_are_kept(assets):
    """The PDF's outline (bookmarks) comes back with the pages: the parts a summary covers."""
    doc = parse_file(assets / "006-pdflatex-outline.pdf")
    assert doc.outline and all(1 <= pg <= len(doc.pages) and title and lv >= 1 for lv, title, pg in doc.outline)
    assert doc.outline[0][:2] == (1, "Foo")
    assert parse_file(assets / "geotopo-pp1-10.pdf").outline == []  # an extract without bookmarks


def test_bookmarks_read_tex_quotes_as_printed():
    """itcs20's bookmark "Supporting ``First Return'' Queries" showed TeX's quotes in the outline and the
    summary's headings; a prime (f'') stays."""
    from ingest.parse import _assemble

    doc = _assemble("t", "pdf", [("1", "text")], [], [(2, "Supporting ``First Return'' Queries ", 1),
                                                       (2, "Bounds on f'' and g''", 1)])
    assert [t for _, t, _ in doc.outline] == ["Supporting \u201cFirst Return\u201d Queries", "Bounds on f'' and g''"]


def test_ingest_stores_the_bookmarks(assets, library, fake_engine):
    from ingest.pipeline import ingest

    res = ingest(assets / "006-pdflatex-outline.pdf", library=library, engine=fake_engine)
    got = library.outline(res.doc_id)
    assert [o["title"] for o in got][:3] == ["Foo", "Bar", "Baz"] and all(o["page"] >= 1 for o in got)


def test_printed_page_numbers_standing_alone_are_taken_out(tmp_path):
    """A page number alone on a page's last (or first) line, following the page order, split the
    sentence running over the page break and was quoted ("linked subprograms 4 that the work"); a
    number that does not follow the pages (a total closing a page) stays."""
    import pymupdf

    path = tmp_path / "numbered.pdf"
    doc = pymupdf.open()
    bodies = ["The code for shared libraries and dynamically linked subprograms",
              "that the work is specifically designed to require. Totals", "The end of it all."]
    for i, body in enumerate(bodies):
        page = doc.new_page()
        page.insert_text((72, 72), body)
        page.insert_text((290, 800), str(i + 3))  # printed numbers 3, 4, 5 (front matter unnumbered)
    doc.new_page().insert_text((72, 72), "A table\n17")  # a number, but not this page's
    doc.save(path)
    parsed = parse_file(path)
    texts = [p.text for p in parsed.pages]
    assert texts[:3] == bodies and texts[3] == "A table\n17"
    assert "linked subprograms\n\nthat the work" in parsed.text
    _spans_consistent(parsed)


def test_roman_page_numbers_at_the_top_are_taken_out_too(tmp_path):
    """Project Gutenberg's Dumas PDFs print "lxxvii" atop page 77: it split the sentence ("punc- lxxviii
    tuality") and started every page's text."""
    import pymupdf

    from ingest.pdf_structure import roman

    assert [roman(w) for w in ("lxxvii", "XIV", "iv", "Xiv", "I", "vv", "")] == [77, 14, 4, 0, 1, 0, 0]
    path = tmp_path / "roman.pdf"
    doc = pymupdf.open()
    bodies = ["He spoke of it,", "and of more,", "and then he left.", "The end."]
    for i, body in enumerate(bodies):
        page = doc.new_page()
        page.insert_text((290, 40), ["xli", "xlii", "xliii", "xliv"][i])
        page.insert_text((72, 90), body)
    doc.new_page().insert_text((72, 72), "Chapter IV\nThe king came.")  # a heading, no page number
    doc.save(path)
    texts = [p.text for p in parse_file(path).pages]
    assert texts[:4] == bodies and texts[4] == "Chapter IV\nThe king came."


def test_running_heads_are_taken_out(tmp_path):
    """A paper's "6 CONTENTS" / "CONTENTS 7" and "CCC'16" atop and at the foot of its pages went into
    the text and split the sentence over each page break; a line that ends a few scattered pages
    ('"Yes."') and a lone end mark stay."""
    import pymupdf

    path = tmp_path / "heads.pdf"
    doc = pymupdf.open()
    for i in range(12):
        page = doc.new_page()
        head = f"{i + 1} A BOOK OF TESTS" if i % 2 else f"A BOOK OF TESTS {i + 1}"
        page.insert_text((72, 40), head)
        page.insert_text((72, 90), f"The sentence of page {i + 1} runs on")
        if i in (0, 5, 10):  # a line of dialogue ends three scattered pages
            page.insert_text((72, 110), '"Yes."')
        elif i in (3, 4, 7):  # an end mark ends pages in step
            page.insert_text((72, 110), "and ends here.\n<")
        else:
            page.insert_text((72, 110), "and ends here.")
            page.insert_text((72, 800), "CCC'16")
    doc.save(path)
    texts = [p.text for p in parse_file(path).pages]
    assert not any("A BOOK OF TESTS" in t or "CCC'16" in t for t in texts)
    assert texts[0].startswith("The sentence of page 1 runs on") and texts[0].endswith('"Yes."')
    assert texts[5].endswith('"Yes."') and texts[10].endswith('"Yes."')
    assert texts[4].endswith("<")  # a mark without letters is no running head


def test_a_pdf_without_bookmarks_gets_its_numbered_bold_sections_as_its_outline(tmp_path):
    """Two of the three real papers under ../shared/fresh have no bookmarks (or one): their outline was
    page spans. The numbered section headings they print in bold, larger than the text, become the
    bookmarks ("1 Introduction", also with the number on a line of its own); a bold running head is none,
    and neither is a bold number in the text's own size."""
    import pymupdf

    path = tmp_path / "paper.pdf"
    doc = pymupdf.open()
    body = "This is the body text of the paper, set in the ordinary size and weight. " * 3
    heads = [("1", "Introduction"), ("2", "Preliminaries"), ("3", "Results and Proofs")]
    for i, (num, title) in enumerate(heads):
        page = doc.new_page()
        page.insert_text((72, 40), f"{i + 1} Journal of Tests", fontname="hebo", fontsize=14)  # a running head
        if i == 1:  # the number on its own line, the title under it
            page.insert_text((72, 100), num, fontname="hebo", fontsize=14)
            page.insert_text((72, 120), title, fontname="hebo", fontsize=14)
        else:
            page.insert_text((72, 110), f"{num} {title}", fontname="hebo", fontsize=14)
        for k in range(12):
            page.insert_text((72, 160 + 14 * k), body[:90], fontname="helv", fontsize=10)
        page.insert_text((72, 360), "4 Lemma", fontname="hebo", fontsize=10)
    doc.save(path)
    parsed = parse_file(path)
    assert parsed.outline == [(1, "1 Introduction", 1), (1, "2 Preliminaries", 2), (1, "3 Results and Proofs", 3)]
    bare = tmp_path / "plain.pdf"
    _pdf(bare, ["Chapter text without any heading.", "More text."])
    assert parse_file(bare).outline == []


def test_a_bold_section_title_with_math_and_the_lettered_appendices_are_in_the_outline(tmp_path):
    """ccc16's outline from its bold headings was 1, 2, 3, 5, 6: "4 Reconstruction for arbitrary rank"
    sets "rank" in math italic (the line was not all bold), and its appendices A-H print a letter on
    its own line, the title under it. A line mostly in bold from its first word is bold; after the
    numbered sections, the letters from A continue the chain."""
    import pymupdf

    path = tmp_path / "paper.pdf"
    doc = pymupdf.open()
    body = "This is the body text of the paper, set in the ordinary size and weight. " * 3
    for num, title in (("1", "Introduction"), ("2", "Reconstruction for arbitrary"), ("A", "Tools"),
                       ("B", "Proofs of Section 2")):
        page = doc.new_page()
        if num.isdigit():
            page.insert_text((72, 110), f"{num} {title}", fontname="hebo", fontsize=14)
        else:
            page.insert_text((72, 100), num, fontname="hebo", fontsize=14)
            page.insert_text((72, 120), title, fontname="hebo", fontsize=14)
        if num == "2":  # a word in math italic at the title's end
            x = 72 + pymupdf.get_text_length(f"{num} {title} ", fontname="hebo", fontsize=14)
            page.insert_text((x, 110), "rank", fontname="heit", fontsize=14)
        for k in range(12):
            page.insert_text((72, 160 + 14 * k), body[:90], fontname="helv", fontsize=10)
    doc.save(path)
    assert parse_file(path).outline == [(1, "1 Introduction", 1), (1, "2 Reconstruction for arbitrary rank", 2),
                                        (1, "A Tools", 3), (1, "B Proofs of Section 2", 4)]


def test_a_page_label_written_as_a_hex_string_is_read():
    """freedesktop's shared-mime-info spec labels its pages "<FEFF0031>" (UTF-16 as a hex string),
    which MuPDF passes on as it is: the reader saw "p. 1 (<FEFF0031>)" (tried as a new user would)."""
    from ingest.parse import printed_label

    assert [printed_label(x) for x in ("<FEFF0031>", "<FEFF00310036>", "<FEFF 0078 0069>", "<414243>")] == [
        "1", "16", "xi", "ABC"]
    assert [printed_label(x) for x in ("vii", "12", "", "<not hex>")] == ["vii", "12", "", "<not hex>"]


def test_a_text_files_warning_gives_the_pages_real_size(tmp_path):
    """The cut takes the last paragraph break before 1.5 times the target, so pages run to about
    4,300 characters, not the 3,000 the warning said (walk 12, Under the Greenwood Tree: "cut into 81
    pages of about 3000 characters", 345,870 characters). It now says their mean, rounded."""
    path = tmp_path / "book.txt"
    path.write_text("\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(400)), encoding="utf-8")
    doc = parse_file(path)
    mean = sum(len(p.text) for p in doc.pages) / len(doc.pages)
    said = re.search(r"cut into (\d+) pages of about ([\d,]+) characters", " ".join(doc.warnings))
    assert said and int(said.group(1)) == len(doc.pages)
    assert abs(int(said.group(2).replace(",", "")) - mean) <= 60


def _margin_notes_pdf(path, left: bool = False) -> None:
    """A page set as tufte-style LaTeX sets one: a main text column (10 pt, x 70-410) and a narrow
    column of notes (8 pt) in the margin whose lines sit at the heights of the main text's lines."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    main_x, note_x = (230, 60) if left else (70, 440)
    main = ["The first cohomology H1(G, A) is defined for every G-module A and",
            "every group G acting on it. In this case, H1(G, A) doesn't have a group",
            "structure, but is a pointed set (a",
            "set with a distinguished element). We can still define exactness for",
            "sequences of pointed sets.",
            "Proposition 1.5. For A <G B, we obtain an action of G on B/A and an",
            "exact sequence of pointed sets in which every map is G-equivariant.",
            "This is the Galois cohomology of the group G with coefficients in A."]
    y = [100 + 14 * i + 10 * (i >= 5) + 10 * (i >= 7) for i in range(len(main))]  # paragraphs set apart
    for i, line in enumerate(main):
        page.insert_text((main_x, y[i]), line, fontsize=10)
    notes = {2: "sa denotes the action of s on a.", 5: "A <G B is G-equivariant inclusion."}
    for i, line in notes.items():
        page.insert_text((note_x, y[i]), line, fontsize=8)
    page.insert_text((70, 40), "galois cohomology of algebraic groups" + " " * 60 + "6", fontsize=10)
    doc.save(path)
    doc.close()


@pytest.mark.parametrize("left", [False, True])
def test_a_margin_note_is_read_apart_from_the_main_text(tmp_path, left):
    """Walk 12, item 8 (lecture notes with margin notes): a note's line and the text line at its
    height were read as one line, "A ≤G B is G-equivariant inclusion.Proposition 1.5. For A ≤G B
    ...", so the outline missed Proposition 1.5, and another note was spliced into a sentence ("is a
    pointed set (a σa denotes the action of σ on a.\\nset with a distinguished element)"). The notes
    are read apart, each after the main text's run of lines it stands beside."""
    pdf = tmp_path / "notes.pdf"
    _margin_notes_pdf(pdf, left=left)
    text = parse_file(pdf).pages[0].text
    lines = text.splitlines()
    assert "Proposition 1.5. For A <G B, we obtain an action of G on B/A and an" in lines
    assert "A <G B is G-equivariant inclusion." in lines and "sa denotes the action of s on a." in lines
    assert "but is a pointed set (a\nset with a distinguished element)" in text
    assert text.index("sequences of pointed sets.") < text.index("sa denotes") < text.index("Proposition 1.5.")
    assert text.index("A <G B is") > text.index("every map is G-equivariant.")
    assert lines[0].startswith("galois cohomology of algebraic groups") and lines[0].endswith("6")
