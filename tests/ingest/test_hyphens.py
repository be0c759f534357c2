"""ingest.hyphens: words a PDF hyphenated at a line's end joined again, where the document says so."""

from __future__ import annotations

import pymupdf

from ingest.hyphens import join_pages, joined_words
from ingest.page import _page_words, match_words
from ingest.parse import _TEXT_FLAGS, parse_file
from ingest.pipeline import ingest


def test_a_broken_word_is_joined_and_a_real_hyphen_stays():
    pages = [
        "He kept the mem-\nory of it. The cucumber-\nframe was broken.\nA cucumber-frame again.",
        "Her mother-\nin-law came. The luxu-\nriant garden. Mousque-\nton bowed; Mousqueton left.",
        "a word broken over a page break: punc-",
        "tuality. He went on guard.",
    ]
    one, two, three, four = join_pages(pages)
    assert "the memory\nof it" in one  # a known word: joined, the line's rest moves down
    assert "cucumber-\nframe" in one  # the document writes "cucumber-frame"
    assert "luxuriant\ngarden" in two  # "riant" is no word: a fragment
    assert "Mousqueton\nbowed" in two  # the document writes "Mousqueton" elsewhere
    assert "mother-\nin-law" in two  # "in" is a word and "motherin" none: kept
    assert three.endswith("page break: punctuality.") and four == "He went on guard."  # the word goes whole
    assert join_pages(["in-", "law came"]) == ["in-", "law came"]  # to the page it starts on


def test_the_page_words_are_joined_as_the_stored_text_has_them():
    words = ["the", "mem-", "ory", "of", "cucumber-", "frame", "end."]
    text = "the memory\nof cucumber-\nframe end."
    pairs = joined_words(words, text)
    assert [w for _, w in pairs] == ["the", "memory", "of", "cucumber-", "frame", "end."]
    assert pairs[1][0] == [1, 2]


def test_a_pdf_page_with_a_hyphenated_word(library, fake_engine, assets):
    pdf = assets / "musketeers-pp77-78.pdf"
    raw = "".join(p.get_text() for p in pymupdf.open(pdf))
    assert "com-\nrade" in raw
    doc = parse_file(pdf)
    assert "comrade" in doc.text and "com-\nrade" not in doc.text
    assert doc.pages[0].text.endswith("remarkable punctuality.")  # "punc-" / "lxxviii" / "tuality.": the
    assert doc.pages[1].text.startswith("He went on guard")  # roman page number out, the word whole
    doc_id = ingest(pdf, library=library, engine=fake_engine, prefill=False).doc_id
    page = library.pages(doc_id, with_text=True)[1]
    words = [w[4] for w in pymupdf.open(pdf)[1].get_text("words", flags=_TEXT_FLAGS)]  # as the page view reads
    owners, read = _page_words(words, page["text"])
    joined = [i for i, o in enumerate(owners) if len(o) == 2]
    assert [read[i] for i in joined] == ["comrade."]
    assert [words[j] for j in owners[joined[0]]] == ["com-", "rade."]  # both halves are highlighted
    a = page["text"].index("young comrade")
    hits = match_words(page["text"], (a, a + 14), read)
    assert [read[j] for j in hits] == ["young", "comrade."] and joined[0] in hits
