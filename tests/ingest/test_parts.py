"""ingest.parts: a document's chapters from its bookmarks, its headings, or equal page spans."""

from __future__ import annotations

import pytest

from ingest.errors import IngestError
from ingest.parts import document_parts, document_text, heading_number, headings, select
from tests.ingest.docstore import store_text

BODY = "It was a quiet day in the town and nobody said a word about it. " * 12


def book(n: int = 5, contents: bool = True) -> str:
    head = "A NOVEL\n\n"
    if contents:
        head += "CONTENTS\n\n" + "".join(f"CHAPTER {r}\n" for r in ("I", "II", "III", "IV", "V")[:n]) + "\n"
    return head + "".join(f"\n\nCHAPTER {r}\n\n{BODY}" for r in ("I", "II", "III", "IV", "V")[:n])


def test_headings_skip_the_contents_list_and_keep_the_chapters():
    text = book()
    got = headings(text)
    assert [t for t, _ in got] == ["CHAPTER I", "CHAPTER II", "CHAPTER III", "CHAPTER IV", "CHAPTER V"]
    assert all(text[pos:pos + len(t)] == t for t, pos in got)
    assert got[0][1] > text.index("CHAPTER V\n")  # after the contents list


@pytest.mark.parametrize("line", ["Book {r}", "{n} THE JOURNEY TO {r}", "Lecture {r}. Circumscription of Topic {n}.",
                                  "\\section{{Divided power envelope {n}}}"])
def test_heading_forms(line):
    text = "".join(f"\n\n{line.format(r=r, n=n)}\n\n{BODY}" for r, n in (("V", 12), ("VI", 13), ("VII", 14)))
    assert len(headings(text)) == 3


def test_running_heads_are_no_headings():
    """A PDF's running head ("CHAPTER 1. ANCESTRY 3" atop every page) is no chapter; "Chapter 1" is."""
    pages = "".join(f"\n\nCHAPTER 1. ANCESTRY–BIRTH–BOYHOOD {p}\n\n{BODY}" for p in range(3, 9))
    text = f"\n\nChapter 1\n\n{BODY}{pages}\n\nChapter 2\n\n{BODY * 3}"
    assert [t for t, _ in headings(text)] == ["Chapter 1", "Chapter 2"]


def test_left_hand_running_heads_with_the_number_first_are_no_headings():
    """A paper's left-hand pages open with "2 CONTENTS", "4 CONTENTS", ...: they made 27 parts titled
    so; numbered chapter headings ("12 THE JOURNEY") still make the parts."""
    body = "Some sentence of the body, long enough to read as text and nothing else. " * 40
    paper = "".join(f"\n\n{n} CONTENTS\n\n{body}\n\n{body}" for n in range(2, 30, 2))
    assert headings(paper) == []
    book = "".join(f"\n\n{n} {t}\n\n{body}" for n, t in ((1, "THE START"), (2, "THE JOURNEY"), (3, "THE END")))
    assert [t for t, _ in headings(book)] == ["1 THE START", "2 THE JOURNEY", "3 THE END"]


def test_parts_tile_the_document_and_have_pages(library):
    doc = store_text(library, book())
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == ["CHAPTER I", "CHAPTER II", "CHAPTER III", "CHAPTER IV", "CHAPTER V"]
    assert parts[0].char_start == 0 and all(a.char_end == b.char_start for a, b in zip(parts, parts[1:]))
    assert parts[-1].char_end == len(document_text(library, doc))
    assert all(p.source == "headings" and 1 <= p.page_first <= p.page_last for p in parts)


def test_bookmarks_come_first_and_skip_boilerplate(library):
    text = book(contents=False)
    pages_of = lambda s: text.index(s) // 400 + 1  # noqa: E731
    outline = [{"level": 1, "title": "Contents", "page": 1}] + [
        {"level": 2, "title": f"Chapter {r}", "page": pages_of(f"CHAPTER {r}\n")} for r in ("I", "III", "V")]
    doc = store_text(library, text, outline=outline)
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == ["Chapter I", "Chapter III", "Chapter V"] and parts[0].source == "outline"
    full = document_text(library, doc)
    assert full[parts[1].char_start:].startswith("CHAPTER III")  # where the title is printed on its page


