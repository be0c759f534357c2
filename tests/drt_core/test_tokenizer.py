"""Tokenizer: exact round trip, fixed special ids, sane offsets, HF loading, training."""

from __future__ import annotations

import json

import pytest

from drt_core import tokenizer as T

UNUSUAL = [
    "",
    "a",
    "Hello, world!",
    " leading space and trailing space ",
    "naïve café résumé Ærøskøbing Straße",
    "e\u0301 a\u0308 decomposed accents (NFD)",
    "\u0301\u0308 lone combining marks at the start",
    "中文字符和日本語のテキスト、한국어",
    "emoji 😀👍🏽🇫🇷 👨‍👩‍👧 zwj",
    "math ∑_{i=1}^n ∫ √x ≤ ∞ ∀ε>0 ∃δ ℵ₀ 𝔽_p",
    "$\\mathcal{O}_X \\to \\mathcal{F}$ \\begin{lemma}\\label{x}\\end{lemma}",
    "NUL\x00in\x00the\x00middle\x00",
    "control \x01\x02\x1b[0m\x7f chars",
    "long     whitespace\t\t\t\n\n\n\n   \r\n  \u00a0\u2003\u3000 end",
    " " * 300,
    "\n" * 50,
    "mixed\u200bzero\u200cwidth\u200djoiners\ufeff",
    "surrogate-free astral 𐍈 𝄞 🜁",
    "<|endoftext|> <|pad|> <|lmk|> literal special strings",
    "RTL עברית العربية",
]


@pytest.fixture(scope="module")
def hf_tok():
    return T.load_tokenizer()


def test_special_ids_fixed(hf_tok):
    assert (T.PAD_ID, T.EOT_ID, T.LMK_ID) == (0, 1, 2)
    assert hf_tok.pad_token_id == 0
    assert hf_tok.eos_token_id == 1
    assert hf_tok.convert_tokens_to_ids("<|lmk|>") == 2
    assert hf_tok.convert_ids_to_tokens([0, 1, 2]) == ["<|pad|>", "<|endoftext|>", "<|lmk|>"]
    for i, t in enumerate(T.SPECIAL_TOKENS):
        assert T.backend().token_to_id(t) == i
    assert len(hf_tok) == 8192
    cfg = json.loads((T.DEFAULT_PATH / "tokenizer_config.json").read_text())
    assert cfg["add_prefix_space"] is False and cfg["clean_up_tokenization_spaces"] is False


def test_pretrainedtokenizerfast_loads_offline():
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(T.DEFAULT_PATH), local_files_only=True)
    assert tok.pad_token_id == 0 and tok.eos_token_id == 1
    # no prefix space is added
    first = tok.convert_ids_to_tokens(tok.encode("Hello", add_special_tokens=False))[0]
    assert not first.startswith("Ġ")


@pytest.mark.parametrize("text", UNUSUAL)
def test_round_trip_exact(text, hf_tok):
    ids = T.encode(text)
    assert T.decode(ids) == text
    assert hf_tok.decode(ids) == text
    assert all(0 <= i < 8192 for i in ids)


def test_round_trip_fixture_texts(assets):
    for name in ("frankenstein_excerpt.txt", "stacks-brauer.tex"):
        text = (assets / name).read_text(encoding="utf-8")
        ids = T.encode(text)
        assert T.decode(ids) == text
        assert len(text.encode()) / len(ids) > 2.3  # it is a trained BPE, not bytes


def test_document_text_never_yields_control_ids():
    ids = T.encode("before <|endoftext|> middle <|lmk|><|pad|> after")
    assert not set(ids) & set(range(len(T.SPECIAL_TOKENS)))
    ids2, _ = T.encode_with_offsets("<|endoftext|>")
    assert not set(ids2) & {0, 1, 2}


@pytest.mark.parametrize("text", [t for t in UNUSUAL if t])
def test_offsets_monotone_inside_covering(text):
    ids, offs = T.encode_with_offsets(text)
    assert len(ids) == len(offs) > 0
    n = len(text)
    prev_s = prev_e = 0
    for s, e in offs:
        assert 0 <= s <= e <= n
        assert s >= prev_s and e >= prev_e  # monotone
        assert s <= prev_e  # no gap: tokens cover the text
        prev_s, prev_e = s, e
    assert offs[0][0] == 0 and offs[-1][1] == n


def test_offsets_map_back_to_text():
    text = "The passkey is 48213. Der Bär 中文 😀 ok"
    ids, offs = T.encode_with_offsets(text)
    # tokens that do not split a character: their span is exactly their text
    for i, (s, e) in zip(ids, offs):
        piece = T.decode([i])
        if "\ufffd" not in piece:
            assert text[s:e] == piece


def test_decode_pieces_is_decode_of_each_id():
    """The batched per-token text (citation targets, sentence boundaries) == decode([i]) one by one,
    special ids and tokens that split a multi-byte character included."""
    ids = [T.PAD_ID, T.EOT_ID, T.LMK_ID] + T.encode("The passkey is 48213. Der Bär 中文 😀 ok")
    assert T.decode_pieces(ids) == [T.decode([i]) for i in ids]
    assert any("\ufffd" in p for p in T.decode_pieces(ids))  # a split character is in the sample


def test_iter_pieces_is_exact(assets):
    for name in ("frankenstein_excerpt.txt", "stacks-brauer.tex"):
        text = (assets / name).read_text(encoding="utf-8")
        whole = T.encode(text)
        for size in (200, 1000, 5000):
            pieces = list(T.iter_pieces(text, size))
            assert "".join(pieces) == text
            assert [i for p in pieces for i in T.encode(p)] == whole
    assert T.encode_batch(["ab", "", "c d"]) == [T.encode("ab"), [], T.encode("c d")]


def test_train_small_tokenizer_and_truncate(tmp_path, assets):
    text = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    pieces = list(T.iter_pieces(text, 2000))
    tok = T.train_tokenizer(pieces, vocab_size=400, out_dir=tmp_path)
    assert tok.get_vocab_size() == 400
    for i, t in enumerate(T.SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i
    small = T.truncate_vocab(tok, 300)
    assert small.get_vocab_size() == 300
    s = "Round trip: ünïcödé 中 😀\x00"
    assert small.decode(small.encode(s).ids) == s
    assert len(small.encode(text).ids) >= len(tok.encode(text).ids)
    hf = T.load_tokenizer(tmp_path)
    assert hf.pad_token_id == 0 and len(hf) == 400
    with pytest.raises(ValueError):
        T.train_tokenizer(pieces, vocab_size=100)
