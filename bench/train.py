"""Training and forward throughput: `python -m bench.train [--json]` or `drt-reader bench train`.

Two figures for a preset (default `tiny`) at the training length (4032 tokens = 64 chunks of 63):
    train     tokens/s of full DRT training steps (forward, backward, clip, AdamW), the step of
              drt_core/train.py, on random token ids (speed does not depend on the text);
    forward   tokens/s of the DRT forward against the sliding-window baseline of the same preset
              (`arch="sliding_window"`, lower + upper + 2 layers: within ~6% of DRT's parameters,
              docs/baselines.md), in eval mode without gradients. The two models are timed in
              alternating order (A B B A ...) in one process, and the ratio is taken per repetition,
              so load from other processes weighs on both sides alike; the median ratio is reported.

bf16 autocast follows drt_core.train.use_bf16 (auto: only where the CPU or GPU has native bf16).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

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
    if getattr(m.config, "tie_word_embeddings", True) and not any(n.startswith("lm_head") for n, _ in m.named_parameters()):
        matrix += D * V  # the tied head is a matmul too
    w = min(cfg.window, seq_len)
    window_keys = w * (1 - w / (2 * seq_len)) + 0.5  # mean keys per query of a causal window over seq_len
    n_self = cfg.lower_layers + sum(cfg.upper_groups)
    attn = 4 * D * (n_self * window_keys + cfg.encoder_layers * S / 2
                    + sum(cfg.upper_groups) * cfg.chunk_topk * (S - 1))
    return 3 * (2 * matrix + attn)


def bench_train(preset, seq_len, batch, steps, device, bf16, seconds: float = 0.0) -> dict:
    """Seconds per training step (after one warm-up step) of the DRT preset; with `seconds`, steps
    run until that much time has passed (at least `steps`). MFU where the device's peak is known."""
    model = _model(preset, "drt", device).train()
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
def bench_forward(preset, seq_len, batch, reps, device, bf16) -> dict:
    """Forward seconds of DRT and the sliding-window baseline, interleaved A B B A."""
    models = {a: _model(preset, a, device).eval() for a in ("drt", "sliding_window")}
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


def _list(xs, fmt: str) -> str:
    return ", ".join(format(x, fmt) for x in xs)


def format_report(res: dict) -> str:
    tr, fw, a = res["train"], res["forward"], res["args"]
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
    p.add_argument("--seconds", type=float, default=0.0,
                   help="train for this long (at least --train-steps steps; e.g. 120 for the GPU script)")
    p.add_argument("--device", default=None, help="torch device (default: cuda when there is one, else cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)

    from drt_core.train import TrainConfig, use_bf16

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bf16 = use_bf16(TrainConfig(bf16=args.bf16), device)
    res = {
        "machine": machine_name(),
        "torch": torch.__version__,
        "bf16": bf16,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "args": vars(args),
    }
    res["train"] = (None if args.skip_train else
                    bench_train(args.preset, args.seq_len, args.batch, args.train_steps, device, bf16, args.seconds))
    res["forward"] = (None if args.skip_forward else
                      bench_forward(args.preset, args.seq_len, args.batch, args.reps, device, bf16))
    print(json.dumps(res) if args.json else format_report(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
