"""Training and forward throughput: `python -m bench.train [--json]` or `drt-reader bench train`.

Two figures for a preset (default `tiny`) at the training length (4032 tokens = 64 chunks of 63):
    train     tokens/s of full DRT training steps (forward, backward, clip, AdamW), the step of
              drt_core/train/loop.py, on random token ids (speed does not depend on the text);
    forward   tokens/s of the DRT forward against the sliding-window baseline of the same preset
              (`arch="sliding_window"`, lower + upper + 2 layers: within ~6% of DRT's parameters,
              docs/baselines.md), in eval mode without gradients. The two models are timed in
              alternating order (A B B A ...) in one process, and the ratio is taken per repetition,
              so load from other processes weighs on both sides alike; the median ratio is reported.

    memory    activations saved for backward per token (a real training forward with labels, distinct
              storages counted by torch.autograd.graph.saved_tensors_hooks) of the DRT, of the
              sliding_window baseline and of a lean reference: a plain sliding-window transformer of
              the baseline's size (LeanSlidingWindow: fused attention, scaled_dot_product_attention per
              block of queries against a view of its window, no materialised masks or unfolded copies;
              and the same with a chunked cross-entropy), with their ratios (issue 53, item 5).

`--set key=value` overrides the preset (e.g. the 22M DRT of bench/gpu_train.sh: `--preset small --set
hidden_size=384 --set num_heads=6 --set intermediate_size=1024`). `--fit-batch` prints only the
largest batch whose estimated training memory (drt_core.train.plan.fit_batch_size) fits the device
(bench/gpu.sh, bench/gpu_train.sh).

bf16 autocast follows drt_core.train.plan.use_bf16 (auto: only where the CPU or GPU has native bf16).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.gca import machine_name


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _model(preset: str, arch: str, device: torch.device, **overrides):
    from drt_core import DRTConfig, DRTForCausalLM

    torch.manual_seed(0)
    return DRTForCausalLM(DRTConfig.from_preset(preset, arch=arch, **overrides)).to(device)


# dense bf16 peak of the accelerators MFU is reported against (vendor figures, without sparsity)
PEAK_BF16_TFLOPS = {"H200": 989.5, "H100": 989.5, "A100": 312.0, "L40S": 362.1, "A10G": 125.0}


def peak_tflops(device: torch.device) -> float | None:
    """The device's dense bf16 peak (PEAK_BF16_TFLOPS by name), None when it is not known (CPUs)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def train_flops_per_token(cfg, seq_len: int) -> float:
    """Model FLOPs of one training token (forward + backward = 3 x forward, no recomputation):
    2 per weight of every matrix a token goes through (the tied LM head included, the embedding
    lookup not), plus attention: 4 * D per key a query attends to (QK and PV) - the causal sliding
    window's mean over the sequence in the lower and upper layers, the chunk encoder's own chunk,
    and K * N retrieved keys in each upper layer's GCA. Retrieval scoring (one dot product per
    landmark and past chunk) is left out: it is below 1% at the training length."""
    from drt_core.modeling import DRTForCausalLM

    with torch.device("meta"):
        m = DRTForCausalLM(cfg)
    D, V, S = cfg.hidden_size, cfg.vocab_size, cfg.chunk_size
    matrix = sum(p.numel() for n, p in m.named_parameters() if p.dim() == 2 and not n.startswith("embed"))
    if (getattr(m.config, "tie_word_embeddings", True)
            and not any(n.startswith("lm_head") for n, _ in m.named_parameters())):
        matrix += D * V  # the tied head is a matmul too
    w = min(cfg.window, seq_len)
    window_keys = w * (1 - w / (2 * seq_len)) + 0.5  # mean keys per query of a causal window over seq_len
    n_self = cfg.lower_layers + sum(cfg.upper_groups)
    attn = 4 * D * (n_self * window_keys + cfg.encoder_layers * S / 2
                    + sum(cfg.upper_groups) * cfg.chunk_topk * (S - 1))
    return 3 * (2 * matrix + attn)


