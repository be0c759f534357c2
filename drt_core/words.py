"""Whole words from BPE token ids, for the lexical retrieval term's word-level part.

Our 8,192-piece BPE splits a rare name into common pieces ("Telegonus" -> "ĠT", "eleg", "on", "us";
"Darcy" -> "ĠD", "ar", "cy"), so a token-level overlap matches a name only through pieces that
occur all over the book. This module maps a chunk's token ids to ids of its whole words, case
folded: a word is a run of tokens whose first token starts with a space or punctuation and whose
next tokens start with a letter or a digit; its id is a polynomial hash of its lower-cased letters
and digits, so "Treville", "TREVILLE" and "Treville's" (its "treville" part) get the same id however
the tokenizer cut them.

    tables = word_tables(tokenizer)          # per vocabulary entry: hash, B^len, starts-a-word
    ids = word_ids(toks, *tables)            # toks [..., N] -> [..., N]: a word's id at its last
                                             # token, 0 elsewhere (ids are in [1, MOD))
    ids = word_ids(toks, *tables, carry=word_tail(prev, *tables))   # a word cut by the chunk
                                             # boundary, whole in the chunk where it ends

Everything is a function of the token ids alone: causal, and identical in the batch forward and in
the engine, which stores the tokens of every chunk beside its memory.
"""

from __future__ import annotations

from functools import lru_cache

import torch

MOD = (1 << 31) - 1  # a prime: hashes live in [0, MOD); products of two stay below 2**62
BASE = 1_000_003 % MOD


def _alnum_lower(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def _poly(norm: str) -> tuple[int, int]:
    """(the polynomial hash of `norm` mod MOD, BASE**len(norm) mod MOD): what word_ids chains."""
    hv, pv = 0, 1
    for ch in norm:
        hv = (hv * BASE + ord(ch)) % MOD
        pv = (pv * BASE) % MOD
    return hv, pv


def word_tables(tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(hash [V] int64, power [V] int64, start [V] bool) for a `tokenizers.Tokenizer` or a HF
    tokenizer: hash of the token's lower-cased letters and digits (0 for none), BASE**len mod MOD,
    and whether the token begins a new word (its text starts with something other than a letter or
    digit: a space, punctuation; special tokens and tokens without letters or digits also do)."""
    tok = getattr(tokenizer, "backend_tokenizer", tokenizer)
    V = tok.get_vocab_size(with_added_tokens=True)
    h = torch.zeros(V, dtype=torch.int64)
    p = torch.ones(V, dtype=torch.int64)
    s = torch.ones(V, dtype=torch.bool)
    special = set(tok.get_added_tokens_decoder()) if hasattr(tok, "get_added_tokens_decoder") else set()
    for t in range(V):
        if t in special:
            continue
        text = tok.decode([t], skip_special_tokens=False)
        norm = _alnum_lower(text)
        if not norm:
            continue
        h[t], p[t] = _poly(norm)
        s[t] = not text[:1].isalnum()
    return h, p, s


def word_hash(word: str) -> int:
    """The id word_ids gives `word` (its lower-cased letters and digits; 0 for none)."""
    norm = _alnum_lower(word)
    return _poly(norm)[0] + 1 if norm else 0


@lru_cache(maxsize=1)
def template_word_ids() -> torch.Tensor:
    """Ids of the words of the prompt's own template ("Question:", "Answer:", "Summary:",
    drt_core.prompts): every question's chunk holds them, so as query words they would pull the
    passages that say "question" or "answer" (measured: "Who is Emma Woodhouse?" retrieved
    '"Who shall answer that question?" cried Emma.'). word_overlap does not count them on the
    query side."""
    from .prompts import ANSWER_PREFIX, QUESTION_PREFIX, SUMMARY_SUFFIX

    words = {w for t in (QUESTION_PREFIX, ANSWER_PREFIX, SUMMARY_SUFFIX) for w in t.split() if _alnum_lower(w)}
    return torch.tensor(sorted(word_hash(w) for w in words), dtype=torch.int64)


def word_ids(toks: torch.Tensor, hash_: torch.Tensor, power: torch.Tensor, start: torch.Tensor,
             carry: torch.Tensor | None = None) -> torch.Tensor:
    """toks [..., N] token ids -> [..., N] int64: at the last token of each word, the word's id
    (its hash + 1, so in [1, MOD)); 0 at every other position. A word ends where the next token
    starts one, or at the end of the row (a word cut by the chunk boundary counts as it is there).

    carry [...] (word_tail of the chunk before each row; 0 = none): a row whose first token
    continues a word (no space or punctuation before it) finishes that word, so the chunk where a
    cut word ends holds the whole word ("pass|key" gives the chunk after the cut "passkey", not
    "key"). One chunk back: a word running through a whole chunk is hashed from that chunk on."""
    return _scan(toks, hash_, power, start, carry)[0]


def word_tail(toks: torch.Tensor, hash_: torch.Tensor, power: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """toks [..., N] -> [...]: the hash of the word left open at the row's end (its letters in this
    row alone; 0 when the last token has no letters): the `carry` word_ids takes for the next row."""
    return _scan(toks, hash_, power, start, None)[1]


def _scan(toks, hash_, power, start, carry):
    t = toks.long()
    ht, pt = hash_.to(t.device)[t], power.to(t.device)[t]
    st = start.to(t.device)[t] | (ht == 0)  # a token without letters starts (and ends) a "word"
    N = t.shape[-1]
    H = torch.zeros_like(ht)
    acc = torch.zeros_like(ht[..., 0]) if carry is None else carry.to(t.device).long()
    for i in range(N):  # a scan over the row's positions, vectorised over rows
        acc = torch.where(st[..., i], ht[..., i], (acc * pt[..., i] + ht[..., i]) % MOD)
        H[..., i] = acc
    end = torch.ones_like(st)
    end[..., :-1] = st[..., 1:]
    return torch.where(end & (ht != 0) & (H != 0), H + 1, torch.zeros_like(H)), acc


@lru_cache(maxsize=4)
def _tables_of(path: str):
    from .tokenizer import backend

    return word_tables(backend(path))


def default_word_tables(vocab_size: int):
    """The shipped tokenizer's tables (checkpoints/drt-tiny) for a model of its vocabulary size; for
    any other size (the tests' toy models), every token a word of its own. A checkpoint with its
    own tokenizer gets that tokenizer's tables from Engine.from_pretrained."""
    from .tokenizer import DEFAULT_PATH

    tables = _tables_of(str(DEFAULT_PATH))
    if len(tables[0]) == vocab_size:
        return tables
    ids = torch.arange(vocab_size, dtype=torch.int64)
    return ids + 1, torch.full_like(ids, BASE), torch.ones(vocab_size, dtype=torch.bool)
