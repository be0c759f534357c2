"""ingest.boilerplate: a Gutenberg edition's licence starting mid-page, under the story's last lines."""

from __future__ import annotations

from ingest.boilerplate import chunk_matter, licence_start
from ingest.parts import document_text
from qa.summary import extractive
from tests.ingest.docstore import store_text

STORY = "".join(f"Sentence {i} of the last chapter tells how the story went on that day in the wood. "
                for i in range(12))
TAIL = ("\n\n  THE END\n\nEnd of Project Gutenberg's A Tale, by Some One\n\n*** END OF THIS PROJECT GUTENBERG "
        "EBOOK A TALE ***\n\nUpdated editions will replace the previous one and the old editions will be renamed. "
        "Creating the works from public domain print editions means that no one owns a United States copyright in "
        "these works, so the Foundation can copy and distribute it in the United States without permission.")


def test_the_licence_after_the_end_line_is_licence_though_its_page_is_mostly_story(library):
    doc = store_text(library, "\n\nCHAPTER XII\n\n" + STORY + TAIL, page_chars=5000)
    chunks = library.chunks(doc)
    text = document_text(library, doc)
    end = licence_start(library, doc)
    assert end == text.index("End of Project Gutenberg")
    tags = chunk_matter(library, doc, chunks)
    assert all(tags.get(c["idx"]) == "licence" for c in chunks if c["char_start"] >= end)
    assert not any(c["idx"] in tags for c in chunks if c["char_end"] <= end)  # the story is not
    got = extractive(library, doc, [], per_part=5, embed=None)["trace"]["sentences"]
    assert got and not any("copyright" in s["text"] or "editions" in s["text"] for s in got)


def test_no_end_line_no_licence(library):
    doc = store_text(library, "\n\nCHAPTER I\n\n" + STORY, page_chars=5000)
    assert licence_start(library, doc) is None and chunk_matter(library, doc, library.chunks(doc)) == {}


def test_a_readers_view_does_not_hide_the_licence_from_the_whole_document(library):
    """Asked first through a view that stops before the last pages (ask --before-page), the end
    line is not there; the whole document still finds it afterwards."""
    from qa.views import BeforePage

    doc = store_text(library, "\n\nCHAPTER XII\n\n" + STORY * 3 + TAIL, page_chars=800)
    view = BeforePage(library, doc, 2)
    assert licence_start(view, doc) is None
    assert licence_start(library, doc) == document_text(library, doc).index("End of Project Gutenberg")


def test_dot_leader_pages_are_contents_or_index():
    """A manual's contents list and function index set with dot leaders (GNU Libtasn1's, tried as a
    new user would): its 'Also relevant' passages were the index's lines."""
    from ingest.boilerplate import matter_of

    contents = "Table of Contents\n\n" + "\n".join(
        f"  {c}.{s} Section title number {s} {'. ' * 30}{c * 3 + s}" for c in (1, 2, 3) for s in (1, 2, 3))
    index = "Function and Data Index\n\n" + "\n".join(
        f"asn1_function_{i}{' .' * (30 - i)} {i + 5}" for i in range(12))
    prose = "\n".join(f"This line of prose ends with a number of pages . . . and goes on {i}, as text does."
                      for i in range(12))
    assert matter_of(contents) == "contents" and matter_of(index) == "index"
    assert matter_of(prose) is None


def test_an_index_whose_lines_end_with_a_full_stop_is_an_index():
    """On the Origin of Species' index ("Formica sanguinea, 219.") `ask` quoted an index line for a
    question the book does not answer; the index was not told from text."""
    from ingest.boilerplate import matter_of

    index = "\n\n".join(f"   Formica species {i}, neuter of, {200 + i}." for i in range(6)) + \
        "\n\n   Fresh-water productions, dispersal of, 383.\n\n   Frena, ovigerous, of cirripedes, 192, 195."
    assert matter_of(index) == "index"
    prose = "\n".join(f"The ants of the species he opened, twelve or so, went on {i}." for i in range(10))
    assert matter_of(prose) is None