def bench_train(preset, seq_len, batch, steps, device, bf16, seconds: float = 0.0,
                overrides: dict | None = None) -> dict:
    """Seconds per training step (after one warm-up step) of the DRT preset; with `seconds`, steps
    run until that much time has passed (at least `steps`). MFU where the device's peak is known."""
    model = _model(preset, "drt", device, **(overrides or {})).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    V = model.config.vocab_size
    times = []
    t_start = time.perf_counter()
    i = 0
    while i < steps + 1 or (seconds and time.perf_counter() - t_start < seconds):
        i += 1
        ids = torch.randint(3, V, (batch, seq_len), generator=g).to(device)
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        _sync(device)
        if i > 1:  # step 1 warms up allocators and kernels
            times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    n_params = sum(p.numel() for p in model.parameters())
    tok_s = batch * seq_len / s
    flops = train_flops_per_token(model.config, seq_len)
    peak = peak_tflops(device)
    return {"s_per_step": times, "tok_per_s": tok_s, "params": n_params, "flops_per_token": flops,
            "tflops": tok_s * flops / 1e12, "peak_tflops": peak,
            "mfu": None if peak is None else tok_s * flops / (peak * 1e12), "steps": len(times)}


@torch.inference_mode()
def bench_forward(preset, seq_len, batch, reps, device, bf16, overrides: dict | None = None) -> dict:
    """Forward seconds of DRT and the sliding-window baseline, interleaved A B B A."""
    models = {a: _model(preset, a, device, **(overrides or {})).eval() for a in ("drt", "sliding_window")}
    ids = torch.randint(3, models["drt"].config.vocab_size, (batch, seq_len),
                        generator=torch.Generator().manual_seed(1)).to(device)

    def once(arch):
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            models[arch](ids)
        _sync(device)
        return time.perf_counter() - t0

    for a in models:  # warm-up
        once(a)
    t = {a: [] for a in models}
    for r in range(reps):
        order = ("drt", "sliding_window") if r % 2 == 0 else ("sliding_window", "drt")
        for a in order:
            t[a].append(once(a))
    ratios = [s / d for d, s in zip(t["drt"], t["sliding_window"])]  # DRT tok/s over SW tok/s
    ntok = batch * seq_len
    return {
        "seconds": t,
        "tok_per_s": {a: ntok / statistics.median(v) for a, v in t.items()},
        "params": {a: sum(p.numel() for p in m.parameters()) for a, m in models.items()},
        "ratio_drt_over_sw": statistics.median(ratios),
        "ratios": ratios,
    }


# ----------------------------------------------------------------------------------------------
# activations saved for backward: the DRT, the sliding_window baseline, a lean reference


