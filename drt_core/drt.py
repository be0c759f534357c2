"""The Differentiable Retrieval Transformer (DRT), the paper's model, top to bottom.

Hu et al., "Efficient Length-Generalizable Attention via Causal Retrieval for Long-Context Language
Modeling", ICML 2025 (arXiv 2410.01651); docs/spec.md §1-§3 is the precise reading.

Layout of a DRT forward pass (B batch, L real tokens, C chunks, S = chunk_size = 64, T = C*S):
    ids [B, L] --pad to C*63, insert a landmark after every 63 tokens--> [B, T]
    lower layers: sliding-window causal self-attention with ALiBi over augmented positions
    chunk encoder: per chunk, bidirectional attention with RoPE over the S slots
        landmark key  l_c = E[:, c, S-1]                  [B, C, D]
        chunk memory  K = E W_K, V = E W_V (real slots)    [B, C, S-1, D], shared by all upper layers
    for each group g: retrieval with q_c = RMSNorm_g(h[:, c, S-1]) against l_e, e < c,
        top-k (+Gumbel noise in training), fusion weights = softmax of clean scores over the selected;
        row c serves chunk c+1; then the group's upper layers:
            a = x + SelfAttn(norm1(x));   y = a + MLP(norm2(a + GCA(a)))   (GCA bypasses the residual)
    final norm, tied LM head; logits returned for real tokens only [B, L, V].

softmax_one: the reference code zeroes the landmark slot of K/V, which is exactly softmax-off-by-one
over the 63 real keys (spec §3.3). We keep only the real keys and pass softmax_one to the operator,
which is the same function without storing the zero slot; softmax_one=False gives vanilla softmax.

In this file, in reading order: GCA and the upper block, with `read_chunks`, the one reading of
already-gathered chunks that the batch forward and the engine share; retrieval (scores, top-k,
fusion weights); `DRT`, the model's layers and its forward, the list above, each stage a method the
engine calls too (drt_core/stream.py). `DRT` is a mixin: `DRTForCausalLM` (drt_core/modeling.py) is
it on transformers' PreTrainedModel (the fixed contract), `DRTRuntime` (drt_core/runtime.py) on
torch's nn.Module alone, what the engine serves a checkpoint with, without importing transformers.
Our extensions hook in where they act, each the one implementation in its own module: the key
and query encoders (encoders.py), the lexical term of the scores (lexical.py), the copy head
(copy_head.py), the stream preamble (stream_preamble).

Elsewhere: the blocks and self-attention (layers.py, attention.py); the methods every model class
has, the layout (landmark insertion) and the loss (base.py); the baselines, which `DRTForCausalLM(config)`
builds for their config.arch (baselines.py, landmark.py); the fixed retriever (RPT-style), this DRT
choosing its chunks by a frozen MiniLM's cosines (`FixedRetrieverForCausalLM`, fixed_retriever.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels.gca import gca

from .attention import NEG_INF, KVWindow, SelfAttention
from .base import augment, frozen, unaugment
from .copy_head import CopyHead, batch_copy, copy_selection, mix_copy
from .encoders import ChunkEncoder, key_contexts, key_encoder, query_encoder, query_projections
from .layers import MLP, Block, RMSNorm
from .lexical import LexicalScorer

if TYPE_CHECKING:
    from .hf_config import DRTConfig

__all__ = ["NEG_INF", "DRT", "fusion_weights", "read_chunks", "retrieval_scores", "select_topk"]


# ----------------------------------------------------------------------------------------------
# GCA: the upper layers' reading of the retrieved chunks


class GCA(nn.Module):
    """Grouped Cross Attention of one upper layer: per-layer Q/O projections and pre-norm; the
    retrieved chunks, their memory and weights come from the group (shared by its layers)."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D = cfg.hidden_size
        self.H, self.d = cfg.num_heads, D // cfg.num_heads
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.q = nn.Linear(D, D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.softmax_one = cfg.softmax_one
        self.backend = cfg.gca_backend

    def forward(self, x: torch.Tensor, mem_k: torch.Tensor, mem_v: torch.Tensor, w: torch.Tensor):
        """x: [Z, M, D] query rows (one query chunk, or its first M rows while decoding);
        mem_k, mem_v: [Z, H, K, N, d] gathered memory; w: [Z, K]. Returns [Z, M, D]."""
        Z, M, D = x.shape
        q = self.q(self.norm(x)).view(Z, M, self.H, self.d).transpose(1, 2)  # [Z, H, M, d]
        o = gca(q, mem_k.to(q.dtype), mem_v.to(q.dtype), w.to(q.dtype), softmax_one=self.softmax_one,
                backend=self.backend)
        return self.o(o.transpose(1, 2).reshape(Z, M, D))


class UpperBlock(nn.Module):
    """a = x + SelfAttn(norm1(x));  y = a + MLP(norm2(a + GCA(a)))  -- GCA is not on the residual."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.attn = SelfAttention(cfg, window=cfg.window)
        self.gca = GCA(cfg)
        self.norm2 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, gca_fn, pos0: int = 0, cache: KVWindow | None = None):
        """gca_fn(a) -> GCA contribution for every position of a (zeros where nothing is served)."""
        a = x + self.attn(self.norm1(x), pos0, cache)
        return a + self.mlp(self.norm2(a + gca_fn(self.gca, a)))


def heads_first(kv: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Gathered memory [Z, k, N, D] (k chunks of N slots per row) -> GCA's layout [Z, H, k, N, d]."""
    Z, k, N, D = kv.shape
    return kv.view(Z, k, N, num_heads, D // num_heads).permute(0, 3, 1, 2, 4)


def read_chunks(gca_mod: GCA, a: torch.Tensor, gk: torch.Tensor, gv: torch.Tensor, w: torch.Tensor,
                off: int = 0) -> torch.Tensor:
    """GCA over already-gathered chunks, the one reading of the batch forward and the engine: a
    [Bv, T, D] a run of positions that starts `off` slots into its first chunk and touches n_seg
    chunks; segment s of row b reads gk, gv [Bv * n_seg, H, k, N, d] (heads_first) row b * n_seg
    + s with fusion weights w [Bv * n_seg, k]. Returns [Bv, T, D]."""
    Bv, T, D = a.shape
    rows = w.shape[0]
    n_seg = rows // Bv
    w = w.to(a.dtype)
    if n_seg == 1:
        return gca_mod(a, gk, gv, w)
    S = gk.shape[3] + 1
    if off or T != n_seg * S:  # a run that starts or ends inside a chunk: its segments padded to S slots
        a = F.pad(a, (0, 0, off, n_seg * S - off - T))
    return gca_mod(a.reshape(rows, S, D), gk, gv, w).reshape(Bv, n_seg * S, D)[:, off: off + T]


def no_gca(gca_mod: GCA, a: torch.Tensor) -> torch.Tensor:
    """What positions that read no chunk get from GCA: nothing."""
    return torch.zeros_like(a)


# ----------------------------------------------------------------------------------------------
# retrieval


def retrieval_scores(query: torch.Tensor, keys: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor):
    """Scores [..., Cq, Ck] = <q, l> / sqrt(D), -inf unless key chunk < query chunk (strictly).

    query [B, Cq, D] landmark states (normed), keys [B, Ck, D]; q_chunk [Cq], k_chunk [Ck] global ids."""
    D = query.shape[-1]
    s = torch.einsum("bcd,bed->bce", query.float(), keys.float()) / math.sqrt(D)
    causal = k_chunk[None, :] < q_chunk[:, None]
    return s.masked_fill(~causal, NEG_INF)


def select_topk(scores: torch.Tensor, k: int, gumbel: bool, generator: torch.Generator | None = None):
    """Top-k chunks per row and their fusion weights.

    Selection uses scores + Gumbel(0,1) noise when `gumbel` (training); the weights are always the
    softmax of the CLEAN scores over the selected (spec §2). Rows with fewer than k eligible chunks
    fill the rest with index 0 and weight 0; a row with none gets all-zero weights (no NaN).
    Returns idx [..., k] (long), w [..., k] (float32, differentiable through scores)."""
    k = min(k, scores.shape[-1])
    sel = scores
    if gumbel:
        u = torch.rand(scores.shape, device=scores.device, generator=generator).clamp_(1e-20, 1.0)
        sel = scores - torch.log(-torch.log(u))
    idx = sel.detach().topk(k, dim=-1).indices
    w, valid = fusion_weights(scores, idx)
    return idx.masked_fill(~valid, 0), w


def fusion_weights(scores: torch.Tensor, idx: torch.Tensor, keep: torch.Tensor | None = None):
    """Softmax of the clean scores over the selected chunks idx [..., k]; slots that are not
    eligible (score -inf) or not kept get weight 0. Returns (w, valid)."""
    picked = scores.gather(-1, idx)
    valid = torch.isfinite(picked) if keep is None else torch.isfinite(picked) & keep
    return torch.softmax(picked.masked_fill(~valid, -1e30), dim=-1) * valid, valid


# ----------------------------------------------------------------------------------------------
# the model


class DRT:
    """The DRT's layers and forward, a mixin of the model classes (see the module's docstring):
    `model(input_ids, labels=None)`: ids WITHOUT landmarks, any length; logits [B, L, V] for the
    real tokens; loss = mean next-token cross-entropy over real tokens (labels as input_ids, -100
    ignored)."""

    gumbel = True  # training selects with Gumbel noise on the scores (spec §2)

    def build(self, config: DRTConfig) -> None:
        """Make the layers of `config` (the model classes' __init__ calls this)."""
        cfg, D = config, config.hidden_size
        self.embed = nn.Embedding(cfg.vocab_size, D)
        self.lower = nn.ModuleList([Block(cfg, window=cfg.window) for _ in range(cfg.lower_layers)])
        self.encoder = ChunkEncoder(cfg)
        self.lmk_norms = nn.ModuleList([RMSNorm(D, cfg.rms_eps) for _ in cfg.upper_groups])
        self.query_enc = query_encoder(cfg)  # our extensions (None when off): drt_core/encoders.py
        self.key_enc = key_encoder(cfg)
        self.query_projs = query_projections(cfg)
        self.groups = nn.ModuleList([nn.ModuleList([UpperBlock(cfg) for _ in range(n)]) for n in cfg.upper_groups])
        self.copy_head = CopyHead(cfg) if cfg.copy_head else None  # drt_core/copy_head.py
        self.lexical = LexicalScorer(cfg) if cfg.lexical else None  # drt_core/lexical.py
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.lm_head = nn.Linear(D, cfg.vocab_size, bias=False)


    # -- forward ------------------------------------------------------------------------------------

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,  # accepted for HF compatibility; ids are unpadded
        output_retrieval: bool = False,
        chunk_embeddings: torch.Tensor | None = None,
        steer=None,
        **kwargs,
    ):
        """Logits [B, L, V] of the real tokens (log-probabilities of the LM/pointer mixture with the
        copy head), the LM loss with `labels`, and with output_retrieval each group's selection.
        chunk_embeddings: the fixed_retriever's chunk embeddings when the caller has them.

        steer: what training adds (drt_core.train.objective.Steering: forced chunks, the retrieval
        loss, the scorer-only step), called with each group's scores and selection; its retrieval
        loss comes back as the output's retrieval_loss. None when serving."""
        cfg, (B, L) = self.config, input_ids.shape
        S, D = cfg.chunk_size, cfg.hidden_size
        aug, C = augment(input_ids, cfg)
        x, emb, pre = self.lower_states(aug)  # emb: the copy head's queries; pre: the preamble's states
        keys, mem_k, mem_v, own = self.encode_chunks(x.view(B, C, S, D), self.preamble_tail(pre))
        retrieval, sels = [], []
        gates = self.word_gates(x.view(B, C, S, D)[:, :, : S - 1])  # config lexical_gates: once, for every group
        for g, group in enumerate(self.groups):
            scores = self.group_scores(g, x.view(B, C, S, D)[:, :, S - 1], own, keys, aug, input_ids, chunk_embeddings,
                                       gates=gates)
            idx, w = select_topk(scores, cfg.chunk_topk, gumbel=self.training and self.gumbel)
            if steer is not None:  # training: forced chunks, the retrieval loss (drt_core.train.objective)
                idx, w = steer(g, scores, idx, w)
            retrieval.append({"idx": idx, "weights": w.detach(), "scores": scores.detach()})
            sels.append((idx, w))
            with frozen(steer):
                x, pre = self.run_group(group, x, pre, self.batch_gca(idx, w, mem_k, mem_v))
        with frozen(steer):
            logits = self.lm_head(self.norm(unaugment(x, L, S)))
            if self.copy_head is not None:  # log-probabilities of the LM/pointer mixture (copy_head.py)
                idx, w = copy_selection(sels, cfg.copy_groups)
                logits = mix_copy(logits, *batch_copy(self.copy_head, self.embed, x, emb, aug, mem_k, idx, w, L))
        return self.output(logits, labels, steer, retrieval if output_retrieval else None)

    # -- the stages of the forward, shared with the engine (drt_core/stream.py) ----------------------

    def lower_states(self, aug: torch.Tensor, start: bool = True):
        """Augmented ids [B, T] -> (lower-layer states [B, T, D], token embeddings [B, T, D], the
        stream preamble's lower-layer states [B, P, D] or None): what the batch forward,
        model.landmarks and the scorer loss run before the chunk encoder. `start`: the ids begin a
        stream, so the stream preamble (config stream_preamble) comes before them."""
        emb = self.embed(aug)
        P = self.config.preamble_len if start else 0
        x = self._with_preamble(emb) if P else emb
        for layer in self.lower:
            x = layer(x)
        return (x[:, P:], emb, x[:, :P]) if P else (x, emb, None)

    def encode_chunks(self, h: torch.Tensor, first: torch.Tensor | None = None):
        """h [B, C, S, D] (or [C, S, D]: one run): lower-layer states of runs of C consecutive
        complete chunks; first [B, m, D]: with config key_context = m, the last m real slots of
        the chunk before each run (the stream's carry; zeros if None: the stream's first chunk).
        Returns their landmark keys [..., C, D] (the chunk encoder's, or with config key_encoder
        its own encoder's, which also reads each chunk's predecessor: key_context_of), memory K
        and V [..., C, S-1, D], and what their landmarks' queries read of them ([..., C, D] or
        None, own_chunk_features). The one place the batch forward, model.landmarks, scorer_loss
        and the streaming engine encode chunks."""
        lead, (C, S, D) = h.shape[:-3], h.shape[-3:]
        h4 = h.reshape(-1, C, S, D)
        flat = h4.reshape(-1, S, D)
        keys, mem_k, mem_v = self.encoder(flat)
        if self.key_enc is not None:
            keys = self.key_enc(flat, self.key_context_of(h4, first))[0]
        own = self.own_chunk_features(flat)
        return tuple(None if t is None else t.view(*lead, C, *t.shape[1:]) for t in (keys, mem_k, mem_v, own))

    def key_context_of(self, h: torch.Tensor, first: torch.Tensor | None = None) -> torch.Tensor | None:
        """h [B, C, S, D]: lower-layer states of B runs of C consecutive chunks. Returns what the
        key encoder reads of the chunk before each, [B*C, m, D] (encoders.key_contexts; config
        key_context = m), or None without the option. first [B, m, D]: the context of each run's
        first chunk (the stream's chunk before it); zeros if None."""
        m = self.config.key_context
        return key_contexts(h, m, first) if m else None

    def own_chunk_features(self, h: torch.Tensor) -> torch.Tensor | None:
        """What a landmark query reads of the chunk it closes (config query_encoder; None without
        it): the landmark state of a separate encoder over the chunk's lower-layer states h [N, S, D].
        Every token of a chunk precedes its landmark, so it keeps the query causal."""
        return None if self.query_enc is None else self.query_enc(h)[0]

    def landmark_query(self, g: int, h: torch.Tensor, own: torch.Tensor | None) -> torch.Tensor:
        """Group g's landmark queries: the group's input at the landmark slots h [..., D], normed
        (spec §1.3), plus, with config query_encoder, a learned projection of the
        features own [..., D] of the chunk the landmark closes (own_chunk_features). The projection
        starts at zero, so a model given the option scores as before until it is trained."""
        q = self.lmk_norms[g](h)
        if self.query_projs is not None:
            q = q + self.query_projs[g](own.to(q.dtype))
        return q

    def chunk_scores(self, g: int, q: torch.Tensor, keys: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor,
                     q_toks: torch.Tensor | None = None, k_toks: torch.Tensor | None = None,
                     stats=None, q_gates: torch.Tensor | None = None,
                     k_gates: torch.Tensor | None = None, gated: bool = True) -> torch.Tensor:
        """Group g's retrieval scores [B, Cq, Ck]: retrieval_scores(q, keys, ...) (-inf unless the key
        chunk precedes the query's), plus with config lexical the LexicalScorer term, which reads the
        chunks' tokens q_toks [B, Cq, N] and k_toks [B, Ck, N] (chunk_token_ids;
        stats: the engine's running counts, LexicalScorer.scores; q_gates, k_gates: with config
        lexical_gates, the chunks' word gates, `word_gates`; gated=False leaves that term out: a
        generation fork's selections, DocState.gated).
        The one scoring function of the batch forward, scorer_loss, the engine and the benches."""
        s = retrieval_scores(q, keys, q_chunk, k_chunk)
        if self.lexical is not None:
            s = s + self.lexical.scores(g, q_toks, k_toks, q_chunk, k_chunk, stats=stats, q_gates=q_gates,
                                        k_gates=k_gates, gated=gated)
        return s

    def word_gates(self, lower: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Config lexical_gates: the query-side and key-side word gates [..., C, N] of chunks whose
        real slots' lower-layer states are `lower` [..., C, N, D] (LexicalScorer.word_gates); (None,
        None) without the option."""
        if self.lexical is None or self.lexical.gates is None or lower is None:
            return None, None
        g = self.lexical.word_gates(lower)
        return g[..., 0], g[..., 1]

    def group_scores(self, g: int, h: torch.Tensor, own: torch.Tensor | None, keys: torch.Tensor, aug: torch.Tensor,
                     input_ids: torch.Tensor, chunk_embeddings: torch.Tensor | None = None,
                     gates: tuple | None = None) -> torch.Tensor:
        """The batch forward's scores [B, C, C] of group g, its input at the landmarks h [B, C, D]:
        chunk_scores of the landmark queries against the keys [B, C, D] (gates: with config
        lexical_gates, the chunks' query-side and key-side word gates, `word_gates`, one pair for
        every group)."""
        S, C = self.config.chunk_size, keys.shape[1]
        chunks, toks = torch.arange(C, device=h.device), aug.view(-1, C, S)[:, :, : S - 1]
        gq, gk = gates if gates is not None else (None, None)
        return self.chunk_scores(g, self.landmark_query(g, h, own), keys, chunks, chunks, toks, toks,
                                 q_gates=gq, k_gates=gk)

    def batch_gca(self, idx: torch.Tensor, w: torch.Tensor, mem_k: torch.Tensor, mem_v: torch.Tensor):
        """GCA of a whole sequence (UpperBlock's gca_fn) over the selections idx, w [B, C, k] and the
        memory mem_k, mem_v [B, C, N, D]: chunk c >= 1 reads row c-1's selection; chunk 0 gets 0."""
        B, C, k = idx.shape
        if C < 2:
            return no_gca
        S, H = self.config.chunk_size, self.config.num_heads
        rows = (idx[:, :-1] + torch.arange(B, device=idx.device).view(B, 1, 1) * C).reshape(-1, k)
        gk, gv = (heads_first(m.flatten(0, 1)[rows], H) for m in (mem_k, mem_v))
        gw = w[:, :-1].reshape(-1, k)

        def fn(gca_mod, a):  # a [B, C*S, D]
            return torch.cat([torch.zeros_like(a[:, :S]), read_chunks(gca_mod, a[:, S:], gk, gv, gw)], dim=1)

        return fn

    def run_group(self, group: nn.ModuleList, x: torch.Tensor, pre: torch.Tensor | None, gca_fn):
        """A retrieval group's upper layers over x [B, T, D], GCA through gca_fn; the stream
        preamble's states pre [B, P, D] (or None) attend and are attended to, and get no GCA.
        Returns (x, pre) after the group."""
        for layer in group:
            if pre is None:
                x = layer(x, gca_fn)
            else:
                P = pre.shape[1]
                y = layer(torch.cat([pre, x], dim=1), _after_preamble(gca_fn, P))
                pre, x = y[:, :P], y[:, P:]
        return x, pre

    # -- the stream preamble --------------------------------------------------------------------------

    def preamble_tail(self, pre: torch.Tensor | None) -> torch.Tensor | None:
        """The preamble's lower-layer states [B, P, D] -> what the key encoder reads as the chunk
        before the stream's first chunk (config key_context = m: the last m, zeros before them if
        P < m; encode_chunks' `first`). None without a preamble or without key context."""
        m = self.config.key_context
        if pre is None or not m or self.key_enc is None:
            return None
        tail = pre[:, -m:]
        return F.pad(tail, (0, 0, m - tail.shape[1], 0))

    @torch.no_grad()
    def preamble_caches(self, caches: list) -> torch.Tensor | None:
        """Run the stream preamble through every self-attention layer into `caches` (the engine's
        KVWindow of each layer, lower then upper, empty): what a new stream holds before its first
        token, exactly as the batch forward computes it (no GCA: the preamble belongs to no chunk).
        Returns the key encoder's context of the stream's first chunk ([m, D], preamble_tail) or None."""
        if not self.config.preamble_len:
            return None
        x = self._with_preamble(self.embed.weight[:0][None])  # [1, P, D]
        nl = len(self.lower)
        for layer, cache in zip(self.lower, caches[:nl]):
            x = layer(x, 0, cache)
        tail = self.preamble_tail(x)
        for layer, cache in zip([b for g in self.groups for b in g], caches[nl:]):
            x = layer(x, no_gca, 0, cache)
        return None if tail is None else tail[0]

    # -- layout and scoring helpers -------------------------------------------------------------------

    def augment(self, input_ids: torch.Tensor):
        """Pad [B, L] to C*63 and insert a landmark after every 63 tokens -> [B, C*64] and C
        (base.augment)."""
        return augment(input_ids, self.config)

    def unaugment(self, x: torch.Tensor, L: int) -> torch.Tensor:
        """augment's inverse on states: [B, C*64, D] -> the real tokens' [B, L, D]."""
        return unaugment(x, L, self.config.chunk_size)

    def chunk_token_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Real ids [B, L] (or [L]) -> each chunk's token ids [B, C, N] (pads after the last token)."""
        ids = input_ids.view(1, -1) if input_ids.dim() == 1 else input_ids
        aug, C = self.augment(ids)
        S = self.config.chunk_size
        return aug.view(ids.shape[0], C, S)[:, :, : S - 1]

    @torch.no_grad()
    def landmarks(self, input_ids: torch.Tensor, segment_chunks: int = 1024, lower: bool = False):
        """Landmark keys [C, D] and group-0 landmark queries [C, D] of one sequence of ids [L]:
        everything group 0's retrieval depends on (embeddings, lower layers, chunk encoder, query
        norm), without the upper layers. The lower layers run in segments of `segment_chunks`
        chunks, each with the chunks before it that their sliding windows reach as context, so
        the result equals the full forward's (and the engine's) at any length, in memory bounded
        by the segment. Scores as in retrieval_scores(queries, keys, ...). With `lower`, also the
        chunks' real slots' lower-layer states [C, N, D] (what config lexical_gates reads: word_gates)."""
        cfg = self.config
        aug, C = self.augment(input_ids.view(1, -1))
        S, D = cfg.chunk_size, cfg.hidden_size
        # position p of layer l sees p - window .. p of layer l - 1: lower_layers * window back in all,
        # from the segment's first slot, or (key_context = m) from the chunk before's last m slots
        reach = cfg.lower_layers * cfg.window + (cfg.key_context + 1 if cfg.key_context else 0)
        ctx = -(-reach // S)
        keys, queries, states = [], [], []
        for a in range(0, C, segment_chunks):
            b = min(C, a + segment_chunks)
            a0 = max(0, a - ctx)  # chunks a0 .. a - 1: context (the key encoder reads chunk a - 1)
            x, _, pre = self.lower_states(aug[:, a0 * S: b * S], start=a0 == 0)
            x = x.view(b - a0, S, D)
            tail = self.preamble_tail(pre)
            k, _, _, own = self.encode_chunks(x, None if tail is None else tail[0])
            # copies: a key is a view of its encoder's [chunks, S, D] states, and a held view keeps the
            # whole segment alive (16M tokens: ~17 GB of them by the end instead of two segments')
            keys.append(k[a - a0:].clone())
            queries.append(self.landmark_query(0, x[a - a0:, S - 1], own[a - a0:] if own is not None else None).clone())
            if lower:
                states.append(x[a - a0:, : S - 1].clone())
        if lower:
            return torch.cat(keys), torch.cat(queries), torch.cat(states)
        return torch.cat(keys), torch.cat(queries)


def _after_preamble(gca_fn, P: int):
    """gca_fn for a sequence that starts with the P preamble positions (which get no GCA)."""
    def fn(gca_mod, a):
        return torch.cat([torch.zeros_like(a[:, :P]), gca_fn(gca_mod, a[:, P:])], dim=1)

    return fn