def test_equal_page_spans_without_headings(library):
    doc = store_text(library, BODY * 20)
    parts = document_parts(library, doc)
    assert len(parts) >= 2 and all(p.source == "pages" for p in parts) and parts[0].title.startswith("pp. 1-")


def test_a_licences_numbered_sections_make_its_parts(library):
    """The GPL's "0. Definitions." ... "17. Interpretation of Sections 15 and 16." stand on lines of
    their own without a blank line before them (as a PDF's text gives them): its parts were page
    spans. A contents list of the same titles, and a numbered list inside a section ("1. Take the
    cake"), are no sections."""
    from ingest.parts import numbered_sections

    titles = ["Definitions", "Source Code", "Basic Permissions", "Protecting Users' Legal Rights",
              "Conveying Verbatim Copies", "Interpretation of Sections 15 and 16"]
    contents = "TERMS\n" + "".join(f"{i}. {t}.\n" for i, t in enumerate(titles))
    body = "".join(f"{i}. {t}.\n{BODY}\n1. Take the cake to the table.\n2. Then eat it.\n{BODY}\n"
                   for i, t in enumerate(titles))
    text = "PREAMBLE\n" + BODY + "\n" + contents + body
    found = numbered_sections(text)
    assert [t for t, _ in found] == [f"{i}. {t}" for i, t in enumerate(titles)]
    assert all(pos >= len("PREAMBLE\n" + BODY + "\n" + contents) for _, pos in found)  # not the contents list
    assert numbered_sections(BODY * 4 + "1. Take the cake to the table.\n2. Then eat it.\n") == []
    parts = document_parts(library, store_text(library, text))
    assert [p.title for p in parts if p.number] == [f"{i}. {t}" for i, t in enumerate(titles)]


def test_select_by_chapter_and_pages(library):
    doc = store_text(library, book())
    parts = document_parts(library, doc)
    assert [p.number for p in select(parts, chapter=2)] == [2]
    with pytest.raises(IngestError, match="no chapter 9"):
        select(parts, chapter=9)
    assert {p.number for p in select(parts, pages=(1, 1))} == {p.number for p in parts if p.page_first == 1}


def test_a_first_chapter_printed_under_the_title_opens_part_1(library):
    """Issue 60, item 7: a PDF prints "Chapter 1" in the title's text block (no blank line before it);
    part 1 was titled "Chapter 2" and held the title page and chapter 1."""
    text = ("PRIDE AND PREJUDICE\nBy A. Writer\nChapter 1\n" + BODY
            + "".join(f"\n\nChapter {n}\n\n{BODY}" for n in range(2, 6)))
    doc = store_text(library, text, page_chars=len(text))  # one page: no heading cut by a page break
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == [f"Chapter {n}" for n in range(1, 6)]
    full = document_text(library, doc)
    assert full[parts[1].char_start:].startswith("Chapter 2")
    assert full[parts[0].char_start:parts[1].char_start].count(BODY) == 1


def test_the_first_of_a_family_is_not_taken_from_a_contents_list():
    contents = "CONTENTS\n" + "".join(f"Chapter {n}\n" for n in range(1, 6)) + "\n"
    text = contents + "A NOVEL\n" + BODY + "".join(f"\n\nChapter {n}\n\n{BODY}" for n in range(2, 6))
    got = headings(text)
    assert got[0][0] == "Chapter 2"  # chapter 1's only line is the contents entry: no heading to add


def test_a_heading_worded_as_its_running_heads_stays():
    """"Lecture I. Religion And Neurology." opens the lecture; "Lecture I. Religion And Neurology. 7"
    atop its pages is the running head: only the latter is dropped."""
    def lecture(r: str, name: str, first: int) -> str:
        heads = "".join(f"\n\nLecture {r}. {name}. {p}\n\n{BODY}" for p in range(first, first + 8, 2))
        return f"\n\nLecture {r}. {name}.\n\n{BODY}{heads}"

    text = (lecture("I", "Religion And Neurology", 7) + lecture("II", "Circumscription", 29)
            + lecture("III", "Reality", 55))
    assert [t for t, _ in headings(text)] == ["Lecture I. Religion And Neurology.", "Lecture II. Circumscription.",
                                              "Lecture III. Reality."]