def saved_bytes(fn) -> int:
    """Bytes the autograd graph saves for backward while fn() runs: each distinct storage once, at
    its full size (a view saves its whole base), as drt_core.train.plan.activation_bytes counts."""
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st._cdata] = max(seen.get(st._cdata, 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


class LeanSlidingWindow(nn.Module):
    """The lean reference of the memory comparison: a plain pre-norm transformer (RMSNorm, SwiGLU, tied
    embedding, ALiBi over a causal window of `window` keys) written the usual fused way. Attention is
    F.scaled_dot_product_attention (the fused CPU / GPU kernels, which save q, k, v, the output and
    its log-sum-exp) per block of queries against a view of its window's keys, with one bias shared
    by every block and layer: no unfolded copies, no per-block masks. chunked_ce: the LM head and
    cross-entropy per `ce_chunk` positions under torch.utils.checkpoint (only the final hidden states
    are kept, not [L, V] logits). Timing is not its purpose: only what it saves for backward."""

    def __init__(self, vocab: int, dim: int, heads: int, hidden: int, layers: int, window: int,
                 block: int = 128, chunked_ce: bool = False, ce_chunk: int = 1024):
        super().__init__()
        self.H, self.d, self.window, self.block = heads, dim // heads, window, block
        self.chunked_ce, self.ce_chunk = chunked_ce, ce_chunk
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "norm1": nn.RMSNorm(dim), "qkv": nn.Linear(dim, 3 * dim, bias=False), "o": nn.Linear(dim, dim, bias=False),
            "norm2": nn.RMSNorm(dim), "gate": nn.Linear(dim, hidden, bias=False),
            "up": nn.Linear(dim, hidden, bias=False), "down": nn.Linear(hidden, dim, bias=False)})
            for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)])
        self.register_buffer("slopes", slopes, persistent=False)

    @classmethod
    def like(cls, cfg, **kw) -> "LeanSlidingWindow":
        """The reference of the same size as the repository's sliding_window model of cfg's preset."""
        from drt_core import DRTForCausalLM

        with torch.device("meta"):
            n = len(DRTForCausalLM(cfg).layers)
        return cls(cfg.vocab_size, cfg.hidden_size, cfg.num_heads, cfg.intermediate_size, n, cfg.window, **kw)

    def _bias(self, W: int, dtype, device) -> torch.Tensor:
        i = torch.arange(self.block, device=device)[:, None]
        j = torch.arange(W + self.block, device=device)[None, :]
        dist = W + i - j
        bias = -self.slopes.to(device).view(-1, 1, 1) * dist.float()
        return bias.masked_fill((dist < 0) | (dist > W), float("-inf")).to(dtype)[None]  # [1, H, block, W + block]

    def _attn(self, lay, x, bias, W):
        B, T, D = x.shape
        q, k, v = lay["qkv"](x).view(B, T, 3, self.H, self.d).permute(2, 0, 3, 1, 4).contiguous()  # [3, B, H, T, d]
        outs = []
        for a in range(0, T, self.block):
            e, k0 = min(T, a + self.block), max(0, a - W)
            # a full block takes the shared bias itself; the first blocks (and a short last one) a slice
            m = bias if (k0, e - a) == (a - W, self.block) else bias[..., : e - a, W - (a - k0): W + e - a].contiguous()
            outs.append(F.scaled_dot_product_attention(q[:, :, a:e], k[:, :, k0:e], v[:, :, k0:e],
                                                       attn_mask=m.to(q.dtype)).transpose(1, 2))
        return lay["o"](torch.cat(outs, dim=1).reshape(B, T, D))

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        W = min(self.window, ids.shape[1])
        bias = self._bias(W, x.dtype, x.device)
        for lay in self.layers:
            x = x + self._attn(lay, lay["norm1"](x), bias, W)
            h = lay["norm2"](x)
            x = x + lay["down"](F.silu(lay["gate"](h)) * lay["up"](h))
        h = self.norm(x)[:, :-1]
        tg = labels[:, 1:]
        if not self.chunked_ce:
            return F.cross_entropy((h @ self.embed.weight.T).flatten(0, 1).float(), tg.flatten())
        from torch.utils.checkpoint import checkpoint

        def part(hc, tc):
            return F.cross_entropy((hc @ self.embed.weight.T).flatten(0, 1).float(), tc.flatten(), reduction="sum")

        total = sum(checkpoint(part, h[:, a: a + self.ce_chunk], tg[:, a: a + self.ce_chunk], use_reentrant=False)
                    for a in range(0, h.shape[1], self.ce_chunk))
        return total / tg.numel()


