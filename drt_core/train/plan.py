"""The plan printed before the first step (docs/training.md, "The plan printed before training"):
parameters, tokens per step, device, dtype, parallelism, and the memory per device
(`estimate_memory`: weights, gradients, AdamW, gathered units, and the activations that a
meta-device forward saves), which also sizes a batch to a device (`fit_batch_size`)."""

from __future__ import annotations

import logging
import math
import os

import torch

from .model import fsdp_units, model_config
from ..hardware import cpu_has_bf16
from .options import TrainConfig

logger = logging.getLogger(__name__)


def use_bf16(bf16: str, device: torch.device) -> bool:
    """`--bf16 on | off | auto` on `device`: auto is on where the GPU or CPU has native bf16."""
    if bf16 == "on":
        return True
    if bf16 == "off":
        return False
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return cpu_has_bf16()  # CPUs with AVX512-BF16 / AMX run bf16 matmuls natively


def count_parameters(mc) -> int:
    """Parameters of the model a DRTConfig builds (the tied embedding and head counted once),
    built on the meta device: nothing is allocated."""
    return sum(p.numel() for p in _meta_model(mc).parameters())


def _meta_model(mc):
    from ..modeling import DRTForCausalLM

    with torch.device("meta"):
        return DRTForCausalLM(mc)


def activation_bytes(mc, batch_size: int, seq_len: int, bf16: bool = False) -> int | None:
    """Bytes the autograd graph saves for backward in one training forward (with labels) of
    batch_size x seq_len tokens: the forward runs on the meta device (shapes only, nothing
    computed or allocated, well under a second for the paper preset) with saved_tensors_hooks
    counting each distinct storage once. bf16: the parameters in bf16, as FSDP2's mixed precision
    gathers them. On this CPU the fp32 count matches a real forward's (paper preset, 504 tokens:
    1.725 against 1.728 GiB). The lexical term counts tokens with torch.unique, which has no meta
    kernel: it is left out of the count (its tensors are chunks x chunks, a few KiB a sample). None
    where the forward cannot run on meta otherwise (fixed_retriever's MiniLM)."""
    from ..config import PAPER_FLAVOUR
    from ..hf_config import DRTConfig
    from ..modeling import DRTForCausalLM

    if mc.lexical:  # the lexical fields at their "off" values
        off = {k: v for k, v in PAPER_FLAVOUR.items() if k.startswith("lexical")}
        mc = DRTConfig(**{**mc.to_dict(), **off})
    try:
        with torch.device("meta"):
            m = DRTForCausalLM(mc)
        m = m.to(torch.bfloat16) if bf16 else m
        m.train()
        seen: dict[int, int] = {}

        def pack(t):
            st = t.untyped_storage()
            seen[st._cdata] = max(seen.get(st._cdata, 0), st.nbytes())
            return t

        ids = torch.zeros(batch_size, seq_len, dtype=torch.long, device="meta")
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            m(ids, labels=ids)
    except Exception as e:  # noqa: BLE001 -- an estimate only; the plan says it is missing
        logger.info("activation estimate unavailable: %s", e)
        return None
    return sum(seen.values())


def estimate_memory(mc, batch_size: int, seq_len: int, world: int = 1, fsdp: bool = False,
                    bf16: bool = False) -> dict:
    """Memory per device (GiB) of a training step, batch_size samples of seq_len tokens per process:

        weights 4P, gradients 4P, AdamW 8P bytes (fp32), divided by the world size under FSDP;
        FSDP adds the gathered units: (root + 2 x largest unit) parameters, x 2 (their gradients),
        at 2 bytes in bf16 else 4; DDP adds its gradient buckets, 4P; bf16 autocast without FSDP
        caches a bf16 copy of the weights, 2P;
        activations: the bytes saved for backward, counted on a meta-device forward of the same
        batch_size x seq_len (activation_bytes; bf16: parameters and activations in bf16).

    Not counted: the CUDA context and allocator slack, communication buffers, the data loader."""
    P = count_parameters(mc)
    world = max(1, int(world))
    shard = world if fsdp and world > 1 else 1
    gib = 1024 ** 3
    est = {"params": P, "weights": 4 * P / shard / gib, "grads": 4 * P / shard / gib,
           "adamw": 8 * P / shard / gib}
    pbytes = 2 if bf16 else 4
    if shard > 1:
        m = _meta_model(mc)
        units = fsdp_units(m)
        unit = max((sum(p.numel() for p in u.parameters()) for u in units), default=0)
        root = P - sum(sum(p.numel() for p in u.parameters()) for u in units)
        est["gathered"] = 2 * (root + 2 * unit) * pbytes / gib
    else:
        est["gathered"] = (4 * P if world > 1 else 0) / gib + (2 * P if bf16 else 0) / gib
    act = activation_bytes(mc, batch_size, seq_len, bf16)
    est["activations"] = float("nan") if act is None else act / gib
    est["total"] = sum(v for k, v in est.items() if k != "params" and not math.isnan(v))  # nan: not estimated
    return est


