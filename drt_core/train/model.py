"""The model a run trains: built from a preset (or a baseline's architecture) or grown from a
checkpoint (`--init`: added query / key encoders start as the chunk encoder, added encoder layers as
the identity, the GCA outputs scaled), the lexical weights from idf, the AdamW groups (rates per
part, what is frozen), and the FSDP2 units."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from .options import TrainConfig

logger = logging.getLogger(__name__)


def build_model(cfg: TrainConfig):
    """The model of cfg.model: the preset's (with `arch` and the overrides), freshly initialised, or
    the --init checkpoint's with the overrides, its new parts initialised as the docstring says."""
    from ..hf_config import DRTConfig
    from ..modeling import DRTForCausalLM

    if cfg.model.init:
        # overrides go into the config before the model is built, so structural ones (copy_head,
        # query_encoder) add their modules, initialised by _init_weights; loaded weights are kept
        model, info = DRTForCausalLM.from_pretrained(cfg.model.init, output_loading_info=True,
                                                     **cfg.model.model_overrides)
        # a query / key encoder added now starts as a copy of the chunk encoder (one the checkpoint
        # has keeps its weights when only a part is new, such as key_context's attention)
        init_retrieval_encoders(model, [n for n in ("query_enc", "key_enc")
                                       if any(k.startswith(n + ".prenorm.") for k in info["missing_keys"])])
        init_added_encoder_layers(model, info["missing_keys"])
        if cfg.model.gca_out_scale != 1.0 and model.config.uses_chunks:
            # a pretrained DRT whose GCA stayed small next to the residual stream (we measured 4%
            # of its norm in the upper layers) cannot pass retrieved content on;
            # see docs/history/2026-11-29-to-12-01-model-rounds.md
            with torch.no_grad():
                for group in model.groups:
                    for blk in group:
                        blk.gca.o.weight.mul_(cfg.model.gca_out_scale)
        return model
    mc = DRTConfig.from_preset(cfg.model.preset, arch=cfg.model.arch, **cfg.model.model_overrides)
    return DRTForCausalLM(mc)


def chunk_idf(data: Path, vocab_size: int, chunk_tokens: int = 63) -> tuple[np.ndarray, int]:
    """Document frequency over the training split's 63-token chunks: (df [V] in chunks, chunks)."""
    df, n = np.zeros(vocab_size, np.int64), 0
    for name in ("books", "stacks"):
        p = data / name / "train.bin"
        if not p.exists():
            continue
        ids = np.memmap(p, dtype=np.uint16, mode="r")
        C = len(ids) // chunk_tokens
        for a in range(0, C, 1 << 16):  # blocks of chunks: (chunk, token) pairs, each counted once
            b = min(C, a + (1 << 16))
            blk = np.asarray(ids[a * chunk_tokens: b * chunk_tokens], dtype=np.int64)
            blk = blk.reshape(b - a, chunk_tokens)
            pairs = np.unique(blk + np.arange(b - a)[:, None] * vocab_size)
            df += np.bincount(pairs % vocab_size, minlength=vocab_size)
        n += C
    if not n:
        raise FileNotFoundError(f"no token files under {data}/{{books,stacks}}/train.bin; run `drt-reader "
                                "data`")
    return df, n


def init_lexical(model, data: Path, max_df: float) -> None:
    """`train --init-lexical DF`: the lexical scorer's token weights (config lexical) start at
    idf_t - log(1 / DF) = log(DF * chunks / df_t), clipped at 0: a token in more than a share DF
    of the training chunks (function words, common word pieces) starts at 0, where relu keeps it;
    a token in one chunk of a million weighs about 10 (DF = 0.02)."""
    if getattr(model, "lexical", None) is None:
        raise SystemExit("--init-lexical needs a lexical model: --set lexical=true")
    df, n = chunk_idf(data, model.config.vocab_size, model.config.chunk_tokens)
    w = np.log(max_df * n / np.maximum(df, 1)).clip(min=0.0)
    with torch.no_grad():
        model.lexical.weight.copy_(torch.from_numpy(w.astype(np.float32)))
    logger.info("lexical weights from idf over %d chunks: %d of %d tokens > 0", n, int((w > 0).sum()), len(w))


RETRIEVAL_PATH = ("gca.", "encoder.", "lmk_norms.")
# the copy head's scalar biases per exact-feature value (suffix-match and recall lengths, ages): at
# the matrices' rate they move 0.1 a step at most (x MATCH_SCALE), while the pointer's learned
# scores span tens (docs/history/2026-11-29-to-12-01-model-rounds.md)
COPY_BIASES = ("match_bias", "match_gate", "recall_bias", "recall_gate", "recall_age_bias")


