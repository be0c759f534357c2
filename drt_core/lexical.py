"""The lexical retrieval terms (config lexical, lexical_doc_df, lexical_words, lexical_word_carry;
our extension): retrieval scores add a learned weighting of the exact tokens, and of the whole
words, that a query chunk shares with a key chunk, with their in-document idf.

One scoring function (`LexicalScorer.scores`) for the batch forward and the engine. The document
frequencies it needs come either from counting the key chunks in one pass (the batch forward:
`doc_df`, `word_overlap`'s own count) or from `LexicalStats`, the running counts the engine keeps
per stored document (same numbers, linear in the new chunks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import OwnInit

if TYPE_CHECKING:
    from .hf_config import DRTConfig


class LexicalScorer(OwnInit):
    """Exact token overlap between a landmark's own chunk and each past chunk (config `lexical`, our
    extension): lex(c, e) = scale_g * sum of w_t over the distinct tokens t that chunks c and e share,
    with w_t = relu(weight_t) learned per vocabulary entry (started from inverse document frequency
    by `train --init-lexical`, so function words start at 0 and stay there) and 0 for the special
    tokens. It is added to the landmark scores of every group, in training and in the engine.

    Why: a 192-wide dense key cannot hold which rare words a chunk contains, and a reader's question
    ("Who is Mr. Darcy?") is answered by the passage that shares its rare words. BM25 finds those;
    the landmark scores alone did not (RESULTS, real questions). A chunk's tokens are already stored
    beside its memory, so the term costs no state; it stays causal (the query reads only the chunk
    its landmark closes, every token of which precedes the landmark).

    Config lexical_doc_df adds, per shared token, doc_g * relu(log((n + 1) / (1 + df))): its
    inverse document frequency over the n chunks before the query (df of them hold it; doc_df).
    Global weights learned on the training corpora cannot know that "Knightley" is on every page
    of Emma; BM25's idf, computed on the document itself, does (measured: docs/history)."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.scale = nn.Parameter(torch.ones(cfg.num_groups))
        # config lexical_doc_df > 0: a shared token also weighs doc_g * relu(log((n + 1) / (1 + df))),
        # its inverse document frequency in this document so far: n past chunks, df of them holding it
        # (a name on every page of this book counts little, a word found in one passage a lot)
        self.doc = nn.Parameter(torch.full((cfg.num_groups,), cfg.lexical_doc_df)) if cfg.lexical_doc_df > 0 else None
        # config lexical_words > 0: a shared WHOLE WORD (drt_core/words.py: case folded, however the
        # BPE cut it) also weighs words_g * relu(log((n + 1) / (1 + df_word))), its idf in the document
        self.words = (nn.Parameter(torch.full((cfg.num_groups,), cfg.lexical_words))
                      if cfg.lexical_words > 0 else None)
        # config lexical_word_carry: a word cut by a chunk boundary is whole in the chunk where it ends
        self.carry = bool(cfg.lexical_word_carry)
        self.pad_id = cfg.pad_token_id
        # a plain tuple, not a buffer: from_pretrained leaves non-persistent buffers uninitialised
        self.special = tuple(sorted({cfg.pad_token_id, cfg.eos_token_id, cfg.lmk_token_id}))
        self._word_tables = None  # (hash, power, start) [V] each: a function of the tokenizer (set_word_tables)
        # config lexical_gates > 0: a shared word also weighs gates_g * gq * gk * its idf, gq and gk read
        # from the lower-layer state at the word's last token in each chunk (word_gates)
        self.gates = (nn.Parameter(torch.full((cfg.num_groups,), cfg.lexical_gates))
                      if cfg.lexical_gates > 0 else None)
        self.gate = nn.Linear(cfg.hidden_size, 2) if cfg.lexical_gates > 0 else None  # [query side, key side]
        self._init = (cfg.lexical_doc_df, cfg.lexical_words, cfg.lexical_gates)

    def reset_parameters(self) -> None:
        """Inert until `train --init-lexical` sets the token weights; the idf terms' scales start at
        their config values."""
        nn.init.zeros_(self.weight)
        nn.init.ones_(self.scale)
        if self.doc is not None:
            nn.init.constant_(self.doc, self._init[0])
        if self.words is not None:
            nn.init.constant_(self.words, self._init[1])
        if self.gates is not None:  # every word weighs 0.5 on each side until trained
            nn.init.constant_(self.gates, self._init[2])
            nn.init.zeros_(self.gate.weight)
            nn.init.zeros_(self.gate.bias)

    def set_word_tables(self, tables) -> None:
        """The tokenizer's per-token word tables (drt_core.words.word_tables); by default those of
        the shipped tokenizer, which every checkpoint of this repository uses."""
        self._word_tables = tables

    def word_ids(self, toks: torch.Tensor, chunk: torch.Tensor | None = None, ctx_toks: torch.Tensor | None = None,
                 ctx_chunk: torch.Tensor | None = None) -> torch.Tensor:
        """toks [B, C, N] -> [B, C, N] whole-word ids (drt_core.words.word_ids; 0 where no word ends).

        Config lexical_word_carry, with the rows' chunk indices `chunk` [C]: a word cut by a chunk
        boundary is whole in the chunk where it ends; its first part is read from the row of chunk
        c - 1 in (ctx_toks [B, Ck, N], ctx_chunk [Ck] sorted; default: toks and chunk themselves).
        A row whose chunk before is not there gets no carry."""
        from .words import default_word_tables, word_ids, word_tail

        if self._word_tables is None:
            self._word_tables = default_word_tables(self.weight.shape[0])
        if not self.carry or chunk is None:
            return word_ids(toks, *self._word_tables)
        if ctx_toks is None:
            ctx_toks, ctx_chunk = toks, chunk
        chunk, ctx_chunk = chunk.to(toks.device), ctx_chunk.to(toks.device)
        carry = torch.zeros(toks.shape[:-1], dtype=torch.int64, device=toks.device)
        if ctx_chunk.numel():
            j = torch.searchsorted(ctx_chunk, chunk - 1).clamp(max=ctx_chunk.numel() - 1)  # [C]
            there = ctx_chunk[j] == chunk - 1
            if there.any():
                tails = word_tail(ctx_toks[:, j[there]], *self._word_tables)  # [B, C']
                carry[:, there] = tails
        return word_ids(toks, *self._word_tables, carry=carry)

    def word_gates(self, h: torch.Tensor) -> torch.Tensor:
        """Config lexical_gates: the lower-layer states h [..., N, D] of chunks' real slots ->
        [..., N, 2], per token the weight its word gets on the query side and on the key side (the
        sigmoid of a learned linear map, read at the word's last token, where word_ids puts its id).
        Causal: a slot's state has read only what precedes it."""
        return torch.sigmoid(self.gate(h.to(self.gate.weight.dtype)))

    def token_weights(self) -> torch.Tensor:
        """w [V]: relu(weight), 0 for the pad, end-of-text and landmark ids."""
        return F.relu(self.weight).index_fill(0, torch.tensor(self.special, device=self.weight.device), 0.0)

    def query_table(self, q_toks: torch.Tensor) -> torch.Tensor:
        """q_toks [..., Cq, N] -> [..., Cq, V]: w_t where t occurs in the query chunk, else 0."""
        V = self.weight.shape[0]
        present = torch.zeros(*q_toks.shape[:-1], V, device=q_toks.device).scatter_(-1, q_toks.long(), 1.0)
        return present * self.token_weights()

    def scores(self, g: int, q_toks: torch.Tensor | None, k_toks: torch.Tensor | None,
               q_chunk: torch.Tensor | None = None, k_chunk: torch.Tensor | None = None, block: int = 4096,
               stats=None, q_gates: torch.Tensor | None = None, k_gates: torch.Tensor | None = None,
               gated: bool = True) -> torch.Tensor:
        """[B, Cq, Ck] lexical scores of group g; q_toks [B, Cq, N], k_toks [B, Ck, N] token ids
        (keys deduplicated here: each distinct token counts once). Key chunks in blocks of `block`.
        With config lexical_doc_df (and lexical_words), q_chunk [Cq] and k_chunk [Ck] (chunk indices)
        give each query the key chunks before it, over which doc_df counts its tokens (and
        word_overlap its words): the in-document idf terms.

        `stats` (the engine, B = 1, keys = chunks 0..Ck-1): what the streaming engine keeps per
        memory instead of recomputing it over every past chunk at every landmark: `key_tokens` and
        `key_words` [1, Ck, N] (each chunk's distinct token and word ids), and `token_df(items,
        q_chunk)` / `word_df(items, q_chunk)`, the running in-document counts (engine.LexicalStats).
        Same numbers, in time linear in the new chunks rather than in all the past ones.

        Config lexical_gates: q_gates [B, Cq, N] and k_gates [B, Ck, N], the query-side and key-side
        word_gates of the chunks' tokens (with `stats`, k_gates are aligned with stats.key_words: a
        distinct word's largest, `distinct_max`); gated=False leaves that term out (a
        generation fork's selections, DocState.gated: the gates were trained on how a passage cites an
        earlier one)."""
        if q_toks is None or k_toks is None:
            raise ValueError("a lexical model scores chunks with their tokens: pass q_toks and k_toks")
        q_toks, k_toks = q_toks.to(self.weight.device), k_toks.to(self.weight.device)
        ku = stats.key_tokens if stats is not None else distinct_tokens(k_toks, self.pad_id)
        table = self.query_table(q_toks)  # [B, Cq, V]
        if (self.doc is not None or self.words is not None) and (q_chunk is None or k_chunk is None):
            raise ValueError("config lexical_doc_df and lexical_words need the chunk indices q_chunk and k_chunk")
        if self.doc is not None:
            qd = distinct_tokens(q_toks, self.pad_id)
            q_chunk, k_chunk = q_chunk.to(qd.device), k_chunk.to(qd.device)
            df = stats.token_df(qd, q_chunk) if stats is not None else doc_df(qd, q_chunk, ku, k_chunk)  # [B, Cq, N]
            n = (k_chunk[None, :] < q_chunk[:, None]).sum(-1).to(df.dtype)  # [Cq] past chunks
            idf = F.relu(torch.log((n[None, :, None] + 1.0) / (1.0 + df)))
            V = self.weight.shape[0]
            doc = torch.zeros(*qd.shape[:-1], V, device=qd.device, dtype=idf.dtype).scatter(-1, qd, idf)
            # the special ids count for nothing, as in token_weights
            doc = doc.index_fill(-1, torch.tensor(self.special, device=qd.device), 0.0)
            table = table + self.doc[g] * doc
        s = self.scale[g] * bag_sums(table, ku, block)
        if self.words is not None:
            from .words import template_word_ids

            gated = self.gates is not None and gated
            if gated and (q_gates is None or k_gates is None):
                raise ValueError("config lexical_gates scores chunks with their word gates: pass q_gates and k_gates")
            kg = None
            if stats is not None:  # the keys' distinct words, and their gates aligned with them
                kw, kg = stats.key_words, (k_gates if gated else None)
            elif gated:
                kw, kg = distinct_max(self.word_ids(k_toks, k_chunk), k_gates.to(s.dtype))
            else:
                kw = distinct_tokens(self.word_ids(k_toks, k_chunk), 0)
            qw = self.word_ids(q_toks, q_chunk, k_toks, k_chunk)  # a query chunk's chunk before is a key
            qw = qw.masked_fill(torch.isin(qw, template_word_ids().to(qw.device)), 0)  # not "question", "answer"
            terms = word_overlap(qw, q_chunk.to(s.device), kw.to(s.device), k_chunk.to(s.device), k_distinct=True,
                                 df_fn=None if stats is None else stats.word_df,
                                 q_weights=q_gates.to(s.device) if gated else None,
                                 k_weights=kg.to(s.device) if gated else None, plain=gated)
            if gated:  # one pass over the shared words: the plain term and the gated one
                s = s + self.words[g] * terms[0] + self.gates[g] * terms[1]
            else:
                s = s + self.words[g] * terms
        return s


