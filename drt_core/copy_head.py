"""The copy head (config copy_head and the copy_* options; our extension, not in the paper): a
pointer over the tokens of the retrieved chunks, mixed into the LM's distribution by a learned gate.

One implementation for the batch forward (modeling.DRTForCausalLM, `batch_copy`) and the streaming
engine (drt_core/stream_copy.py): each reads the selected chunks from its own storage through
`copy_slots`, which lays out the slots the pointer reads (with copy_span / copy_lead's neighbours),
and hands `CopyHead.point` the token ids of each query chunk and the chunk before it, from which
every query-side feature is derived.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import OwnInit, RMSNorm

if TYPE_CHECKING:
    from .hf_config import DRTConfig


class CopyHead(OwnInit):
    """Pointer over the tokens of the retrieved chunks (config copy_head; our extension, not in the
    paper). One head attends from a token's final state to the slots of the chunks its retrieval
    row selected, with the same fusion weights as GCA (softmax-one per chunk, times w). Its query
    reads the token's final state and the token's own embedding; the key of slot s reads the chunk
    memory's K[s], K[s-1] and the embedding of the token in slot s-1. So the head can point at "the
    slot after the one holding my token" (an induction head, linear in the embeddings, which unlike
    the contextual states are nearly orthogonal between tokens) as well as at a matching slot. A
    gate g mixes it into the LM:

        p(y) = (1 - g P) softmax(logits)(y) + g * sum of the pointer's weights on slots holding y

    with P the pointer's total weight (< 1: the softmax-one null slots and unused rows give their
    share back to the LM, so p sums to 1 and a chunk with nothing retrieved gets the plain LM).
    The copied token gets the answer gradient directly (pointer-generator networks, See et al.,
    2017), which copying through GCA -> MLP -> residual did not get at our scale
    (docs/history/2026-11-29-to-12-01-model-rounds.md).

    Options: copy_bigram adds the token before the query's (query) and the token two slots back
    (key), so a repeated digit no longer confuses it, and lets the gate read the pointer-weighted
    embedding of what it would copy (an answer's end); copy_global replaces the per-chunk softmaxes
    by one softmax-one over all k * N slots with log w as each chunk's prior, so a sharp match in a
    chunk of small fusion weight can still take the whole pointer.

    copy_match = n > 0 adds what the learned matches only approximate: the exact length L <= n of
    the common suffix of the text ending at the query (its own token first) and the text ending
    just before the slot (within the slot's chunk, or its span with copy_span; pad ids never match),
    as a learned score bias per length, and, for the gate, the longest L among the retrieved slots
    (a learned gate bias per length). Once the first digits of a passkey are written, the slot that
    continues them is the only one with a long match, however many chunks share the fusion weight.

    copy_recall = J > 0 lets the pointer look a value up by its key: for each slot, the longest
    n-gram (<= RECALL_CAP tokens) ending o + 1 slots before it (o < J) that also occurs in the
    query's recent text (the chunk before the query's and its own chunk up to the query: the
    question, then the answer so far), with a learned bias per (o, length); the gate reads the
    largest such bias among the readable slots. "the magic number for amber falcon is 52..." then
    gets the bias of a 5-gram of the question two slots before "5", where a distractor needle
    of another key gets that of a 3-gram. copy_recall_age = A > 0 adds a bias per (o, length, age)
    with the age of the n-gram's latest occurrence on the query side in log2 buckets (0, 1-2,
    3-6, ..., the last open): in a 2-hop answer "v1; v2", v2's slot recalls the v1 just written
    and v1's slot the v0 of the question, longer ago; lengths alone tie the two.

    copy_qk_cap = c > 0 soft-caps the learned query-key scores at +-c (c * tanh(s / c)) before the
    exact-feature biases are added. Trained, those scores spread over tens and saturate the softmax,
    so the right slot got no gradient and the recall biases could never outgrow them (RESULTS.md
    §5).

    copy_span = E > 0 extends each retrieved chunk, for the pointer only, by the first E slots of
    the chunk after it (always in the past: a selection serving chunk c reads chunks < c - 1), so
    a value written across a chunk boundary can be copied to its end; the slots' contexts (the
    previous tokens, the n-gram features) run on across the boundary. copy_lead = P > 0 does the
    same backwards: the last P slots of the chunk before each retrieved one come first, so the
    first slots of a retrieved chunk have the text that leads into them as context ("... the
    passkey is" | " 894772."), and a value that starts before the chunk can be copied whole."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, d = cfg.hidden_size, cfg.head_dim
        self.d = d
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.q = nn.Linear(D, d, bias=False)
        self.k = nn.Linear(D, d, bias=False)
        self.k_prev = nn.Linear(D, d, bias=False)
        self.tok_norm = RMSNorm(D, cfg.rms_eps)
        self.q_tok = nn.Linear(D, d, bias=False)
        self.k_tok = nn.Linear(D, d, bias=False)
        self.gate = nn.Linear(D, 1)
        self.bigram = cfg.copy_bigram
        self.global_softmax = cfg.copy_global
        if self.bigram:  # config copy_bigram: match (token before, token) against (slot s-2, slot s-1)
            self.q_tok2 = nn.Linear(D, d, bias=False)
            self.k_tok2 = nn.Linear(D, d, bias=False)
            self.gate_tok = nn.Linear(D, 1, bias=False)  # reads the token the pointer would copy
        self.qk_cap = cfg.copy_qk_cap
        self.match = cfg.copy_match
        if self.match:  # config copy_match: biases per exact suffix-match length (0..n), zero at init
            self.match_bias = nn.Parameter(torch.zeros(self.match + 1))
            self.match_gate = nn.Parameter(torch.zeros(self.match + 1))
        self.recall = cfg.copy_recall
        if self.recall:  # config copy_recall: biases per (offset, recalled n-gram length), zero at init
            self.recall_bias = nn.Parameter(torch.zeros(self.recall, RECALL_CAP + 1))
            self.recall_gate = nn.Parameter(torch.zeros(1))
        self.ages = cfg.copy_recall_age
        if self.ages:  # config copy_recall_age: and per (offset, length, age bucket), zero at init
            self.recall_age_bias = nn.Parameter(torch.zeros(self.recall, RECALL_CAP + 1, self.ages))
        self.pad_id, self.N = cfg.pad_token_id, cfg.chunk_size - 1
        self.span, self.lead = cfg.copy_span, cfg.copy_lead  # slots read after / before each chunk

    def reset_parameters(self) -> None:
        """The exact-feature biases and gates start at zero: the options change nothing until trained."""
        for p in (getattr(self, n, None) for n in ("match_bias", "match_gate", "recall_bias", "recall_gate",
                                                   "recall_age_bias")):
            if p is not None:
                nn.init.zeros_(p)

    def point(self, embed: nn.Embedding, h: torch.Tensor, emb: torch.Tensor, slot_ids: torch.Tensor,
              slot_k: torch.Tensor, w: torch.Tensor, ctx: torch.Tensor):
        """The head on what its caller gathered, every feature derived here from token ids: the one
        path of the batch forward and the engine. h, emb [Z, S, D] as in forward, the S positions
        of one query chunk each; slot_ids [Z, k, R] and slot_k [Z, k, R, D] the token ids and
        memory keys of the slots read (copy_slots); w [Z, k] fusion weights; ctx [Z, 2N] the token
        ids of the chunk before each query chunk and of the query chunk itself (pads before the
        stream, and after the last token written), whence the query side: the real token before
        each position (copy_bigram), the n real tokens ending at each (copy_match), the recent
        text the recall reads (copy_recall). Returns forward's (gate logits [Z, S], pointer weights
        [Z, S, k, R])."""
        pad, N = self.pad_id, self.N
        prev_emb = embed(slot_predecessors(slot_ids, pad))
        bigram = match = recall = None
        if self.bigram:  # the landmark's: its chunk's last token
            bigram = (embed(ctx[:, N - 1:]), embed(slot_predecessors(slot_ids, pad, 2)), embed(slot_ids))
        if self.match:  # newest first; the landmark row holds pads
            at = N + torch.arange(N, device=ctx.device)[:, None] - torch.arange(self.match, device=ctx.device)
            history = F.pad(ctx[:, at], (0, 0, 0, 1), value=pad)
            match = suffix_match(history, slot_contexts(slot_ids, pad, self.match), pad)
        if self.recall:
            recall = recall_lengths(slot_ids, ctx, recall_limits(N, slot_ids.device), pad, ages=self.ages)
        return self(h, emb, slot_k, prev_emb, w, bigram, match, recall)

    def forward(self, h: torch.Tensor, emb: torch.Tensor, mem_k: torch.Tensor, prev_emb: torch.Tensor,
                w: torch.Tensor, bigram: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                match: torch.Tensor | None = None, recall: torch.Tensor | None = None):
        """h [Z, M, D] final states (before the final norm) and emb [Z, M, D] the embeddings of the
        tokens at those positions; mem_k [Z, k, N, D] the memory keys of the slots the pointer reads
        (per selected chunk its N slots, after copy_lead of the chunk before and before copy_span
        of the chunk after) and prev_emb
        [Z, k, N, D] the embeddings of the token before each slot (pad before slot 0); w [Z, k]
        fusion weights. With copy_bigram, `bigram` = (the embeddings of the real token before each
        position [Z, M, D], of the token two slots before each slot [Z, k, N, D], of each slot's own
        token [Z, k, N, D]). With copy_match, `match` [Z, M, k, N] the suffix-match lengths
        (suffix_match); with copy_recall, `recall` [Z, M, k, N] the recalled n-gram lengths ending
        at each slot (recall_lengths; with copy_recall_age, its codes length + (cap + 1) * age). Returns
        gate logits [Z, M] and pointer weights [Z, M, k, N] (float32)."""
        hn = self.norm(h)
        q = self.q(hn) + self.q_tok(self.tok_norm(emb))
        prev = F.pad(mem_k, (0, 0, 1, 0))[..., :-1, :]  # slot s-1's memory key (zero for slot 0)
        keys = self.k(mem_k) + self.k_prev(prev) + self.k_tok(self.tok_norm(prev_emb))
        if self.bigram:
            q_prev_emb, prev2_emb, slot_emb = bigram
            q = q + self.q_tok2(self.tok_norm(q_prev_emb))
            keys = keys + self.k_tok2(self.tok_norm(prev2_emb))
        s = torch.einsum("zmd,zjnd->zmjn", q.float(), keys.float()) / math.sqrt(self.d)
        if self.qk_cap:  # config copy_qk_cap: bounded, so the exact features below can outweigh them
            s = self.qk_cap * torch.tanh(s / self.qk_cap)
        if self.match:
            match = match.long()
            s = s + MATCH_SCALE * self.match_bias.float()[match]
        if self.recall:  # slot s reads the n-gram ending at slot s - 1 - o, for o < J
            J, N = self.recall, recall.shape[-1]
            padded = F.pad(recall.long(), (J, 0))
            table = self.recall_bias.float()
            if self.ages:  # one table over codes length + (cap + 1) * age
                table = (table[:, None, :] + self.recall_age_bias.float().transpose(1, 2)).flatten(1)
            rb = sum(table[o][padded[..., J - 1 - o: J - 1 - o + N]] for o in range(J))
            s = s + MATCH_SCALE * rb
        if self.global_softmax:  # one softmax-one over every slot, each chunk's log weight as a prior
            wf = w.float()[:, None, :, None]
            s = (s + torch.log(wf.clamp_min(1e-30))).masked_fill(wf <= 0, float("-inf"))
            p = _softmax_one(s.flatten(-2)).view_as(s)
        else:  # softmax-one per chunk, times the chunk's fusion weight (as GCA)
            p = _softmax_one(s) * w.float()[:, None, :, None]
        gate = self.gate(hn).squeeze(-1).float()
        if self.bigram:  # the gate also sees the (pointer-weighted) token it would copy
            what = torch.einsum("zmjn,zjnd->zmd", p, self.tok_norm(slot_emb).float())
            gate = gate + self.gate_tok(what.to(hn.dtype)).squeeze(-1).float()
        if self.match:  # the gate sees the longest match among the slots the pointer can read
            longest = (match * (w > 0)[:, None, :, None]).flatten(-2).amax(-1)
            gate = gate + MATCH_SCALE * self.match_gate.float()[longest]
        if self.recall:  # the gate sees the strongest recall among the slots the pointer can read
            strongest = rb.masked_fill((w <= 0)[:, None, :, None], float("-inf")).flatten(-2).amax(-1)
            gate = gate + MATCH_SCALE * self.recall_gate.float() * strongest.clamp_min(0)
        return gate, p


def copy_slots(head: CopyHead, sel: torch.Tensor, n_chunks: int, ids_of, keys_of,
               own_keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The slots the pointer reads of each selected chunk, the one gather of the batch forward and
    the engine: sel [..., k] chunk numbers (a pick of weight 0 may name any stored chunk);
    ids_of(j) -> [..., N] token ids and keys_of(j) -> [..., N, D] memory keys of the chunks j (an
    index tensor shaped as sel, 0 <= j < n_chunks) read from the caller's storage; own_keys: the
    selected chunks' keys where the caller has them (the engine: those GCA gathered). Returns the
    token ids [..., k, R] and memory keys [..., k, R, D] of the slots (R = copy_lead + N +
    copy_span): the last copy_lead slots of the chunk before each selected one, its N slots, the
    first copy_span slots of the chunk after; pad ids and zero keys where that chunk is not there."""
    N, E, P, pad = head.N, head.span, head.lead, head.pad_id
    slot_ids = ids_of(sel)
    slot_k = keys_of(sel) if own_keys is None else own_keys
    if E:
        ids, keys = _neighbour(sel + 1, n_chunks, ids_of, keys_of, pad)
        slot_ids, slot_k = torch.cat([slot_ids, ids[..., :E]], dim=-1), torch.cat([slot_k, keys[..., :E, :]], dim=-2)
    if P:
        ids, keys = _neighbour(sel - 1, n_chunks, ids_of, keys_of, pad)
        slot_ids = torch.cat([ids[..., N - P:], slot_ids], dim=-1)
        slot_k = torch.cat([keys[..., N - P:, :], slot_k], dim=-2)
    return slot_ids, slot_k


def _neighbour(j: torch.Tensor, n_chunks: int, ids_of, keys_of, pad: int):
    """ids_of(j), keys_of(j), with pads and zero keys where chunk j is not stored (j < 0 or >= n_chunks)."""
    ok = (j >= 0) & (j < n_chunks)
    j = j.clamp(0, max(n_chunks - 1, 0))
    keys = keys_of(j)
    return ids_of(j).masked_fill(~ok[..., None], pad), keys.masked_fill(~ok.to(keys.device)[..., None, None], 0)


def batch_copy(head: CopyHead, embed: nn.Embedding, x: torch.Tensor, emb: torch.Tensor, aug: torch.Tensor,
               flat_k: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, L: int):
    """The batch forward's copy head: over the selections idx / w [B, C, k'] (copy_selection) of a
    whole sequence, x and emb [B, C*S, D] (final states, token embeddings), aug [B, C*S] (the
    augmented ids), flat_k [B, C, N, D] (memory keys); the slots gathered from these tensors by
    copy_slots and the head run by CopyHead.point. Returns, in the real-token layout, (gate [B, L],
    p [B, L, k*R], toks [B, L, k*R]); chunk 0 reads nothing (p = 0)."""
    N, D = head.N, x.shape[-1]
    S = N + 1
    B, C, k = idx.shape
    R = head.lead + N + head.span  # slots the pointer reads per retrieved chunk
    gate = torch.zeros(B, C, S, device=x.device)
    p = torch.zeros(B, C, S, k * R, device=x.device)
    toks = torch.zeros(B, C, S, k * R, dtype=torch.long, device=x.device)
    if C > 1:
        Z = B * (C - 1)  # rows 0..C-2 serve chunks 1..C-1
        bi = torch.arange(B, device=x.device).view(B, 1, 1)
        ids = aug.view(B, C, S)[:, :, :N]
        slot_ids, slot_k = copy_slots(head, idx[:, :-1], C, lambda j: ids[bi, j], lambda j: flat_k[bi, j])
        slot_ids = slot_ids.reshape(Z, k, R)
        ctx = torch.cat([ids[:, :-1], ids[:, 1:]], dim=-1).reshape(Z, 2 * N)  # chunk c's: chunks c - 1 and c
        g_, p_ = head.point(embed, x.view(B, C, S, D)[:, 1:].reshape(Z, S, D),
                            emb.view(B, C, S, D)[:, 1:].reshape(Z, S, D), slot_ids,
                            slot_k.reshape(Z, k, R, D), w[:, :-1].reshape(Z, k), ctx)
        gate = torch.cat([gate[:, :1], g_.view(B, C - 1, S)], dim=1)
        p = torch.cat([p[:, :1], p_.reshape(B, C - 1, S, k * R)], dim=1)
        toks = torch.cat([toks[:, :1], slot_ids.reshape(B, C - 1, 1, k * R).expand(B, C - 1, S, k * R)], dim=1)

    def real(t):
        return t[:, :, :N].reshape(B, C * N, *t.shape[3:])[:, :L]

    return real(gate), real(p), real(toks)


MATCH_SCALE = 10.0  # copy_match biases are stored / 10: Adam then moves them at the pace of the scores


def suffix_match(q_ctx: torch.Tensor, k_ctx: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Exact suffix-match lengths for the copy head (config copy_match).

    q_ctx [Z, M, n]: the tokens ending at each query position, newest first (its own token at 0);
    k_ctx [Z, k, N, n]: the tokens before each slot, newest first (slot s-1's token at 0).
    Returns L [Z, M, k, N] uint8: the largest l <= n with q_ctx[..., :l] == k_ctx[..., :l], a pad
    id matching nothing."""
    Z, M, n = q_ctx.shape
    L = torch.zeros(Z, M, *k_ctx.shape[1:3], dtype=torch.uint8, device=q_ctx.device)
    alive = None
    for i in range(n):
        q = q_ctx[:, :, i][:, :, None, None]
        eq = (q == k_ctx[:, None, :, :, i]) & (q != pad_id)
        alive = eq if alive is None else alive & eq
        if not alive.any():
            break
        L += alive
    return L


RECALL_CAP = 6  # copy_recall: recalled n-grams are counted up to this length


def recall_lengths(slot_toks: torch.Tensor, ctx: torch.Tensor, upto: torch.Tensor, pad_id: int,
                   cap: int = RECALL_CAP, ages: int = 0) -> torch.Tensor:
    """For the copy head's copy_recall: slot_toks [Z, k, N] the retrieved chunks' tokens; ctx [Z, X]
    the query side's text (the chunk before and the query's own chunk); upto [M] the last index of
    ctx each query position may read (-1: none). Returns R [Z, M, k, N] uint8: the length (<= cap)
    of the longest n-gram ending at slot a that occurs in ctx[:upto[m] + 1] (pad ids match nothing).
    Exact and causal: the match ending at ctx index x reads ctx[<= x] only.

    With ages = A > 0 (copy_recall_age), R + (cap + 1) * b instead: b the age upto[m] - x of the
    latest such occurrence (ending at x) in log2 buckets, min(A - 1, floor(log2(age + 1))); b = 0
    where nothing matches."""
    eq = (slot_toks[..., :, None] == ctx[:, None, None, :]) & (slot_toks != pad_id)[..., None]  # [Z, k, N, X]
    run = eq
    total = eq.to(torch.uint8)
    for _ in range(cap - 1):  # a run of t + 1 ends at (a, x) if one of t ends at (a - 1, x - 1)
        run = eq & F.pad(run, (1, 0, 1, 0))[..., :-1, :-1]
        if not run.any():
            break
        total += run
    best = torch.cummax(total, dim=-1).values  # the longest among ctx[: x + 1]
    gather = (upto + 1).clamp_min(0)
    out = F.pad(best, (1, 0))[..., gather]  # [Z, k, N, M]; index 0: nothing readable (upto = -1)
    if ages:  # the latest x holding the running longest: where total reaches it, carried forward
        X = ctx.shape[-1]
        at = torch.arange(X, dtype=torch.int32, device=ctx.device).expand_as(total)
        last = torch.cummax(torch.where((total == best) & (total > 0), at, -1), dim=-1).values
        age = (upto.to(torch.int32)[None, None, None, :] - F.pad(last, (1, 0))[..., gather]).clamp_min(0)
        b = torch.floor(torch.log2(age.float() + 1)).clamp_max(ages - 1).to(torch.uint8)
        out = out + (cap + 1) * (b * (out > 0))
    return out.permute(0, 3, 1, 2).contiguous()


def recall_limits(N: int, device=None) -> torch.Tensor:
    """recall_lengths' `upto` for the S = N + 1 positions of a chunk whose query side is (the chunk
    before, its own chunk), 2N tokens: slot j reads up to index N + j; the landmark reads nothing."""
    return torch.cat([torch.arange(N, 2 * N), torch.tensor([-1])]).to(device)


def slot_contexts(toks: torch.Tensor, pad_id: int, n: int) -> torch.Tensor:
    """toks [..., N] a chunk's token ids -> [..., N, n]: the n tokens before each slot, newest
    first, pad before the chunk's start (the keys' side of suffix_match)."""
    return torch.stack([slot_predecessors(toks, pad_id, i + 1) for i in range(n)], dim=-1)


def _softmax_one(s: torch.Tensor) -> torch.Tensor:
    """exp(s) / (1 + sum exp(s)) over the last dim, stable; rows of -inf give 0."""
    top = s.amax(-1, keepdim=True).clamp_min(0)
    e = torch.exp(s - top)
    return e / (e.sum(-1, keepdim=True) + torch.exp(-top))


def slot_predecessors(toks: torch.Tensor, pad_id: int, n: int = 1) -> torch.Tensor:
    """toks [..., N] a chunk's token ids -> the id n slots before each slot (pad before slot 0)."""
    return F.pad(toks, (n, 0), value=pad_id)[..., :-n]


def mix_copy(logits: torch.Tensor, gate: torch.Tensor, p: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
    """log p(y) of the LM/pointer mixture (CopyHead): logits [..., V]; gate [...]; p [..., R] the
    pointer's weights on R slots; toks [..., R] their token ids (broadcastable to p).
    Returns log-probabilities [..., V] float32 (valid logits: softmax gives back p)."""
    V = logits.shape[-1]
    copy = torch.zeros(*p.shape[:-1], V, device=p.device, dtype=torch.float32)
    copy = copy.scatter_add(-1, toks.expand(p.shape).long(), p.float())
    g = torch.sigmoid(gate.float()).unsqueeze(-1)
    keep = (1 - g * p.float().sum(-1, keepdim=True)).clamp_min(1e-30)
    return torch.logaddexp(torch.log(keep) + torch.log_softmax(logits.float(), -1),
                           torch.log(g * copy + 1e-30))


def copy_selection(sels: list[tuple[torch.Tensor, torch.Tensor]], mode: str = "last"):
    """The chunks the copy head reads, from each group's (idx [..., k], w [..., k]): the last
    group's (config copy_groups "last"), or with "all" every group's side by side ([..., G*k]),
    each group's fusion weights divided by G, so the pointer's total weight stays <= 1 and a chunk
    two groups select weighs the mean of their weights (copy_global: exactly, as one read)."""
    if mode == "last" or len(sels) == 1:
        return sels[-1]
    G = len(sels)
    return torch.cat([i for i, _ in sels], dim=-1), torch.cat([w for _, w in sels], dim=-1) / G
