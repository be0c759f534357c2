"""The Differentiable Retrieval Transformer (DRT) and its baselines, top to bottom.

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

Baselines (config.arch): "sliding_window" and "full_attention" run on the raw token stream (no
landmarks); "landmark" is Landmark Attention (drt_core/landmark.py); "fixed_retriever" is this DRT
with the retrieval scores replaced by cosine similarities of a frozen MiniLM embedding of each
chunk's text (RPT-style).
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, PreTrainedModel
from transformers.utils import ModelOutput

from kernels.gca import gca

from .attention import NEG_INF, KVWindow, SelfAttention, alibi_slopes, apply_rope, rope_cos_sin
from .config import DRTConfig
from .copy_head import CopyHead, batch_copy, copy_selection, mix_copy
from .layers import MLP, RMSNorm, ZeroLinear
from .lexical import LexicalScorer



# ----------------------------------------------------------------------------------------------
# building blocks


class Block(nn.Module):
    """Pre-norm transformer block: x += Attn(norm(x)); x += MLP(norm(x))."""

    def __init__(self, cfg: DRTConfig, rope: bool = False, window: int | None = None, attn: nn.Module | None = None):
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.attn = attn if attn is not None else SelfAttention(cfg, rope=rope, window=window)
        self.norm2 = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x, pos0: int = 0, cache: KVWindow | None = None):
        x = x + self.attn(self.norm1(x), pos0, cache)
        return x + self.mlp(self.norm2(x))


class EncoderBlock(nn.Module):
    """Chunk encoder block: bidirectional attention within one chunk, RoPE over slots 0..S-1."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_heads
        self.H, self.d = H, D // H
        self.rope_theta = cfg.rope_theta
        self.norm1 = RMSNorm(D, 1e-6)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.norm2 = RMSNorm(D, 1e-6)
        self.mlp = MLP(D, cfg.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [N, S, D], N = number of chunks
        N, S, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(N, S, 3, self.H, self.d).permute(2, 0, 3, 1, 4)
        cos, sin = rope_cos_sin(S, self.d, self.rope_theta, x.device, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(o.transpose(1, 2).reshape(N, S, D))
        return x + self.mlp(self.norm2(x))


class ContextAttention(nn.Module):
    """The key encoder's view of what leads into a chunk (config key_context, our extension):
    every slot of the chunk attends to the last slots of the chunk before (its lower-layer states,
    complete before this chunk's landmark, so keys stay causal). The output projection starts at
    zero, so a model given the option keys its chunks as before until it is trained; a zero
    context (the first chunk) adds exactly nothing."""

    def __init__(self, cfg: DRTConfig):
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_heads
        self.H, self.d = H, D // H
        self.q = nn.Linear(D, D, bias=False)
        self.kv = nn.Linear(D, 2 * D, bias=False)
        self.o = ZeroLinear(D, D, bias=False)

    def forward(self, e: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:  # e [N, S, D], ctx [N, m, D]
        N, S, D = e.shape
        q = self.q(e).view(N, S, self.H, self.d).transpose(1, 2)
        k, v = self.kv(ctx).view(N, -1, 2, self.H, self.d).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return e + self.o(o.transpose(1, 2).reshape(N, S, D))


class ChunkEncoder(nn.Module):
    """Landmark keys and the K/V chunk memory shared by every upper layer (spec §1.3 step 3)."""

    def __init__(self, cfg: DRTConfig, layers: int | None = None, memory: bool = True, context: bool = False):
        super().__init__()
        D = cfg.hidden_size
        self.prenorm = RMSNorm(D, cfg.rms_eps)
        self.context = ContextAttention(cfg) if context else None  # config key_context
        self.layers = nn.ModuleList([EncoderBlock(cfg) for _ in range(cfg.encoder_layers if layers is None else layers)])
        self.norm = RMSNorm(D, 1e-6)
        self.memory = memory  # False: a query encoder (config query_encoder), landmark states only
        self.k_proj = nn.Linear(D, D, bias=False) if memory else None
        self.v_proj = nn.Linear(D, D, bias=False) if memory else None

    def forward(self, h: torch.Tensor, ctx: torch.Tensor | None = None):
        """h: [N, S, D] lower-layer states of N complete chunks (landmark in the last slot); ctx
        [N, m, D]: with a context attention, the last m slots of the chunk before each (zeros
        for the first chunk).

        Returns landmark keys [N, D] and memory K, V [N, S-1, D] (the real slots only); without
        memory, (landmark states [N, D], None, None)."""
        e = self.prenorm(h)
        if self.context is not None:
            e = self.context(e, self.prenorm(ctx))
        for layer in self.layers:
            e = layer(e)
        e = self.norm(e)
        if not self.memory:
            return e[:, -1], None, None
        real = e[:, :-1]
        return e[:, -1], self.k_proj(real), self.v_proj(real)


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


@dataclass
class DRTOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    # per group: dict(idx [B, C, k], weights [B, C, k], scores [B, C, C]); row c serves chunk c+1
    retrieval: list | None = None
    # with forced_chunks: mean cross-entropy of the retrieval scores of the forced rows against the
    # forced chunk (over all eligible chunks), averaged over groups; an optional training signal
    retrieval_loss: torch.Tensor | None = None


class DRTPreTrainedModel(PreTrainedModel):
    config_class = DRTConfig
    base_model_prefix = "drt"
    _no_split_modules = ["Block", "UpperBlock", "EncoderBlock"]

    def _init_weights(self, module):
        std = self.config.init_std
        if isinstance(module, ZeroLinear):  # a no-op until trained
            nn.init.zeros_(module.weight)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if self.config.pad_token_id is not None:
                with torch.no_grad():
                    module.weight[self.config.pad_token_id].zero_()
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)
        elif isinstance(module, SelfAttention):
            # non-persistent buffer: from_pretrained materialises it with torch.empty_like and relies
            # on _init_weights to fill it, so without this line loaded models had garbage ALiBi slopes
            with torch.no_grad():
                module.slopes.copy_(alibi_slopes(module.H))
        if isinstance(module, CopyHead) and module.match:
            nn.init.zeros_(module.match_bias)
            nn.init.zeros_(module.match_gate)
        if isinstance(module, CopyHead) and module.recall:
            nn.init.zeros_(module.recall_bias)
            nn.init.zeros_(module.recall_gate)
        if isinstance(module, CopyHead) and module.ages:
            nn.init.zeros_(module.recall_age_bias)
        if isinstance(module, LexicalScorer):  # inert until `train --init-lexical` sets the weights
            nn.init.zeros_(module.weight)
            nn.init.ones_(module.scale)
            if module.doc is not None:
                nn.init.constant_(module.doc, self.config.lexical_doc_df)
            if module.words is not None:
                nn.init.constant_(module.words, self.config.lexical_words)


class DRTForCausalLM(DRTPreTrainedModel):
    """`model(input_ids, labels=None)`: ids WITHOUT landmarks, any length; logits [B, L, V] for the
    real tokens; loss = mean next-token cross-entropy over real tokens (labels as input_ids, -100
    ignored). The baselines of config.arch share this class and its checkpoint format."""

    _tied_weights_keys = {"lm_head.weight": "embed.weight"}

    def __init__(self, config: DRTConfig):
        super().__init__(config)
        cfg = config
        D = cfg.hidden_size
        self.embed = nn.Embedding(cfg.vocab_size, D)
        if cfg.uses_chunks:
            self.lower = nn.ModuleList([Block(cfg, window=cfg.window) for _ in range(cfg.lower_layers)])
            self.encoder = ChunkEncoder(cfg)
            self.lmk_norms = nn.ModuleList([RMSNorm(D, cfg.rms_eps) for _ in cfg.upper_groups])
            # query_encoder: q += P_g(own-chunk features), P_g zero at init (landmark_query)
            self.query_enc = ChunkEncoder(cfg, layers=cfg.query_encoder, memory=False) if cfg.query_encoder else None
            # key_encoder: the landmark keys come from their own encoder, so that retrieval can be
            # trained without moving the memory K/V that the upper layers and the copy head read
            self.key_enc = (ChunkEncoder(cfg, layers=cfg.key_encoder, memory=False,
                                         context=cfg.key_context > 0) if cfg.key_encoder else None)
            self.query_projs = (nn.ModuleList([ZeroLinear(D, D, bias=False) for _ in cfg.upper_groups])
                                if cfg.query_encoder else None)
            self.groups = nn.ModuleList(
                [nn.ModuleList([UpperBlock(cfg) for _ in range(n)]) for n in cfg.upper_groups]
            )
            self.copy_head = CopyHead(cfg) if cfg.copy_head else None
            self.lexical = LexicalScorer(cfg) if cfg.lexical else None
        else:
            depth = cfg.baseline_layers or (cfg.lower_layers + sum(cfg.upper_groups) + 2)
            full = cfg.arch == "full_attention"
            if cfg.arch == "landmark":
                from .landmark import LandmarkAttention

                self.layers = nn.ModuleList([Block(cfg, attn=LandmarkAttention(cfg)) for _ in range(depth)])
            else:
                self.layers = nn.ModuleList(
                    [Block(cfg, rope=full, window=None if full else cfg.window) for _ in range(depth)]
                )
        self.norm = RMSNorm(D, cfg.rms_eps)
        self.lm_head = nn.Linear(D, cfg.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed

    def set_input_embeddings(self, value):
        self.embed = value

    def get_output_embeddings(self):
        return self.lm_head

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
                     stats=None) -> torch.Tensor:
        """Group g's retrieval scores [B, Cq, Ck]: retrieval_scores(q, keys, ...) (-inf unless the key
        chunk precedes the query's), plus with config lexical the LexicalScorer term, which reads the
        chunks' tokens q_toks [B, Cq, N] and k_toks [B, Ck, N] (chunk_token_ids;
        stats: the engine's running counts, LexicalScorer.scores).
        The one scoring function of the batch forward, scorer_loss, the engine and the benches."""
        s = retrieval_scores(q, keys, q_chunk, k_chunk)
        if self.lexical is not None:
            if q_toks is None or k_toks is None:
                raise ValueError("a lexical model scores chunks with their tokens: pass q_toks and k_toks")
            s = s + self.lexical.scores(g, q_toks.to(s.device), k_toks.to(s.device), q_chunk, k_chunk, stats=stats)
        return s

    def chunk_token_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Real ids [B, L] (or [L]) -> each chunk's token ids [B, C, N] (pads after the last token)."""
        ids = input_ids.view(1, -1) if input_ids.dim() == 1 else input_ids
        aug, C = self.augment(ids)
        S = self.config.chunk_size
        return aug.view(ids.shape[0], C, S)[:, :, : S - 1]

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

    def _with_preamble(self, emb: torch.Tensor) -> torch.Tensor:
        """[B, T, D] embeddings -> [B, P + T, D], the stream preamble's embeddings first."""
        pre = torch.tensor(self.config.stream_preamble, device=emb.device)
        return torch.cat([self.embed(pre)[None].expand(emb.shape[0], -1, -1).to(emb.dtype), emb], dim=1)

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
        P = self.config.preamble_len
        if not P:
            return None
        x = self._with_preamble(self.embed.weight[:0][None])  # [1, P, D]
        if not self.config.uses_chunks:
            for layer, cache in zip(self.layers, caches):
                x = layer(x, 0, cache)
            return None
        nl = len(self.lower)
        for layer, cache in zip(self.lower, caches[:nl]):
            x = layer(x, 0, cache)
        tail = self.preamble_tail(x)
        uppers = [b for g in self.groups for b in g]
        for layer, cache in zip(uppers, caches[nl:]):
            x = layer(x, _no_gca, 0, cache)
        return None if tail is None else tail[0]

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
        key encoder reads of the chunk before each, [B*C, m, D] (config key_context = m: its last m
        real slots; the landmark slot is not one), or None without the option. first [B, m, D]:
        the context of each run's first chunk (the stream's chunk before it); zeros if None."""
        m = self.config.key_context
        if not m:
            return None
        B, C, S, D = h.shape
        tails = h[:, :, S - 1 - m: S - 1]
        first = h.new_zeros(B, 1, m, D) if first is None else first.view(B, 1, m, D).to(h.dtype)
        return torch.cat([first, tails[:, :-1]], dim=1).reshape(B * C, m, D)

    # -- layout helpers ---------------------------------------------------------------------------

    def augment(self, input_ids: torch.Tensor):
        """Pad [B, L] to C*63 and insert a landmark after every 63 tokens -> [B, C*64] and C."""
        cfg = self.config
        B, L = input_ids.shape
        S1 = cfg.chunk_tokens
        C = max(1, -(-L // S1))
        ids = F.pad(input_ids, (0, C * S1 - L), value=cfg.pad_token_id)
        ids = ids.masked_fill(ids < 0, cfg.pad_token_id).view(B, C, S1)
        lmk = torch.full((B, C, 1), cfg.lmk_token_id, dtype=ids.dtype, device=ids.device)
        return torch.cat([ids, lmk], dim=2).view(B, C * cfg.chunk_size), C

    def unaugment(self, x: torch.Tensor, L: int) -> torch.Tensor:
        """augment's inverse on states: [B, C*64, D] -> the real tokens' [B, L, D] (landmark slots
        and padding dropped)."""
        B, T, D = x.shape
        S = self.config.chunk_size
        return x.view(B, T // S, S, D)[:, :, : S - 1].reshape(B, -1, D)[:, :L]

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
    ) -> DRTOutput:
        """Logits [B, L, V] of the real tokens (log-probabilities of the LM/pointer mixture with the
        copy head), the LM loss with `labels`, and with output_retrieval each group's selection.
        chunk_embeddings: the fixed_retriever's chunk embeddings when the caller has them.

        steer: what training adds (drt_core.train.objective.Steering: forced chunks, the retrieval
        loss, the scorer-only step), called with each group's scores and selection; its retrieval
        loss comes back as the output's retrieval_loss. None when serving."""
        if self.config.uses_chunks:
            h, retrieval, copy = self._forward_drt(input_ids, output_retrieval, chunk_embeddings, steer)
        else:
            h, retrieval, copy = self._forward_plain(input_ids), None, None
        with torch.no_grad() if steer is not None and steer.scorer_only else nullcontext():
            logits = self.lm_head(self.norm(h))
            if copy is not None:  # log-probabilities of the LM/pointer mixture (CopyHead)
                logits = mix_copy(logits, *copy)
            loss = None if labels is None else lm_loss(logits, labels)
        return DRTOutput(loss=loss, logits=logits, retrieval=retrieval,
                         retrieval_loss=None if steer is None else steer.loss)

    @torch.no_grad()
    def landmarks(self, input_ids: torch.Tensor, segment_chunks: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
        """Landmark keys [C, D] and group-0 landmark queries [C, D] of one sequence of ids [L]:
        everything group 0's retrieval depends on (embeddings, lower layers, chunk encoder, query
        norm), without the upper layers. The lower layers run in segments of `segment_chunks`
        chunks, each with the chunks before it that their sliding windows reach as context, so
        the result equals the full forward's (and the engine's) at any length, in memory bounded
        by the segment. Scores as in retrieval_scores(queries, keys, ...)."""
        cfg = self.config
        if cfg.arch != "drt":
            raise ValueError("landmarks: only DRT models score chunks with landmarks")
        aug, C = self.augment(input_ids.view(1, -1))
        S, D = cfg.chunk_size, cfg.hidden_size
        # position p of layer l sees p - window .. p of layer l - 1: lower_layers * window back in all,
        # from the segment's first slot, or (key_context = m) from the chunk before's last m slots
        reach = cfg.lower_layers * cfg.window + (cfg.key_context + 1 if cfg.key_context else 0)
        ctx = -(-reach // S)
        keys, queries = [], []
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
        return torch.cat(keys), torch.cat(queries)

    def _forward_plain(self, input_ids):
        if self.config.arch == "landmark":  # blocks of chunk_tokens tokens + a landmark each
            x = self.embed(self.augment(input_ids)[0])
            for layer in self.layers:
                x = layer(x)
            return self.unaugment(x, input_ids.shape[1])
        x = self.embed(input_ids.clamp_min(0))
        P = self.config.preamble_len
        if P:
            x = self._with_preamble(x)
        for layer in self.layers:
            x = layer(x)
        return x[:, P:]

    def _forward_drt(self, input_ids, output_retrieval: bool, chunk_embeddings=None, steer=None):
        cfg = self.config
        B, L = input_ids.shape
        S, D, H, d = cfg.chunk_size, cfg.hidden_size, cfg.num_heads, cfg.head_dim
        aug, C = self.augment(input_ids)
        x, emb, pre = self.lower_states(aug)  # emb: kept for the copy head's queries; pre: the preamble's states
        lmk_keys, mem_k, mem_v, own = self.encode_chunks(x.view(B, C, S, D), self.preamble_tail(pre))
        N = S - 1
        flat_k = mem_k.view(B, C, N, D)
        # [B, C, N, H, d] -> per chunk, heads first
        mem_k = mem_k.view(B, C, N, H, d).permute(0, 1, 3, 2, 4)
        mem_v = mem_v.view(B, C, N, H, d).permute(0, 1, 3, 2, 4)
        chunk_ids = torch.arange(C, device=x.device)
        retrieval, sels = [], []
        for g, group in enumerate(self.groups):
            if cfg.arch == "fixed_retriever":
                scores = self._fixed_scores(input_ids, C, chunk_embeddings)
            else:
                q_lmk = self.landmark_query(g, x.view(B, C, S, D)[:, :, S - 1], own)
                toks = aug.view(B, C, S)[:, :, : S - 1]
                scores = self.chunk_scores(g, q_lmk, lmk_keys, chunk_ids, chunk_ids, toks, toks)
            idx, w = select_topk(scores, cfg.chunk_topk, gumbel=self.training and cfg.arch == "drt")
            if steer is not None:  # training: forced chunks, the retrieval loss (drt_core.train.objective)
                idx, w = steer(g, scores, idx, w)
            if cfg.arch == "fixed_retriever":
                w = w.detach()  # constants: the LM loss no longer reaches the scorer
            if output_retrieval:
                retrieval.append({"idx": idx, "weights": w.detach(), "scores": scores.detach()})
            sels.append((idx, w))
            with torch.no_grad() if steer is not None and steer.scorer_only else nullcontext():
                gca_fn = self._batch_gca_fn(idx, w, mem_k, mem_v, B, C)
                for layer in group:
                    if pre is None:
                        x = layer(x, gca_fn)
                    else:  # the preamble's positions attend and are attended to, and get no GCA
                        P = pre.shape[1]
                        y = layer(torch.cat([pre, x], dim=1), _after_preamble(gca_fn, P))
                        pre, x = y[:, :P], y[:, P:]
        copy = None
        if self.copy_head is not None:
            idx, w = copy_selection(sels, cfg.copy_groups)
            copy = batch_copy(self.copy_head, self.embed, x, emb, aug, flat_k, idx, w, L)
        x = self.unaugment(x, L)
        return x, (retrieval if output_retrieval else None), copy

    def _batch_gca_fn(self, idx, w, mem_k, mem_v, B, C):
        """GCA closure for the whole sequence: chunk c >= 1 uses row c-1's selection; chunk 0 gets 0."""
        cfg = self.config
        S, D = cfg.chunk_size, cfg.hidden_size
        if C < 2:
            return lambda gca_mod, a: torch.zeros_like(a)
        k = idx.shape[-1]
        sel = idx[:, :-1]  # [B, C-1, k] rows 0..C-2 serve chunks 1..C-1
        flat = (sel + torch.arange(B, device=idx.device).view(B, 1, 1) * C).reshape(-1)
        Hh, N, d = mem_k.shape[2], mem_k.shape[3], mem_k.shape[4]
        gk = mem_k.reshape(B * C, Hh, N, d)[flat].view(B * (C - 1), k, Hh, N, d).transpose(1, 2)
        gv = mem_v.reshape(B * C, Hh, N, d)[flat].view(B * (C - 1), k, Hh, N, d).transpose(1, 2)
        gw = w[:, :-1].reshape(B * (C - 1), k)

        def fn(gca_mod, a):
            av = a.view(B, C, S, D)
            out = gca_mod(av[:, 1:].reshape(B * (C - 1), S, D), gk, gv, gw).view(B, C - 1, S, D)
            return torch.cat([torch.zeros_like(av[:, :1]), out], dim=1).view(B, C * S, D)

        return fn

    # -- fixed retriever (RPT-style baseline) -------------------------------------------------------

    def _fixed_scores(self, input_ids, C, chunk_embeddings=None):
        """The fixed retriever's scores [B, C, C] (fixed_retriever.fixed_scores) of the chunks' frozen
        MiniLM embeddings (computed here unless given)."""
        from .fixed_retriever import embed_chunks, fixed_scores

        if chunk_embeddings is None:
            chunk_embeddings = embed_chunks(input_ids, self.config)  # [B, C, E], L2-normalised
        e = chunk_embeddings.to(input_ids.device)
        ids = torch.arange(C, device=input_ids.device)
        return fixed_scores(e, e, ids, ids, self.config.retriever_temperature)


def _no_gca(gca_mod, a: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(a)


def _after_preamble(gca_fn, P: int):
    """gca_fn for a sequence that starts with the P preamble positions (which get no GCA)."""
    def fn(gca_mod, a):
        return torch.cat([torch.zeros_like(a[:, :P]), gca_fn(gca_mod, a[:, P:])], dim=1)

    return fn


def lm_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None):
    """Mean next-token cross-entropy: position i predicts labels[i+1]; -100 ignored.

    With `weights` [B, L] (aligned with labels), a weighted mean: sum(w*ce)/sum(w) over targets."""
    V = logits.shape[-1]
    lg = logits[:, :-1].reshape(-1, V).float()
    tg = labels[:, 1:].reshape(-1)
    ce = F.cross_entropy(lg, tg.clamp_min(0), reduction="none")
    mask = (tg != -100).float()
    if weights is not None:
        mask = mask * weights[:, 1:].reshape(-1).float()
    return (ce * mask).sum() / mask.sum().clamp_min(1e-9)


AutoModelForCausalLM.register(DRTConfig, DRTForCausalLM, exist_ok=True)  # AutoModelForCausalLM loads "drt"
