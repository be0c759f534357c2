"""ingest.tokenize: ids with offsets, 63-token chunks with token/char/page spans."""

from __future__ import annotations

from ingest.parse import _assemble, parse_file
from ingest.tokenize import (
    CHUNK_TOKENS,
    build_chunks,
    encode_text,
    iter_pieces,
    make_encoder,
    tokenize_document,
)


def _doc(pages: list[str]):
    return _assemble("t", "text", [["", p] for p in pages], [])


def test_chunks_tile_the_text_and_know_their_pages(test_tokenizer, assets):
    doc = parse_file(assets / "emma-pp2-21.pdf")
    tok = tokenize_document(doc, make_encoder(test_tokenizer), tokenizer_fp="t")
    n = len(tok.ids)
    assert len(tok.chunks) == -(-n // CHUNK_TOKENS)
    for c, ch in enumerate(tok.chunks):
        t0 = c * CHUNK_TOKENS
        assert (ch.index, ch.tok_start, ch.tok_end) == (c, t0, min(t0 + CHUNK_TOKENS, n))
        assert ch.text == doc.text[ch.char_start : ch.char_end]
        assert 1 <= ch.page_first <= ch.page_last <= len(doc.pages)
        # the chunk's non-blank text lies inside its pages
        first, last = doc.pages[ch.page_first - 1], doc.pages[ch.page_last - 1]
        body = ch.text.strip()
        if body:
            start = ch.char_start + ch.text.index(body[0])
            assert first.char_start <= start <= first.char_end
            assert last.char_start <= ch.char_start + len(ch.text.rstrip()) <= last.char_end
    # chunks tile the text: no gaps, no overlaps
    assert tok.chunks[0].char_start == 0 and tok.chunks[-1].char_end == len(doc.text)
    for a, b in zip(tok.chunks, tok.chunks[1:]):
        assert a.char_end == b.char_start
    assert "".join(ch.text for ch in tok.chunks) == doc.text
    assert tok.chunks[-1].page_last == 20


def test_page_spans_on_a_boundary(test_tokenizer):
    doc = _doc(["xxx " * 200, "yyy " * 200, "zzz " * 5])
    tok = tokenize_document(doc, make_encoder(test_tokenizer), tokenizer_fp="t")
    spans = {(c.page_first, c.page_last) for c in tok.chunks}
    assert (1, 2) in spans and (2, 3) in spans
    pages = {"x": 1, "y": 2, "z": 3}
    for c in tok.chunks:  # words may be cut at chunk edges: their letters still tell the page
        got = {pages[ch] for ch in c.text if not ch.isspace()}
        assert got and min(got) == c.page_first and max(got) == c.page_last


def test_pieces_give_the_same_ids(test_tokenizer, assets):
    text = parse_file(assets / "stacks-brauer.tex").text
    enc = make_encoder(test_tokenizer)
    whole_ids, whole_off = enc(text)
    ids, off = encode_text(text, enc, piece_chars=700)
    assert ids == whole_ids and off == whole_off
    assert "".join(p for _, p in iter_pieces(text, 700)) == text


def test_special_token_text_is_plain_text(test_tokenizer):
    enc = make_encoder(test_tokenizer)
    ids, _ = enc("before <|endoftext|> after <|lmk|>")
    specials = {test_tokenizer.token_to_id(t) for t in ("<|endoftext|>", "<|lmk|>")} - {None}
    assert specials and not specials & set(ids)


def test_offsets_are_monotone_for_multibyte_text(test_tokenizer):
    text = "حَبيبي habibi — 漢字 🙂 e\u0301 ﬁn"
    ids, off = make_encoder(test_tokenizer)(text)
    assert len(ids) == len(off)
    assert all(0 <= s <= e <= len(text) for s, e in off)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(off, off[1:]))
    assert off[-1][1] == len(text)


def test_build_chunks_with_a_short_last_chunk():
    text = "x" * 130
    offsets = [(i, i + 1) for i in range(130)]
    chunks = build_chunks(text, offsets, _doc([text]).pages)
    assert [(c.tok_start, c.tok_end) for c in chunks] == [(0, 63), (63, 126), (126, 130)]


def test_project_tokenizer_agrees(test_tokenizer, assets):
    """drt_core.tokenizer.encode_with_offsets (the shipped tokenizer's) gives the ids make_encoder gives."""
    from drt_core.tokenizer import encode_with_offsets, load_tokenizer

    text = parse_file(assets / "015-arabic__habibi.pdf").text + "\n" + "Emma Woodhouse, handsome, clever."
    assert encode_with_offsets(text)[0] == make_encoder(load_tokenizer())(text)[0]


def test_truncation_carried_by_tokenizer_json_is_ignored(test_tokenizer):
    """tokenizer.json may carry a truncation block (docs/reliability.md §7, row 12): never cut a document."""
    from tokenizers import Tokenizer

    from ingest.tokenize import tokenizer_fingerprint

    truncating = Tokenizer.from_str(test_tokenizer.to_str())
    truncating.enable_truncation(max_length=8)
    text = "word " * 100
    assert len(make_encoder(truncating)(text)[0]) == len(make_encoder(test_tokenizer)(text)[0]) > 8
    assert tokenizer_fingerprint(truncating) == tokenizer_fingerprint(test_tokenizer)