def test_two_bookmarks_at_one_place_keep_the_first(library):
    text = book(contents=False)
    outline = [{"level": 1, "title": "Chapter 1 (missing)", "page": 1},
               {"level": 1, "title": "Chapter 2 (missing)", "page": 1},
               {"level": 1, "title": "Chapter III", "page": text.index("CHAPTER III\n") // 400 + 1}]
    doc = store_text(library, text, outline=outline)
    assert document_parts(library, doc)[0].title == "Chapter 1 (missing)"


ALICE_TITLES = ["I. Down the Rabbit-Hole", "II. The Pool of Tears", "III. A Caucus-Race and a Long Tale",
                "IV. The Rabbit Sends in a Little Bill", "V. Advice from a Caterpillar", "VI. Pig and Pepper",
                "VII. A Mad Tea-Party", "VIII. The Queen's Croquet-Ground", "IX. The Mock Turtle's Story",
                "X. The Lobster Quadrille", "XI. Who Stole the Tarts?", "XII. Alice's Evidence"]
WRAPPED = ("  Alice was beginning to get very tired of sitting by her sister on the bank, and of having\n"
           "nothing to do: once or twice she had peeped into the book her sister was reading, but it had\n"
           "no pictures or conversations in it, and what is the use of a book, thought Alice.\n\n") * 8


def test_a_heading_printed_twice_in_a_row_is_one_part(library):
    """Alice's PDF, its contents list and first chapter as printed: the list's first line is taken
    for a heading, then the chapter's own: one part, from the second (found as a new user: the
    outline listed "CHAPTER I. Down the Rabbit-Hole" twice)."""
    text = ("  ALICE'S ADVENTURES\n  IN WONDERLAND\n\n  By Lewis Carroll\n\n  Contents\n\n"
            + "".join(f"  CHAPTER {t}\n" for t in ALICE_TITLES) + "".join(f"\n  CHAPTER {t}\n\n{WRAPPED}"
                                                                        for t in ALICE_TITLES[:3]))
    assert [t for t, _ in headings(text)][:2] == ["CHAPTER I. Down the Rabbit-Hole"] * 2  # (the reason)
    doc = store_text(library, text, page_chars=1500)
    got = [p.title for p in document_parts(library, doc)]
    assert got == [f"CHAPTER {t}" for t in ALICE_TITLES[:3]]


def test_chapters_that_open_mid_page_in_a_pdfs_text():
    """A PDF made from a plain-text edition (tried as a new user would, 2026-12-07): its text has no
    blank line before a heading, chapters open mid-page, and the contents list runs on as one
    paragraph wrapped into lines that open with "CHAPTER". The parts were 5 of 38, the first titled
    from the contents ("CHAPTER XXXVI The Glory and the"). The chapters are the chain I, II, III ...;
    a line of prose that opens with "Chapter 3" inside chapter 4 is none of them."""
    romans = ["I", "II", "III", "IV", "V", "VI"]
    contents = "Table of Contents\n" + "\n".join(
        f"CHAPTER {r} The Day Number {r} Came and" if i % 2 == 0 else f"Went Away CHAPTER {r} Another Title"
        for i, r in enumerate(romans)) + "\n"
    body = ""
    for r in romans:
        body += f"CHAPTER {r}. The Day Number {r}\n" + BODY.replace(". ", ".\n", 3).rstrip() + "\n"
        if r == "IV":
            body += "Chapter 3 of his diary was lost that winter, and he never wrote it again.\n"
    text = "A NOVEL\nBy A. Writer\n" + contents + body
    got = headings(text)
    assert [t.split(".")[0] for t, _ in got] == [f"CHAPTER {r}" for r in romans]
    assert got[0][1] == len("A NOVEL\nBy A. Writer\n" + contents)  # chapter I's heading, not a contents line
    assert all(text[pos:pos + len(t)] == t for t, pos in got)


def test_a_pdf_heading_wrapped_over_two_lines_keeps_its_whole_title():
    """The same PDF's headings were set large, so long ones wrapped ("CHAPTER I. Mrs. Rachel Lynde is" /
    "Surprised") and the part was titled with the first line only. The next line joins the title when
    it is short and in title case; the chapter's first line of text, or of speech, does not."""
    lines = {
        "I": "CHAPTER I. Mrs. Rachel Lynde Is\nSurprised\n",
        "II": "CHAPTER II. A Concert a\nCatastrophe and a Confession\n",
        "III": "CHAPTER III. The Walk\n\"Yes,\" said Anne.\n",
        "IV": "CHAPTER IV. Morning at\nGreen Gables the farmhouse stood by the long road that ran to the town\n",
    }
    text = "A NOVEL\n" + "".join(head + BODY.replace(". ", ".\n", 3).rstrip() + "\n" for head in lines.values())
    got = [t for t, _ in headings(text)]
    assert got == ["CHAPTER I. Mrs. Rachel Lynde Is Surprised", "CHAPTER II. A Concert a Catastrophe and a Confession",
                   "CHAPTER III. The Walk", "CHAPTER IV. Morning at"]


def test_a_heading_wrapped_over_two_lines_after_a_blank_line_keeps_its_whole_title():
    """Alice's PDF prints its chapter headings after a blank line, the long ones over two lines
    ("CHAPTER V. Advice from a" / "Caterpillar"): the Outline tab listed "CHAPTER V. Advice from a"
    (seen 2026-12-07). The run-in headings' rule for a wrapped title holds here too."""
    heads = ["CHAPTER I. Down the Rabbit-Hole", "CHAPTER II. The Pool of Tears",
             "CHAPTER III. A Caucus-Race and\n  a Long Tale", "CHAPTER IV. The Rabbit Sends in\n  a Little Bill",
             "CHAPTER V. Advice from a\n  Caterpillar", "CHAPTER XI. Who Stole the\n  Tarts?"]
    text = "  ALICE\n" + "".join(f"\n  {h}\n\n{WRAPPED}" for h in heads)
    assert [t for t, _ in headings(text)] == [" ".join(h.split()) for h in heads]


def paper(reference_lists: int = 1) -> tuple[str, list[dict]]:
    """A paper's text and bookmarks as itcs20's: its sections at level 1, most with subsections at
    level 2 (so level 2 has the most entries); the Introduction opens with pages of its own, Open
    Problems has no subsection, the Model one line before its first; "References" is printed but
    bookmarked nowhere."""
    refs = "References\n\n" + "".join(f"{i} A. Author. A title. In Proceedings, 2019.\n" for i in range(1, 9))
    sections = [(1, "Introduction", BODY * 3), (2, "Related Work", BODY), (2, "Applications", BODY),
                (1, "Model", "We fix the notation here."), (2, "Graphs", BODY), (2, "Colorings", BODY),
                (1, "Open Problems", BODY + "\n\n" + refs * reference_lists), (1, "Omitted Proofs", "As follows."),
                (2, "Proofs of Section 2", BODY)]
    text = "A PAPER\n\n" + "".join(f"\n\n{t}\n\n{body}" for _, t, body in sections)
    return text, [{"level": lv, "title": t, "page": text.index(f"\n{t}\n") // 400 + 1} for lv, t, _ in sections]


def test_a_papers_top_level_sections_with_text_of_their_own_are_parts(library):
    """itcs20's parts were its 32 level-2 bookmarks only: its 4-page Introduction was summarised as
    "front matter", Section 2's opening fell under "Applications", its bibliography under the section
    before. A shallower bookmark is a part when none of its children is one or when it opens with half
    a page or more of its own; the one "References" line starts a part of back matter."""
    text, outline = paper()
    doc = store_text(library, text, outline=outline)
    parts = document_parts(library, doc)
    assert [(p.title, p.source) for p in parts] == [
        ("Introduction", "outline"), ("Related Work", "outline"), ("Applications", "outline"),
        ("Graphs", "outline"), ("Colorings", "outline"), ("Open Problems", "outline"), ("References", "back matter"),
        ("Proofs of Section 2", "outline")]
    full = document_text(library, doc)
    assert full[parts[6].char_start:].startswith("References\n")
    assert full[parts[3].char_start:].startswith("Model\n")  # one line of its own: no part, it opens Graphs's


def test_a_summary_of_the_whole_paper_leaves_its_references_out(library):
    """A bibliography's entries are no sentences of the paper: the whole document's summary covers every
    part but the references; asked for by number, they are summarised."""
    text, outline = paper()
    doc = store_text(library, text, outline=outline)
    parts = document_parts(library, doc)
    assert "References" not in [p.title for p in select(parts)] and len(select(parts)) == len(parts) - 1
    assert [p.title for p in select(parts, chapter=parts[6].number)] == ["References"]


def test_a_book_keeps_its_chapters_under_volume_bookmarks(library):
    """158-pdf's VOLUME I-III each open right at their first chapter: the chapters stay the parts; and
    a "References" line after every chapter is no bibliography of the whole."""
    text = "".join(f"\n\nVOLUME {v}\n\nCHAPTER I\n\n{BODY}\n\nReferences\n\n{BODY}\n\nCHAPTER II\n\n{BODY}"
                   for v in ("I", "II"))
    at = [i for i in range(len(text)) if text.startswith("\nVOLUME", i) or text.startswith("\nCHAPTER", i)]
    titles = ["VOLUME I", "CHAPTER I", "CHAPTER II", "VOLUME II", "CHAPTER I", "CHAPTER II"]
    outline = [{"level": 1 if t.startswith("VOLUME") else 2, "title": t, "page": pos // 1000 + 1}
               for t, pos in zip(titles, at)]
    doc = store_text(library, text, outline=outline, page_chars=1000)
    assert document_text(library, doc).count("\nReferences\n") == 2  # (no page break cuts one)
    assert [(p.title, p.source) for p in document_parts(library, doc)] == [(t, "outline") for t in titles
                                                                          if t.startswith("CHAPTER")]


def test_an_appendix_heading_that_makes_no_part_opens_its_first_subsections_part(library):
    """itcs20's appendix A heading ("A Further Analysis and Extensions of Algorithm 1", one line before its
    first subsection) makes no part; it and its lines before the subsection ran on at the end of the part
    before it, the References (and appendix C's 900 characters under appendix B's "Bounding Block Sizes").
    They now open the subsection's part: the reference list ends where the appendix begins."""
    text, outline = paper()
    doc = store_text(library, text, outline=outline)
    parts = document_parts(library, doc)
    full = document_text(library, doc)
    refs, proofs = parts[6], parts[7]
    assert (refs.title, proofs.title) == ("References", "Proofs of Section 2")
    assert refs.char_end == proofs.char_start
    assert "Omitted Proofs" not in full[refs.char_start:refs.char_end]
    assert full[proofs.char_start:].startswith("Omitted Proofs\n\nAs follows.")


def test_an_epilogue_after_the_last_chapter_is_a_part_of_its_own():
    """Walk 11 (The Time Machine): its EPILOGUE read as the end of chapter XII. An epilogue printed as
    a line of its own after the last heading is one; a contents list's "Epilogue" before chapter I
    is not, nor anything in the licence, nor "epilogue" in a sentence."""
    text = ("Contents\n\n I\n II\n III\n Epilogue\n\n" + "".join(f"\n\n{r}\n\n{BODY}" for r in ("I", "II", "III"))
            + "The word epilogue\nis in this sentence.\n\nEPILOGUE\n\n" + BODY
            + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n\nEpilogue\n\nlicence text\n")
    got = headings(text)
    assert [t for t, _ in got] == ["I", "II", "III", "EPILOGUE"]
    assert text[got[-1][1]:].startswith("EPILOGUE\n\n")


def test_chapters_numbered_afresh_in_each_part_are_titled_with_their_part(library):
    """Walk 12 (Under the Greenwood Tree): "PART THE SECOND--SPRING" read as no heading (a number must
    follow the keyword), so the outline listed "CHAPTER I" five times with nothing to say which part
    each opened, and each part's heading ended the chapter before. A chapter right under its part's
    heading now starts there and is titled with it; the contents list's last entry ("PART THE FIFTH",
    recurring as the heading) is no part's."""
    seasons = (("PART THE FIRST--WINTER", ("I: MELLSTOCK-LANE", "II: THE TRANTER'S")),
               ("PART THE SECOND--SPRING", ("I: PASSING BY THE SCHOOL", "II: A MEETING OF THE QUIRE")),
               ("PART THE FIFTH: CONCLUSION", ("I: 'THE KNOT THERE'S NO UNTYING'", "II: UNDER THE GREENWOOD TREE")))
    text = "UNDER THE GREENWOOD TREE\n\nCONTENTS\n\n" + "".join(f"   {p}\n\n" for p, _ in seasons) + "".join(
        f"\n\n\n{p}\n\n\n" + "".join(f"CHAPTER {c}\n\n\n{BODY}\n\n\n" for c in chapters) for p, chapters in seasons)
    doc = store_text(library, text)
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == [
        "PART THE FIRST--WINTER, CHAPTER I: MELLSTOCK-LANE", "PART THE FIRST, CHAPTER II: THE TRANTER'S",
        "PART THE SECOND--SPRING, CHAPTER I: PASSING BY THE SCHOOL",
        "PART THE SECOND, CHAPTER II: A MEETING OF THE QUIRE",
        "PART THE FIFTH: CONCLUSION, CHAPTER I: 'THE KNOT THERE'S NO UNTYING'",
        "PART THE FIFTH, CHAPTER II: UNDER THE GREENWOOD TREE"]
    full = document_text(library, doc)
    assert full[parts[2].char_start:].startswith("PART THE SECOND--SPRING")
    assert "PART THE SECOND" not in full[parts[1].char_start:parts[1].char_end]
    assert heading_number("PART THE SECOND--SPRING") == ("part", 2, "word")


def test_every_chapter_numbered_afresh_says_whose_it_is(library):
    """Walk 12, item 6: after the last session the outline and the summary's menu still listed "CHAPTER
    II", "CHAPTER III" ... five times over, only each part's chapter I titled with its part. Chapters
    numbered afresh under their divisions now all carry them by keyword and number; a new volume
    ends the book before it, as the document prints a volume above a book."""
    body = BODY * 2
    text = "TALES\n\n" + "".join(
        f"\n\n{head}\n\n" + "".join(f"CHAPTER {c}\n\n{body}\n\n" for c in ("I", "II", "III"))
        for head in ("VOLUME I\n\nBOOK FIRST--THE TOWN", "BOOK SECOND--THE SEA",
                     "VOLUME II.--THE RETURN\n\nBOOK FIRST--HOME"))
    parts = document_parts(library, store_text(library, text))
    assert [p.title for p in parts] == [
        "VOLUME I, BOOK FIRST--THE TOWN, CHAPTER I", "VOLUME I, BOOK FIRST, CHAPTER II",
        "VOLUME I, BOOK FIRST, CHAPTER III",
        "VOLUME I, BOOK SECOND--THE SEA, CHAPTER I", "VOLUME I, BOOK SECOND, CHAPTER II",
        "VOLUME I, BOOK SECOND, CHAPTER III",
        "VOLUME II.--THE RETURN, BOOK FIRST--HOME, CHAPTER I", "VOLUME II, BOOK FIRST, CHAPTER II",
        "VOLUME II, BOOK FIRST, CHAPTER III"]


def test_chapters_numbered_on_through_books_keep_their_own_titles():
    """Middlemarch numbers its chapters on through its eight books: only the chapter under a book's
    heading says whose it is, as before."""
    text = "A STUDY\n\n" + "".join(
        f"\n\nBOOK {b}.\n\n" + "".join(f"CHAPTER {c}.\n\n{BODY}\n\n" for c in cs)
        for b, cs in (("I", ("I", "II")), ("II", ("III", "IV")), ("III", ("V", "VI"))))
    assert [t for t, _ in headings(text)] == ["BOOK I., CHAPTER I.", "CHAPTER II.", "BOOK II., CHAPTER III.",
                                        "CHAPTER IV.", "BOOK III., CHAPTER V.", "CHAPTER VI."]


def test_a_contents_lists_division_entry_is_no_division_of_the_chapters_after_it():
    """Notre-Dame de Paris: its second volume opens with a contents list ("BOOK SEVENTH. I. The Danger
    of Confiding ...", ... "BOOK TENTH. I. Gringoire ...") and has no heading for its seventh book:
    its chapters are the second volume's, not the tenth book's."""
    body = BODY * 2
    text = ("\n\nBOOK FIRST.\n\n" + "".join(f"CHAPTER {c}.\n\n{body}\n\n" for c in ("I", "II"))
            + "\n\nVOLUME II.\n\n\nTABLE OF CONTENTS.\n\n\n"
            + "BOOK NINTH. I. Delirium II. Hunchbacked, One Eyed, Lame III. Deaf IV.\nEarthenware and Crystal\n\n"
            + "BOOK TENTH. I. Gringoire has Many Good Ideas in Succession.--Rue des\nBernardins II. Turn Vagabond\n\n"
            + "BOOK ELEVENTH.\n\n" + "I. The Little Shoe II. The Beautiful Creature Clad in White\n" * 8 + "\n\n"
            + "".join(f"CHAPTER {c}.\n\n{body}\n\n" for c in ("I", "II"))
            + "\n\nBOOK EIGHTH.\n\n" + "".join(f"CHAPTER {c}.\n\n{body}\n\n" for c in ("I", "II")))
    assert [t for t, _ in headings(text)] == [
        "BOOK FIRST., CHAPTER I.", "BOOK FIRST, CHAPTER II.", "VOLUME II, CHAPTER I.", "VOLUME II, CHAPTER II.",
        "VOLUME II, BOOK EIGHTH., CHAPTER I.", "VOLUME II, BOOK EIGHTH, CHAPTER II."]


def test_a_preface_is_an_entry_of_its_own_titled_by_its_heading(library):
    """Walk 12, item 6: Under the Greenwood Tree's PREFACE was read as the start of chapter I (front
    matter under a tenth of the book joined part 1). A preface, an introduction, a dedication with
    prose under its heading is an entry of its own before part 1 (the title page joins the first);
    a contents list's "Preface" and "Dedication" are none."""
    preface = ("This story of the Mellstock Quire and its old established west-gallery musicians is intended\n"
               "to be a fairly true picture, at first hand, of the personages, ways, and customs which were\n"
               "common among such orchestral bodies in the villages of fifty or sixty years ago.\n")
    text = ("UNDER THE GREENWOOD TREE\n\nby Thomas Hardy\n\nCONTENTS\n\nDEDICATION\n\nPreface\n"
            "Chapter i -- The introduction to the work, or bill of fare to the feast, with some proper\n"
            "animadversions on the quire and on what the reader may expect to find in the chapters after.\n\n"
            + "\n\nPREFACE\n\n" + preface * 3
            + "".join(f"\n\nCHAPTER {r}\n\n{BODY * 3}" for r in ("I", "II", "III")))
    doc = store_text(library, text)
    parts = document_parts(library, doc)
    assert [p.title for p in parts] == ["PREFACE", "CHAPTER I", "CHAPTER II", "CHAPTER III"]
    assert parts[0].number == 1 and parts[0].char_start == 0 and parts[0].source == "headings"
    full = document_text(library, doc)
    assert full[parts[1].char_start:].startswith("CHAPTER I\n\n")
    assert "This story of the Mellstock Quire" not in full[parts[1].char_start:parts[1].char_end]
