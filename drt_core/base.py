"""What every architecture of this repository shares, without transformers: the layout of a stream
into chunks, the output and the loss, and `ModelBase`, the methods every model class has (weight
initialisation, the tied embeddings, the output, the stream preamble's embeddings).

Layout (B batch, L real tokens, S = chunk_size = 64 slots a chunk, N = S - 1 real tokens):
a landmark token follows every N real tokens, so chunk c holds stream positions c*S .. c*S + S - 1,
its landmark last. `insert_landmarks` is the one implementation of that layout: the batch forward
lays out a whole padded sequence with it (`augment`), the engine each run of a stream, continuing
from the tokens it has (drt_core/stream.py).

The model classes are ModelBase with a torch base: transformers' PreTrainedModel for the classes of
the fixed contract (drt_core/pretrained.py: DRTForCausalLM, the baselines), nn.Module alone for the
engine's serving copy of a DRT checkpoint (drt_core/runtime.py), which loads without importing
transformers. Same layers, same parameter names, same numbers.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import SelfAttention, alibi_slopes
from .layers import OwnInit, RMSNorm, ZeroLinear

if TYPE_CHECKING:
    from .hf_config import DRTConfig

# ----------------------------------------------------------------------------------------------
# the stream's layout: real tokens and landmarks


def insert_landmarks(ids: torch.Tensor, lmk_id: int, chunk_size: int,
                     start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Real token ids [..., L] that continue a stream of `start` real tokens -> (the ids with a
    landmark after every chunk_size - 1 real tokens of the stream [..., L'], and which of those L'
    positions are real tokens [L'] bool). A chunk's landmark follows its last real token at once,
    so a run that ends a chunk ends with its landmark."""
    N = chunk_size - 1
    L = ids.shape[-1]
    t = start + torch.arange(L, device=ids.device)  # each token's index among the stream's real tokens
    pos = t + t // N - (start + start // N)  # its position in the run's output
    n_lmk = (start + L) // N - start // N  # the run's tokens that close a chunk
    out = ids.new_full((*ids.shape[:-1], L + n_lmk), lmk_id)
    out[..., pos] = ids
    real = torch.zeros(L + n_lmk, dtype=torch.bool, device=ids.device)
    real[pos] = True
    return out, real


def augment(input_ids: torch.Tensor, cfg: DRTConfig) -> tuple[torch.Tensor, int]:
    """The batch forward's layout: ids [B, L] (negative ids count as padding) padded to C*N and a
    landmark inserted after every N tokens -> ([B, C*S], C)."""
    L = input_ids.shape[1]
    C = max(1, -(-L // cfg.chunk_tokens))
    ids = F.pad(input_ids, (0, C * cfg.chunk_tokens - L), value=cfg.pad_token_id)
    ids = ids.masked_fill(ids < 0, cfg.pad_token_id)
    return insert_landmarks(ids, cfg.lmk_token_id, cfg.chunk_size)[0], C


def unaugment(x: torch.Tensor, L: int, chunk_size: int) -> torch.Tensor:
    """augment's inverse on states: [B, C*S, D] -> the real tokens' [B, L, D] (landmark slots
    and padding dropped)."""
    B, T, D = x.shape
    S = chunk_size
    return x.view(B, T // S, S, D)[:, :, : S - 1].reshape(B, -1, D)[:, :L]


# ----------------------------------------------------------------------------------------------
# output and loss


@dataclass
class Output:
    """A forward's result: the logits, the loss with labels, the selections, training's retrieval loss."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    # per group: dict(idx [B, C, k], weights [B, C, k], scores [B, C, C]); row c serves chunk c+1
    retrieval: list | None = None
    # with forced_chunks: mean cross-entropy of the retrieval scores of the forced rows against the
    # forced chunk (over all eligible chunks), averaged over groups; an optional training signal
    retrieval_loss: torch.Tensor | None = None


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


def frozen(steer):
    """No autograd graph where training's scorer-only step (Steering.scorer_only: `train --lm-loss 0`)
    trains the retrieval scores alone."""
    return torch.no_grad() if steer is not None and steer.scorer_only else nullcontext()


# ----------------------------------------------------------------------------------------------
# the methods every model class has


class ModelBase:
    """A mixin of the model classes (before their torch base, see the module's docstring): weight
    initialisation of the layers every architecture is made of (a module of our own with parameters
    of its own, an extension such as CopyHead or LexicalScorer, initialises them itself, in its
    `reset_parameters`, which this calls), the tied embeddings, the output, the preamble."""

    output_type = Output  # the HF classes return their ModelOutput (pretrained.DRTOutput)

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
        elif isinstance(module, OwnInit):  # an extension's parameters of its own
            module.reset_parameters()

    def get_input_embeddings(self):
        return self.embed

    def set_input_embeddings(self, value):
        self.embed = value

    def get_output_embeddings(self):
        return self.lm_head

    def output(self, logits: torch.Tensor, labels: torch.Tensor | None, steer, retrieval: list | None = None):
        """The forward's output: the logits [B, L, V], the loss with labels, the selections, the
        retrieval loss training's steer collected."""
        with frozen(steer):
            loss = None if labels is None else lm_loss(logits, labels)
        return self.output_type(loss=loss, logits=logits, retrieval=retrieval,
                                retrieval_loss=None if steer is None else steer.loss)

    def _with_preamble(self, emb: torch.Tensor) -> torch.Tensor:
        """[B, T, D] embeddings -> [B, P + T, D], the stream preamble's embeddings first (config
        stream_preamble: token ids every stream begins with, in no chunk)."""
        pre = torch.tensor(self.config.stream_preamble, device=emb.device)
        return torch.cat([self.embed(pre)[None].expand(emb.shape[0], -1, -1).to(emb.dtype), emb], dim=1)