def init_retrieval_encoders(model, names=("query_enc", "key_enc")) -> None:
    """Start the query / key encoders named as copies of the chunk encoder's layers (their
    landmark states are then the chunk's landmark key, so scores start as before): `train
    --init M --set query_encoder=n` (or key_encoder=n) calls this for the ones M lacks."""
    src = getattr(model, "encoder", None)  # baselines have none (and no encoders to start)
    for name in names:
        enc = getattr(model, name, None)
        if enc is None:
            continue
        with torch.no_grad():
            enc.prenorm.load_state_dict(src.prenorm.state_dict())
            enc.norm.load_state_dict(src.norm.state_dict())
            for i in range(min(len(enc.layers), len(src.layers))):
                enc.layers[i].load_state_dict(src.layers[i].state_dict())

def init_added_encoder_layers(model, missing_keys) -> list[str]:
    """Layers that `train --init M --set key_encoder=n` (or query_encoder=n) adds to an encoder M
    already has start as the identity (their attention output and MLP down projections zero),
    so the encoder's landmark states, and every score, are unchanged until they train. An
    encoder M lacks altogether is init_retrieval_encoders' case. Returns the layers zeroed."""
    missing, done = set(missing_keys), []
    for name in ("query_enc", "key_enc"):
        enc = getattr(model, name, None)
        if enc is None or f"{name}.prenorm.weight" in missing:
            continue
        for i, layer in enumerate(enc.layers):
            if f"{name}.layers.{i}.o.weight" in missing:
                with torch.no_grad():
                    layer.o.weight.zero_()
                    layer.mlp.down.weight.zero_()
                done.append(f"{name}.layers.{i}")
    return done


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """AdamW groups: weight decay on matrices only; the retrieval path (GCA projections, chunk
    encoder, landmark query norms) at `gca_lr_mult` times the learning rate, the copy head at
    `copy_lr_mult` times (its feature biases, COPY_BIASES, `copy_bias_lr_mult` times more), the
    lexical weights at `lexical_lr_mult` times."""
    groups = {}
    only = [f for f in cfg.optim.train_only.split(",") if f]
    for n, p in model.named_parameters():
        if only and not any(f in n for f in only):
            p.requires_grad_(False)
            continue
        decay = p.dim() >= 2
        mult = cfg.optim.gca_lr_mult if any(s in n for s in RETRIEVAL_PATH) else 1.0
        if n.startswith("copy_head."):
            bias = n.split(".")[-1] in COPY_BIASES
            mult = cfg.optim.copy_lr_mult * (cfg.optim.copy_bias_lr_mult if bias else 1.0)
        if n.startswith("lexical."):
            mult = cfg.optim.lexical_lr_mult
        wd = cfg.optim.weight_decay if decay else 0.0
        g = groups.setdefault((decay, mult), {"params": [], "weight_decay": wd, "lr_mult": mult})
        g["params"].append(p)
    return list(groups.values())


def fsdp_units(model) -> list:
    """The modules sharded on their own (each all-gathered just before it runs and freed after):
    the lower blocks and every upper block. The rest (embeddings and head, tied; the chunk encoder;
    norms; the copy head) is the root unit. Baselines: their blocks."""
    upper = [b for g in (getattr(model, "groups", None) or []) for b in g]
    blocks = list(getattr(model, "lower", None) or []) + upper
    return blocks + list(getattr(model, "layers", None) or [])


def shard_model(model, bf16: bool):
    """FSDP2 `fully_shard` on each of fsdp_units(model), then on the model. bf16: parameters are
    all-gathered and computed in bf16, gradients reduced in fp32, the sharded master weights and
    AdamW states stay fp32 (MixedPrecisionPolicy)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16
          else MixedPrecisionPolicy())
    for blk in fsdp_units(model):
        fully_shard(blk, mp_policy=mp)
    return fully_shard(model, mp_policy=mp)


def model_config(cfg: TrainConfig):
    """The DRTConfig that build_model(cfg) will build (without building it)."""
    from ..hf_config import DRTConfig

    if cfg.model.init:
        return DRTConfig.from_pretrained(cfg.model.init, **cfg.model.model_overrides)
    return DRTConfig.from_preset(cfg.model.preset, arch=cfg.model.arch, **cfg.model.model_overrides)