def bag_sums(table: torch.Tensor, items: torch.Tensor, block: int = 1 << 16,
             weights: torch.Tensor | None = None) -> torch.Tensor:
    """table [B, Cq, U], items [B, Ck, N] ids in [0, U) -> [B, Cq, Ck]: for each query row and key
    chunk, the sum of the table's entries at the chunk's N items (repeats counted each time), each
    times its weight in `weights` [B, Ck, N] when given. One embedding_bag per row (~10x the speed
    of gathering a [Cq, Ck * N] index at Ck = 65K), key chunks in blocks of `block`; differentiable
    in the table and the weights."""
    B, Cq, _ = table.shape
    Ck = items.shape[1]
    if Ck == 0:
        return table.new_zeros(B, Cq, 0)
    out = []
    for b in range(B):
        w = table[b].transpose(0, 1).contiguous()  # [U, Cq]
        out.append(torch.cat([F.embedding_bag(items[b, a: a + block].long(), w, mode="sum",
                                              per_sample_weights=None if weights is None
                                              else weights[b, a: a + block].to(w.dtype))
                              for a in range(0, Ck, block)]).transpose(0, 1))  # [Cq, Ck]
    return torch.stack(out)


def doc_df(q_toks: torch.Tensor, q_chunk: torch.Tensor, k_toks: torch.Tensor, k_chunk: torch.Tensor) -> torch.Tensor:
    """In how many key chunks before each query chunk each of its tokens occurs: q_toks [B, Cq, N],
    q_chunk [Cq], k_toks [B, Ck, N] (distinct per row: distinct_tokens), k_chunk [Ck] -> [B, Cq, N]
    float, counting key chunk e for query q when k_chunk[e] < q_chunk[q] (causal: only the past).
    Only the query tokens are counted (a presence matrix over their union), so the cost is
    Ck x (distinct query tokens), not Ck x V."""
    B, Cq, N = q_toks.shape
    U, inv = torch.unique(q_toks, return_inverse=True)
    lut = torch.full((int(U.max()) + 1 if len(U) else 1,), -1, dtype=torch.long, device=q_toks.device)
    lut[U] = torch.arange(len(U), device=q_toks.device)
    kt = k_toks.long()
    ki = torch.where(kt < len(lut), lut[kt.clamp(max=len(lut) - 1)], -1)  # [B, Ck, N]: index in U, -1 if none
    Ck = kt.shape[1]
    P = torch.zeros(B, Ck, len(U) + 1, device=q_toks.device).scatter_(-1, ki + 1, 1.0)[..., 1:]
    return past_counts(P, q_chunk, k_chunk).gather(-1, inv.reshape(B, Cq, N))