def test_a_contents_list_run_on_as_one_paragraph_is_contents():
    """A PDF made from a plain-text edition sets its contents list as one paragraph: lines like
    "Surprised CHAPTER II Matthew" (tried as a new user would; the cast then 'introduced' its main
    characters by the contents page). A commentary that names a chapter a paragraph is not contents."""
    from ingest.boilerplate import matter_of

    romans = "I II III IV V VI VII VIII IX X".split()
    run_on = "Table of Contents\n" + " ".join(f"CHAPTER {r} The Title of Part {r} Is Here" for r in romans)
    wrapped = "\n".join(run_on[i:i + 34] for i in range(0, len(run_on), 34))
    commentary = "\n\n".join(f"Chapter {r}. The Title.\n\n" + STORY[:400] for r in romans[:6])
    assert matter_of(wrapped) == "contents"
    assert matter_of(commentary) is None


HEADER = ("Project Gutenberg's A Tale, by Some One\n\nThis eBook is for the use of anyone anywhere at no cost and with "
          "almost no restrictions whatsoever. You may copy it, give it away or re-use it under the terms of the "
          "Project Gutenberg License included with this eBook or online at www.gutenberg.net\n\nTitle: A Tale\n\n"
          "*** START OF THIS PROJECT GUTENBERG EBOOK A\nTALE ***\n\n")


def test_a_first_page_that_is_mostly_story_under_the_header_is_no_licence_page(library):
    """A Gutenberg PDF's first page holds the header, then chapter I's opening (The Time Machine, walk 11):
    the page was a licence page, so chapter I's heading was dropped (its text joined part "II", under
    that title) and its opening was tagged licence. The header alone is licence."""
    from ingest.page_kind import matter_of
    from ingest.parts import document_parts

    chapter = "".join(f"Sentence {i} tells how the Traveller spoke that evening by the fire. " for i in range(40))
    text = HEADER + "I\n\n" + chapter + "\n\nII\n\n" + chapter + "\n\nIII\n\n" + chapter
    doc = store_text(library, text, page_chars=1500)
    pages = library.pages(doc, with_text=True)
    assert matter_of(pages[0]["text"]) is None
    assert matter_of(HEADER) == "licence"  # a page of the header alone still is
    assert [p.title for p in document_parts(library, doc)] == ["I", "II", "III"]
    start = document_text(library, doc).index("I\n\nSentence 0")
    tags = chunk_matter(library, doc, library.chunks(doc))
    assert all(tags.get(c["idx"]) == "licence" for c in library.chunks(doc) if c["char_end"] <= start - 20)
    assert not any(c["idx"] in tags for c in library.chunks(doc) if c["char_start"] >= start)


def test_the_transcribers_credit_under_the_header_is_header_too(library):
    """The paragraph a Gutenberg edition puts under its header's end line to credit its transcriber
    ("Transcribed by David Price, email ... from the 1912 Macmillan and Co. edition.") belongs to the
    header: the summary of Under the Greenwood Tree (walk 12) opened with it. The book's first lines
    after it stay text."""
    from ingest.boilerplate import header_end

    credit = ("Transcribed by David Price, email ccx074@coventry.ac.uk from the 1912\nMacmillan and Co. edition.  "
              "Proofed by Margaret Rose Price, Dagny and\nDavid Price.\n\n\n\n")
    chapter = "".join(f"Sentence {i} tells how the carrier drove home that night by the wood. " for i in range(40))
    text = HEADER + "\n\n\n" + credit + "CHAPTER I\n\n" + chapter + "\n\nCHAPTER II\n\n" + chapter
    doc = store_text(library, text, page_chars=1500)
    full = document_text(library, doc)
    assert full.index("David Price.") < header_end(library, doc) <= full.index("CHAPTER I")
    got = extractive(library, doc, [], per_part=5, embed=None)["trace"]["sentences"]
    assert got and not any("Transcribed" in s["text"] or "Proofed" in s["text"] for s in got)
    assert header_end(library, store_text(library, HEADER + "CHAPTER I\n\nTranscribed by me. " + chapter,
                                          page_chars=1500)) < len(HEADER) + 2  # not a credit paragraph
