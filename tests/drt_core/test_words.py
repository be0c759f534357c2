"""Whole words from token ids (drt_core/words.py) and the lexical term's word part (config lexical_words)."""

from __future__ import annotations

import math
import re

import pytest
import torch

from drt_core import DRTConfig
from drt_core.lexical import LexicalScorer, word_overlap
from drt_core.tokenizer import backend, encode
from drt_core.words import BASE, MOD, default_word_tables, word_ids, word_tail

TEXT = ("“Who is Mr. Darcy?” asked D'Artagnan; TREVILLE, Treville's friend, lives at No. 12 in the\n"
        "Rue du Vieux-Colombier. $\\mathcal{O}_X$-modules, quasi-coherent sheaves (Lemma 3.4) and Telegonus.")


def _hash(word: str) -> int:
    v = 0
    for ch in word:
        v = (v * BASE + ord(ch)) % MOD
    return v + 1


def test_word_ids_are_the_lowercased_words_of_the_text():
    """Each word of the text (letters and digits, lower-cased) gets exactly one id, at its last token,
    whatever the BPE cut: the ids are the words' hashes, and case does not matter."""
    ids = torch.tensor(encode(TEXT))
    got = word_ids(ids[None], *default_word_tables(8192))[0]
    want = [_hash(w) for w in re.findall(r"[^\W_]+", TEXT.lower())]
    assert got[got > 0].tolist() == want
    assert _hash("treville") in got.tolist() and got.tolist().count(_hash("treville")) == 2
    # a word is cut into several tokens, and it still has one id
    assert len(backend().encode(" Telegonus").ids) > 1 and _hash("telegonus") in got.tolist()


def test_word_overlap_is_the_in_document_idf_of_shared_words():
    """Brute force: sum over the distinct words (id != 0) shared by query chunk c and key chunk e of
    relu(log((n + 1) / (1 + df))), n = key chunks before c, df = those holding the word; the general
    path (keys that are not chunks 0..Ck-1) gives the same numbers."""
    g = torch.Generator().manual_seed(0)
    q = torch.randint(0, 9, (2, 3, 6), generator=g)
    k = torch.randint(0, 9, (2, 7, 6), generator=g)
    q_chunk, k_chunk = torch.tensor([2, 5, 7]), torch.arange(7)
    got = word_overlap(q, q_chunk, k, k_chunk)
    assert torch.allclose(word_overlap(q, q_chunk * 2, k, k_chunk * 2), got, atol=1e-5)
    for b in range(2):
        for c in range(3):
            n = int(q_chunk[c])
            for e in range(7):
                shared = (set(q[b, c].tolist()) & set(k[b, e].tolist())) - {0}
                want = sum(max(0.0, math.log((n + 1) / (1 + sum(w in k[b, x].tolist() for x in range(n)))))
                           for w in shared)
                assert abs(got[b, c, e].item() - want) < 1e-4


def test_lexical_words_adds_the_word_term():
    """config lexical_words: the scorer adds words_g * word_overlap of the chunks' word ids (gradient
    to words_g); the field needs lexical (causality: test_model.test_lexical_doc_df_model_is_causal)."""
    torch.manual_seed(0)
    kw = dict(vocab_size=8192, hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2], window=64)
    cfg = DRTConfig.from_preset("tiny", lexical=True, lexical_words=1.5, **kw)
    lex = LexicalScorer(cfg)
    assert torch.allclose(lex.words.detach(), torch.full((1,), 1.5))
    ids = torch.tensor(encode(TEXT * 5))[: 63 * 4].view(1, 4, 63)
    q_chunk, k_chunk = torch.tensor([3]), torch.arange(3)
    s = lex.scores(0, ids[:, 3:], ids[:, :3], q_chunk, k_chunk)
    want = 1.5 * word_overlap(lex.word_ids(ids[:, 3:]), q_chunk, lex.word_ids(ids[:, :3]), k_chunk)
    assert want.abs().sum() > 0 and torch.allclose(s, want, atol=1e-5)  # token weights are 0 at init
    lex.scores(0, ids[:, 3:], ids[:, :3], q_chunk, k_chunk).sum().backward()
    assert lex.words.grad is not None and lex.words.grad[0] != 0
    with pytest.raises(ValueError, match="needs lexical"):
        DRTConfig.from_preset("tiny", lexical_words=0.5)