def past_counts(P: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor) -> torch.Tensor:
    """P [B, Ck, U]: whether key chunk e holds item u -> [B, Cq, U], in how many key chunks before
    each query chunk (k_chunk[e] < q_chunk[q]) it occurs: the df of doc_df and word_overlap."""
    Ck = P.shape[1]
    if Ck and bool((k_chunk == torch.arange(Ck, device=k_chunk.device)).all()):
        # keys are chunks 0..Ck-1 (the batch forward and the engine): a running count, Ck x U
        last = q_chunk.clamp(max=Ck) - 1  # the last key chunk before each query
        return P.cumsum(1)[:, last.clamp(min=0)] * (last >= 0).to(P.dtype)[None, :, None]
    return torch.matmul((k_chunk[None, :] < q_chunk[:, None]).to(P.dtype), P)  # [Cq, Ck] @ [B, Ck, U]


def word_overlap(q_words: torch.Tensor, q_chunk: torch.Tensor, k_words: torch.Tensor, k_chunk: torch.Tensor,
                 *, k_distinct: bool = False, df_fn=None, q_weights: torch.Tensor | None = None,
                 k_weights: torch.Tensor | None = None, plain: bool = False):
    """[B, Cq, Ck]: for each query chunk and key chunk, the sum over the distinct words they share of
    relu(log((n + 1) / (1 + df))), where n is the number of key chunks before the query
    (k_chunk < q_chunk) and df how many of them hold the word. q_words [B, Cq, N], k_words
    [B, Ck, N]: word ids (LexicalScorer.word_ids; 0 = no word), already distinct per chunk when
    k_distinct. df_fn(U, q_chunk) -> [B, Cq, |U|]: the counts of the sorted query words U when the
    caller keeps them (the engine's running counts); else counted here over the keys. Pairs whose
    key is not before the query get a finite score too: retrieval_scores' -inf masks them. Cost
    Ck x (distinct query words).

    q_weights [B, Cq, N], k_weights [B, Ck, N] (config lexical_gates): each shared word's idf is also
    multiplied by its weight in the query chunk and in the key chunk (a word written twice in a chunk:
    its larger weight, `distinct_max`); k_weights aligned with k_words (distinct already with k_distinct).
    With `plain` as well, returns (the unweighted sums, the weighted ones) from one pass over the
    shared words (LexicalScorer.scores' word term and gated term).
"""
    B, Cq, N = q_words.shape
    Ck = k_words.shape[1]
    if q_weights is not None:
        qd, qwt = distinct_max(q_words, q_weights)
    else:
        qd, qwt = distinct_tokens(q_words, 0), None
    if k_distinct:
        kd = k_words
    elif k_weights is not None:
        kd, k_weights = distinct_max(k_words, k_weights)
    else:
        kd = distinct_tokens(k_words, 0)
    U, inv = torch.unique(qd, return_inverse=True)  # sorted; the query words (and 0)
    pos = torch.searchsorted(U, kd.reshape(-1)).clamp(max=len(U) - 1).view_as(kd)
    hit = (U[pos] == kd) & (kd != 0)
    at = torch.where(qd != 0, inv.view_as(qd) + 1, 0)  # each query word's place in U (+1; 0 = none)
    dtype = torch.float32 if qwt is None else qwt.dtype
    Q = torch.zeros(B, Cq, len(U) + 1, device=kd.device, dtype=dtype).scatter_(
        -1, at, 1.0 if qwt is None else qwt)[..., 1:]
    if df_fn is not None:
        df = df_fn(U, q_chunk).to(Q.dtype)  # [B, Cq, |U|]
    else:
        P = torch.zeros(B, Ck, len(U) + 1, device=kd.device).scatter_(-1, torch.where(hit, pos + 1, 0), 1.0)[..., 1:]
        df = past_counts(P, q_chunk, k_chunk)  # [B, Cq, |U|]
    n = (k_chunk[None, :] < q_chunk[:, None]).sum(-1).to(Q.dtype)  # [Cq] past chunks
    idf = F.relu(torch.log((n[None, :, None] + 1.0) / (1.0 + df)))
    # item 0 is "no query word" (weight 0); a key chunk's distinct words each count once
    table, items = F.pad(Q * idf, (1, 0)), torch.where(hit, pos + 1, 0)  # items [B, Ck, N]: 0 = none
    weighted = bag_sums(table, items, weights=k_weights)
    if not plain or qwt is None:
        return weighted
    ones = torch.zeros(B, Cq, len(U) + 1, device=kd.device, dtype=dtype).scatter_(-1, at, 1.0)[..., 1:]
    return bag_sums(F.pad(ones * idf, (1, 0)), items), weighted  # every query word at weight 1