def bench_memory(preset, seq_len, batch, device, bf16, overrides: dict | None = None) -> dict:
    """Activations saved for backward per token (KiB) in one training forward with labels of batch x
    seq_len tokens: the DRT, the sliding_window baseline, the lean reference (LeanSlidingWindow) with
    the usual cross-entropy and with a chunked one; and their ratios. bf16: under autocast."""
    from drt_core import DRTConfig

    g = torch.Generator().manual_seed(2)
    ntok = batch * seq_len
    V = DRTConfig.from_preset(preset, **(overrides or {})).vocab_size
    res = {"kib_per_token": {}, "params": {}}
    models = {a: (lambda a=a: _model(preset, a, device, **(overrides or {}))) for a in ("drt", "sliding_window")}
    for name, chunked in (("lean", False), ("lean_chunked_ce", True)):
        def make(chunked=chunked):
            torch.manual_seed(0)
            cfg = DRTConfig.from_preset(preset, arch="sliding_window", **(overrides or {}))
            return LeanSlidingWindow.like(cfg, chunked_ce=chunked).to(device)
        models[name] = make
    for name, make in models.items():
        model = make().train()
        ids = torch.randint(3, V, (batch, seq_len), generator=g).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            if isinstance(model, LeanSlidingWindow):
                n = saved_bytes(functools.partial(model, ids, ids))
            else:
                n = saved_bytes(functools.partial(model, ids, labels=ids))
        res["kib_per_token"][name] = n / ntok / 1024
        res["params"][name] = sum(p.numel() for p in model.parameters())
        del model
    k = res["kib_per_token"]
    res["ratios"] = {"drt_over_lean": k["drt"] / k["lean"], "sliding_window_over_lean": k["sliding_window"] / k["lean"],
                     "drt_over_sliding_window": k["drt"] / k["sliding_window"],
                     "drt_over_lean_chunked_ce": k["drt"] / k["lean_chunked_ce"]}
    return res


def _list(xs, fmt: str) -> str:
    return ", ".join(format(x, fmt) for x in xs)


def format_report(res: dict) -> str:
    tr, fw, mem, a = res["train"], res["forward"], res.get("memory"), res["args"]
    bf16 = "on" if res["bf16"] else "off"
    lines = [
        f"bench.train on {res['machine']}, torch {res['torch']}, bf16 autocast {bf16}",
        f"preset {a['preset']}, {a['seq_len']} tokens x batch {a['batch']}; load average at start {res['load']}",
        "",
    ]
    if tr is not None:
        lines += [
            f"train    DRT ({tr['params'] / 1e6:.2f}M params): {tr['tok_per_s']:,.0f} tok/s, "
            f"{tr['tflops']:.3g} model TFLOP/s"
            + (f", MFU {100 * tr['mfu']:.1f}% of {tr['peak_tflops']} TFLOP/s bf16" if tr["mfu"] is not None else ""),
            f"         (median of {len(tr['s_per_step'])} steps: {_list(tr['s_per_step'][:12], '.3f')}"
            f"{' ...' if len(tr['s_per_step']) > 12 else ''} s)",
            "",
        ]
    if mem is not None:
        k, r = mem["kib_per_token"], mem["ratios"]
        lines += [
            "memory   activations saved for backward, KiB per token (one training forward, saved_tensors_hooks):",
            f"         DRT {k['drt']:.1f} ({mem['params']['drt'] / 1e6:.2f}M params), sliding_window "
            f"{k['sliding_window']:.1f} ({mem['params']['sliding_window'] / 1e6:.2f}M), lean reference {k['lean']:.1f} "
            f"({mem['params']['lean'] / 1e6:.2f}M; with a chunked cross-entropy {k['lean_chunked_ce']:.1f})",
            f"         ratios: DRT / lean {r['drt_over_lean']:.2f}, "
            f"sliding_window / lean {r['sliding_window_over_lean']:.2f}, "
            f"DRT / sliding_window {r['drt_over_sliding_window']:.2f}, DRT / lean with chunked CE "
            f"{r['drt_over_lean_chunked_ce']:.2f}",
            "",
        ]
    if fw is None:
        return "\n".join(lines)
    for arch in ("drt", "sliding_window"):
        lines.append(f"forward  {arch:<15}({fw['params'][arch] / 1e6:.2f}M params): "
                     f"{fw['tok_per_s'][arch]:,.0f} tok/s")
    lines += [
        f"ratio    DRT / sliding_window forward throughput: {fw['ratio_drt_over_sw']:.3f}",
        f"         (median of {len(fw['ratios'])} interleaved pairs: {_list(fw['ratios'], '.3f')})",
    ]
    return "\n".join(lines)