def fit_batch_size(mc, seq_len: int, memory_bytes: int, world: int = 1, fsdp: bool = False,
                   bf16: bool = False,
                   max_batch: int | None = None, fraction: float = 0.8) -> int:
    """The largest per-device batch of seq_len tokens whose estimate_memory total fits in `fraction`
    of memory_bytes (a device's total memory: torch.cuda.get_device_properties(0).total_memory).
    The rest is for what the estimate leaves out: the CUDA context, the allocator's slack, the
    backward's transient tensors (the logits' gradient alone is 4-8 bytes x vocabulary a token).
    At least 1 (a batch that cannot fit still runs, and fails, where it is asked for), at most
    max_batch. The estimate is linear in the batch but for what every sample shares (the attention
    bias, per-sample padding of the meta count): the batch solved from batches 1 and 2 is checked
    against the estimate itself and moved to the largest that fits."""
    gib = 1024 ** 3
    budget = fraction * memory_bytes / gib
    hi = max_batch if max_batch is not None else 1 << 16

    def total(b: int) -> float:
        return estimate_memory(mc, b, seq_len, world, fsdp, bf16)["total"]

    t1, t2 = total(1), total(2)
    if math.isnan(t1) or t2 <= t1:
        raise ValueError("fit_batch_size: no activation estimate for this model")
    b = max(1, min(hi, int((budget - t1) // (t2 - t1)) + 1))
    while b > 1 and total(b) > budget:
        b -= 1
    while b < hi and total(b + 1) <= budget:
        b += 1
    return b


def plan_text(cfg: TrainConfig) -> str:
    """The paragraph `drt-reader train` prints before it starts (rank 0 under torchrun): the
    model, the tokens per step, the device, dtype and parallelism, and the memory estimate per
    device (estimate_memory)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    bf16 = use_bf16(cfg.run.bf16, device)
    mc = model_config(cfg)
    P = count_parameters(mc)
    sharded = cfg.run.fsdp and world > 1
    est = estimate_memory(mc, cfg.data.batch_size, cfg.data.seq_len, world, sharded, bf16)
    mixed = ", bf16 parameters, fp32 gradient reduction" if bf16 else ""
    par = (f"FSDP2 over {world} processes (fully_shard per block{mixed})"
           if sharded else f"DDP over {world} processes" if world > 1 else "one process")
    if cfg.run.fsdp and world == 1:
        par += " (--fsdp without torchrun: nothing to shard; sharded checkpoints all the same)"
    B, L, steps = cfg.data.batch_size, cfg.data.seq_len, cfg.optim.steps
    tok = B * world * L
    arch = (f"{mc.lower_layers} lower + {mc.encoder_layers} encoder + {list(mc.upper_groups)} upper layers"
            if mc.uses_chunks else f"{mc.arch}")
    return (f"plan: preset {cfg.model.preset} ({mc.arch}; {arch}; D {mc.hidden_size}, {mc.num_heads} heads, "
            f"window {mc.window}, top-{mc.chunk_topk} chunks), {P / 1e6:.1f}M parameters; {B} x {L} "
            f"tokens per process x {world} = {tok:,} tokens per step, {steps} steps "
            f"({tok * steps:,} tokens); device {device.type}, {'bf16 autocast' if bf16 else 'fp32'}, {par}; "
            f"estimated memory per device {est['total']:.2f} GiB (weights {est['weights']:.2f}, "
            f"gradients {est['grads']:.2f}, AdamW {est['adamw']:.2f}, "
            f"gathered / buffers {est['gathered']:.2f}, "
            + ("activations not estimated: the total leaves them out" if math.isnan(est["activations"])
               else f"activations {est['activations']:.2f}") + "; docs/training.md)")