def test_the_prompt_template_words_are_not_query_words():
    """Regression: every question's chunk holds "Question:" and "Answer:", so the word term pulled
    the passages that say "question" or "answer" ("Who is Emma Woodhouse?" retrieved '"Who shall
    answer that question?" cried Emma.'). They count on the key side only, never on the query side."""
    from drt_core.prompts import qa_suffix

    cfg = DRTConfig.from_preset("tiny", lexical=True, lexical_words=1.0, vocab_size=8192, hidden_size=32,
                                num_heads=2, intermediate_size=64)
    lex = LexicalScorer(cfg)

    def chunk(text):
        ids = encode(text)[:63]
        return torch.tensor(ids + [0] * (63 - len(ids)))

    keys = torch.stack([chunk("Who shall answer that question? said she. Summary of it."),
                        chunk("The old abbey of Donwell stood by the river.")])[None]
    q = chunk(qa_suffix("Where is Donwell?"))[None, None]
    s = lex.scores(0, q, keys, torch.tensor([2]), torch.arange(2))[0, 0]
    assert s[0].item() == 0.0 and s[1].item() > 0.0


def test_word_ids_carry_a_word_cut_by_the_chunk_boundary():
    """word_ids(carry=word_tail(chunk before)): every word gets, in the chunk where it ends, the id
    it has in the uncut text; the chunk where a cut word begins keeps its fragment (as without the
    carry), and nothing else changes. Without the carry the cut words' ends get other ids."""
    tables = default_word_tables(8192)
    ids = torch.tensor(encode(TEXT * 3))
    N = 11
    C = len(ids) // N
    whole = word_ids(ids[None, : C * N], *tables)[0].view(C, N)
    rows = ids[: C * N].view(C, N)
    carry = torch.cat([torch.zeros(1, dtype=torch.int64), word_tail(rows[:-1], *tables)])
    got = word_ids(rows, *tables, carry=carry)
    plain = word_ids(rows, *tables)
    assert torch.equal(got[:, :-1], whole[:, :-1])  # every word, whole, where it ends
    cut = whole[:, -1] == 0  # the row's last word runs on into the next row
    assert cut.any() and torch.equal(got[:, -1][~cut], whole[:, -1][~cut])
    assert torch.equal(got[:, -1], plain[:, -1])  # a cut word's fragment stays where it begins
    assert not torch.equal(got, plain)


def test_lexical_word_carry_finds_a_word_cut_by_the_chunk_boundary():
    """Regression (1M needle, sample 1 of 4): "The pass|key is 84606" was cut inside "passkey", so
    neither chunk held the question's rarest word and the needle ranked 19th. With config
    lexical_word_carry the chunk where the word ends holds it whole, for the keys and for the query
    row's own chunk before; the config needs lexical_words."""
    kw = dict(vocab_size=8192, hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2], window=64)
    filler = encode("The river ran by the old mill and the meadow beyond it, green in the sun. " * 6)
    needle = encode(" The passkey is 84606. It is a pond about one hundred feet square.")
    pass_at = next(i for i in range(len(needle)) if backend().decode(needle[: i + 1]).endswith("pass"))
    c0 = (filler[: 63 - pass_at - 1] + needle[: pass_at + 1])[-63:]  # ends with " pass"
    c1 = (needle[pass_at + 1:] + filler)[:63]  # begins with "key"
    q = (filler[:63] + encode(" Which passkey was given in the text?"))[-63:]
    toks = torch.tensor([filler[:63], c0, c1, q])[None]
    scores = {}
    for carry in (False, True):
        cfg = DRTConfig.from_preset("tiny", lexical=True, lexical_words=1.0, lexical_word_carry=carry, **kw)
        lex = LexicalScorer(cfg)
        scores[carry] = lex.scores(0, toks[:, 3:], toks[:, :3], torch.tensor([3]), torch.arange(3))[0, 0].detach()
    passkey = math.log(4 / 2)  # in-document idf: 3 past chunks, 1 holds the word
    assert float(scores[True][2] - scores[False][2]) == pytest.approx(passkey, abs=1e-5)
    assert torch.equal(scores[True][:2], scores[False][:2])
    with pytest.raises(ValueError, match="needs lexical_words"):
        DRTConfig.from_preset("tiny", lexical=True, lexical_word_carry=True)
    with pytest.raises(ValueError, match="needs lexical_words"):
        DRTConfig.from_preset("tiny", lexical=True, lexical_gates=1.0)