def parse_overrides(items: list[str]) -> dict:
    """--set key=value pairs as DRTConfig overrides (values as JSON where they parse: 384, 1.5, true)."""
    out = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(val)
        except ValueError:
            out[key] = val
    return out


def fit_batch(preset: str, overrides: dict, seq_len: int, bf16: bool, memory_gib: float | None = None,
              max_batch: int | None = None) -> int:
    """The largest per-device batch of seq_len tokens whose estimated training memory fits the device
    (drt_core.train.plan.fit_batch_size): memory_gib, or the CUDA device's total memory."""
    from drt_core.hf_config import DRTConfig
    from drt_core.train.plan import fit_batch_size

    if memory_gib is None:
        if not torch.cuda.is_available():
            raise SystemExit("--fit-batch: no CUDA device; give --memory-gib")
        total = torch.cuda.get_device_properties(0).total_memory
    else:
        total = int(memory_gib * 1024 ** 3)
    mc = DRTConfig.from_preset(preset, **overrides)
    return fit_batch_size(mc, seq_len, total, bf16=bf16, max_batch=max_batch)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.train", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny", help="tiny | small | paper")
    p.add_argument("--seq-len", type=int, default=4032, help="tokens per sample (the training length)")
    p.add_argument("--batch", type=int, default=1, help="samples per step / forward")
    p.add_argument("--train-steps", type=int, default=3, help="timed training steps (after 1 warm-up)")
    p.add_argument("--reps", type=int, default=6, help="timed forward passes per model (interleaved)")
    p.add_argument("--bf16", default="auto", choices=["auto", "on", "off"], help="bf16 autocast")
    p.add_argument("--skip-train", action="store_true", help="only the forward comparison")
    p.add_argument("--skip-forward", action="store_true", help="only the training steps")
    p.add_argument("--skip-memory", action="store_true", help="without the activation-memory comparison")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the preset (repeatable), e.g. --set hidden_size=384")
    p.add_argument("--fit-batch", action="store_true",
                   help="print only the largest batch whose estimated training memory fits the device, and exit")
    p.add_argument("--memory-gib", type=float, default=None,
                   help="--fit-batch: the device's memory (default: the CUDA device's total memory)")
    p.add_argument("--max-batch", type=int, default=None, help="--fit-batch: at most this batch")
    p.add_argument("--seconds", type=float, default=0.0,
                   help="train for this long (at least --train-steps steps; e.g. 120 for the GPU script)")
    p.add_argument("--device", default=None, help="torch device (default: cuda when there is one, else cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)

    from drt_core.train.plan import use_bf16

    overrides = parse_overrides(args.set)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bf16 = use_bf16(args.bf16, device)
    if args.fit_batch:
        print(fit_batch(args.preset, overrides, args.seq_len, bf16, args.memory_gib, args.max_batch))
        return 0
    res = {
        "machine": machine_name(),
        "torch": torch.__version__,
        "bf16": bf16,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "args": vars(args),
    }
    res["train"] = (None if args.skip_train else
                    bench_train(args.preset, args.seq_len, args.batch, args.train_steps, device, bf16, args.seconds,
                                overrides))
    res["memory"] = (None if args.skip_memory else
                     bench_memory(args.preset, args.seq_len, args.batch, device, bf16, overrides))
    res["forward"] = (None if args.skip_forward else
                      bench_forward(args.preset, args.seq_len, args.batch, args.reps, device, bf16, overrides))
    print(json.dumps(res) if args.json else format_report(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
