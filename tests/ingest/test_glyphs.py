"""ingest.glyphs: a font's private-use ligatures read back as letters, in the parser and the page view."""

from __future__ import annotations

import difflib

import pymupdf

from ingest.glyphs import PRIVATE, expand, learn, read_pages
from ingest.page import _read_glyphs, match_words, render_page
from ingest.parse import _TEXT_FLAGS, parse_file
from ingest.pipeline import ingest

CH, TH, TT = "\ue03b", "\ue049", "\ue03c"


def _as_libertine(text: str) -> str:
    """`text` as the Dumas PDFs' font writes it: "ch", "Th" and "tt" as private-use glyphs, and the
    space after "which" lost."""
    text = text.replace("which ", "which")
    return text.replace("ch", CH).replace("Th", TH).replace("tt", TT)


def test_the_glyphs_are_learnt_from_the_text_and_read_back(assets):
    text = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")[:20000]
    assert "which " in text and "Th" in text and "tt" in text
    garbled = _as_libertine(text)
    assert learn(garbled) == {CH: "ch", TH: "Th", TT: "tt"}
    (read,), table = read_pages([garbled])
    assert not PRIVATE.search(read)
    # every word comes back; "which" gets its space again where the next word is one the text
    # prints or a frequent one ("whichattracts" stays: "attracts" is neither)
    got, want = read.split(), text.split()
    assert difflib.SequenceMatcher(None, got, want, autojunk=False).ratio() > 0.99
    assert sum(w in ("ch", "Th", "tt") for w in table.values()) == 3
    assert read.count("which ") >= 0.85 * text.count("which ") > 25

def test_no_glyphs_no_change_and_a_glyph_alone_is_no_letter():
    plain = "The letter was written in a hurry; which of them sent it?"
    assert learn(plain) == {} and read_pages([plain]) == ([plain], {})
    digits = "Chapter \ue119\ue11a. In the year \ue119\ue11e\ue11a\ue11b the king came."
    assert learn(digits) == {}  # old-style digits stand alone: no ligature reads them
    assert expand(digits, {}) == digits


def test_a_glyph_two_ligatures_read_equally_well_stays():
    # "\ue0ffe" reads "The" (Th) or "fie"/"ffe"? only Th is a known word: learnt; a glyph whose words
    # read as known words with two ligatures alike is not
    assert learn("\ue0ffe man said \ue0ffe thing.\n" * 3 + "the man") == {"\ue0ff": "Th"}
    tie = learn("a\ue0aber and a\ue0aber")  # "after" (ft) and "atter"? only "after" is a word: ft
    assert tie == {"\ue0ab": "ft"}


def test_a_pdf_with_private_use_ligatures_is_read_as_words(assets):
    doc = parse_file(assets / "musketeers-pp77-78.pdf")
    assert not PRIVATE.search(doc.text)
    for words in ("Planchet, d'Artagnan's valet", "gay as a chaffinch", "complaints which\nAthos",
                  '"This is serious,"'):
        assert words in doc.text, words
    raw = "".join(p.get_text() for p in pymupdf.open(assets / "musketeers-pp77-78.pdf"))
    assert raw.count("Plan\ue03bet") == doc.text.count("Planchet") >= 3  # every one of them


def test_the_page_view_reads_the_glyphs_as_the_parser_did(library, fake_engine, assets):
    doc_id = ingest(assets / "musketeers-pp77-78.pdf", library=library, engine=fake_engine, prefill=False).doc_id
    page = library.pages(doc_id, with_text=True)[0]
    words = [w[4] for w in pymupdf.open(assets / "musketeers-pp77-78.pdf")[0].get_text("words", flags=_TEXT_FLAGS)]
    owner, read = _read_glyphs(words, page["text"])
    assert not any(PRIVATE.search(w) for w in read)
    assert "Planchet," in read and "which" in read
    # "whi\ue03byou" was one page word: "which" and "you" share its rectangle
    assert any(read[j:j + 2] == ["which", "you"] and owner[j] == owner[j + 1] for j in range(len(read) - 1))
    span = (page["text"].index("Planchet"), page["text"].index("Planchet") + 40)
    hits = match_words(page["text"], span, read)
    assert [read[j] for j in hits][:2] == ["Planchet,", "d'Artagnan's"]
    chunk = next(c for c in library.chunks(doc_id) if "Planchet" in c["text"] and c["page_first"] == 1)
    png = render_page(library, doc_id, 1, highlight=chunk["idx"])
    pix = pymupdf.Pixmap(png)
    s, n = pix.samples, pix.n
    yellow = sum(1 for r, g, b in zip(s[0::n], s[1::n], s[2::n]) if r > 200 and g > 190 and b < 120)
    assert yellow > 2000  # the chunk's words, "Planchet" among them, are found on the page


def test_a_page_stored_before_glyphs_were_read_keeps_its_words():
    """A library ingested before ingest.glyphs holds "Plan\ue03bet": the page view must not read the
    page's words differently from its stored text, or the highlight finds nothing."""
    words = ["Plan\ue03bet,", "d'Artagnan's", "valet", "whi\ue03b", "he", "knew."]
    old = "Plan\ue03bet, d'Artagnan's valet whi\ue03b he knew."
    owner, read = _read_glyphs(words, old)
    assert read == words and owner == list(range(len(words)))
    assert match_words(old, (0, 24), read) == [0, 1, 2]