def test_distinct_max_keeps_each_words_largest_weight_where_distinct_tokens_keeps_the_word():
    """lexical.distinct_max: the ids of distinct_tokens, and at each kept place the largest weight the
    id has in its row (0 at the repeats); gradients reach only those largest weights."""
    from drt_core.lexical import distinct_max, distinct_tokens

    ids = torch.tensor([[5, 3, 5, 0, 3, 9], [7, 7, 7, 2, 0, 0]])
    w = torch.tensor([[0.1, 0.9, 0.7, 0.2, 0.4, 0.3], [0.5, 0.8, 0.6, 0.1, 0.3, 0.2]], requires_grad=True)
    got_ids, got_w = distinct_max(ids, w)
    assert torch.equal(got_ids, distinct_tokens(ids, 0))
    assert got_ids.tolist() == [[0, 3, 0, 5, 0, 9], [0, 0, 2, 7, 0, 0]]
    assert torch.allclose(got_w, torch.tensor([[0.2, 0.9, 0.0, 0.7, 0.0, 0.3], [0.3, 0.0, 0.1, 0.8, 0.0, 0.0]]))
    got_w.sum().backward()
    assert w.grad.tolist() == [[0, 1, 1, 1, 0, 1], [0, 1, 0, 1, 1, 0]]


def test_word_overlap_weighs_each_shared_word_by_its_query_and_key_weights():
    """word_overlap with q_weights and k_weights (config lexical_gates): the sum over shared words of
    qw * kw * idf, each side's weight the word's largest in its chunk; with every weight 1 it is the
    unweighted overlap. Brute force over random word ids."""
    import math

    from drt_core.lexical import word_overlap

    g = torch.Generator().manual_seed(0)
    qw = torch.randint(0, 9, (1, 3, 6), generator=g)
    kw = torch.randint(0, 9, (1, 5, 6), generator=g)
    qg, kg = torch.rand(1, 3, 6, generator=g), torch.rand(1, 5, 6, generator=g)
    q_chunk, k_chunk = torch.tensor([2, 4, 5]), torch.arange(5)
    got = word_overlap(qw, q_chunk, kw, k_chunk, q_weights=qg, k_weights=kg)
    ones = word_overlap(qw, q_chunk, kw, k_chunk, q_weights=torch.ones_like(qg), k_weights=torch.ones_like(kg))
    assert torch.allclose(ones, word_overlap(qw, q_chunk, kw, k_chunk), atol=1e-6)
    for c in range(3):
        n = int(q_chunk[c])
        for e in range(5):
            want = 0.0
            for u in set(qw[0, c].tolist()) & set(kw[0, e].tolist()) - {0}:
                df = sum(u in kw[0, j].tolist() for j in range(n))
                a = max(qg[0, c, i].item() for i in range(6) if qw[0, c, i] == u)
                b = max(kg[0, e, i].item() for i in range(6) if kw[0, e, i] == u)
                want += a * b * max(0.0, math.log((n + 1) / (1 + df)))
            assert abs(got[0, c, e].item() - want) < 1e-5
    # plain=True: the unweighted overlap and the weighted one from one pass, each equal to its own call
    plain, weighted = word_overlap(qw, q_chunk, kw, k_chunk, q_weights=qg, k_weights=kg, plain=True)
    assert torch.equal(weighted, got)
    assert torch.allclose(plain, word_overlap(qw, q_chunk, kw, k_chunk), atol=1e-6)
    # a weight of exactly 0 drops the word from the weighted sum only
    zero = qg.clone()
    zero[0, 1] = 0.0
    plain0, weighted0 = word_overlap(qw, q_chunk, kw, k_chunk, q_weights=zero, k_weights=kg, plain=True)
    assert torch.allclose(plain0, plain, atol=1e-6) and float(weighted0[0, 1].abs().max()) == 0.0