def distinct_max(ids: torch.Tensor, weights: torch.Tensor, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [..., N] and their weights [..., N] -> (distinct_tokens(ids, pad_id), the weights aligned
    with it: at each distinct id's place the largest weight it has in the row, 0 at the repeats).
    Differentiable in the weights."""
    s, perm = ids.long().sort(dim=-1, stable=True)
    w = weights.gather(-1, perm)
    rep = torch.zeros_like(s, dtype=torch.bool)
    rep[..., 1:] = s[..., 1:] == s[..., :-1]
    run = (~rep).long().cumsum(-1) - 1  # each position's run (one run per distinct id)
    best = torch.zeros_like(w).scatter_reduce(-1, run, w, "amax", include_self=False)
    return s.masked_fill(rep, pad_id), best.gather(-1, run).masked_fill(rep, 0.0)


def distinct_tokens(toks: torch.Tensor, pad_id: int) -> torch.Tensor:
    """toks [..., N] -> the same ids with every repeat within a row replaced by pad_id (sorted)."""
    s = toks.long().sort(-1).values
    rep = torch.zeros_like(s, dtype=torch.bool)
    rep[..., 1:] = s[..., 1:] == s[..., :-1]
    return s.masked_fill(rep, pad_id)


class LexicalStats:
    """The in-document counts a lexical model's scores need (LexicalScorer.scores' `stats`), kept
    per memory by the engine: each chunk's distinct token and word ids (cached per chunk), and
    running counts over chunks [0, n) of how many hold each token and each word. A landmark's df
    is then the counts before the run's first landmark plus the run's own earlier chunks: linear
    in the new chunks, where counting over every past chunk at every landmark made a 4M-token
    stream's lexical scores 50x its dense ones (2.6 s a block of 16 chunks at 65K chunks)."""

    def __init__(self, vocab: int, key_tokens: torch.Tensor, key_words: torch.Tensor | None):
        self.n = 0
        self.tok = torch.zeros(vocab, dtype=torch.float64)
        self.words: dict[int, int] = {}
        self.key_tokens, self.key_words = key_tokens, key_words  # [1, Ck, N] (distinct per chunk)

    def copy_for(self, key_tokens: torch.Tensor, key_words: torch.Tensor | None) -> "LexicalStats":
        out = LexicalStats(self.tok.shape[0], key_tokens, key_words)
        out.n, out.tok, out.words = self.n, self.tok.clone(), dict(self.words)
        return out

    def advance(self, upto: int, block: int = 1024) -> None:
        """Count chunks [n, upto)."""
        kt = self.key_tokens[0]
        for a in range(self.n, upto, block):
            b = min(upto, a + block)
            rows = kt[a:b].long()
            self.tok += torch.zeros(b - a, self.tok.shape[0], dtype=self.tok.dtype).scatter_(1, rows.cpu(), 1.0).sum(0)
            if self.key_words is not None:
                w = self.key_words[0, a:b]
                vals, cnt = torch.unique(w[w != 0], return_counts=True)
                for h, c in zip(vals.tolist(), cnt.tolist()):
                    self.words[h] = self.words.get(h, 0) + c
        self.n = max(self.n, upto)

    def _count_before(self, c: int) -> None:
        """Make the counts cover exactly chunks [0, c) (recounted from 0 if they went past it)."""
        if c < self.n:
            self.n, self.words = 0, {}
            self.tok.zero_()
        self.advance(c)

    def _df(self, U: torch.Tensor, q_chunk: torch.Tensor, ids: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        """[Cq, |U|]: in how many chunks before each query chunk each item of U occurs. `base` [|U|]:
        the counts over chunks [0, c_min) (c_min = min(q_chunk), brought up to date by the caller);
        the chunks [c_min, q) of the query's own run are read from `ids` [1, Ck, N] (their distinct ids)."""
        c_min, c_max = int(q_chunk.min()), int(q_chunk.max())
        rows = ids[0, c_min:c_max].cpu()
        hold = (rows[:, :, None] == U.reshape(1, 1, -1)).any(1).to(torch.float64)  # [J, |U|]
        cum = torch.cat([hold.new_zeros(1, hold.shape[1]), hold.cumsum(0)])  # cum[j] = chunks c_min..c_min+j-1
        return base[None] + cum[(q_chunk.cpu() - c_min).clamp(min=0, max=len(cum) - 1)]

    def token_df(self, qd: torch.Tensor, q_chunk: torch.Tensor) -> torch.Tensor:
        """doc_df with these counts: qd [1, Cq, N] -> [1, Cq, N]."""
        self._count_before(int(q_chunk.min()))
        U, inv = torch.unique(qd[0].long().cpu(), return_inverse=True)
        df = self._df(U, q_chunk, self.key_tokens, self.tok[U])
        return df.gather(1, inv.view(qd.shape[1], -1)).to(torch.float32).to(qd.device)[None]

    def word_df(self, U: torch.Tensor, q_chunk: torch.Tensor) -> torch.Tensor:
        """word_overlap's df_fn: U [|U|] sorted query words (0 included) -> [1, Cq, |U|]."""
        self._count_before(int(q_chunk.min()))
        Uc = U.cpu()
        df = self._df(Uc, q_chunk, self.key_words,
                      torch.tensor([self.words.get(h, 0) for h in Uc.tolist()], dtype=torch.float64))
        df[:, Uc == 0] = 0.0  # "no word" is never counted
        return df.to(torch.float32).to(U.device)[None]
