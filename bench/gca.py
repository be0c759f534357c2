"""Benchmark of the GCA operator: `python -m bench.gca [--json]` or `drt-reader bench gca`.

Times forward, backward and decode at the paper's shapes (Z = batch x query chunks, H = 12, K = 8,
M = N = 64, d = 64, bf16) for
    triton      the fused kernels (kernels/gca/triton_gca.py), CUDA only;
    reference   the PyTorch op (kernels/gca/reference.py, fp32 compute);
    sdpa        torch.nn.functional.scaled_dot_product_attention doing the same FLOPs: Z*K
                sequences of M queries x N keys (no per-chunk fusion, no +1): a speed yardstick.
FLOPs: forward 4*Z*H*K*M*N*d (QK^T and PV); backward 2.5x forward (FlashAttention's convention);
decode uses M = 1 (--decode-m) and also reports the K/V bytes read per second.

Without CUDA only the reference runs (the interpreter is no benchmark), at a smaller Z, and the
output says so.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time

import torch
import torch.nn.functional as F

from bench.machine import cpu_model
from kernels.gca import gca_reference

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
IMPLS = ("triton", "reference", "sdpa")


def machine_name() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    name = cpu_model(platform.processor() or platform.machine())
    return f"{name}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads (no CUDA)"


def _time_ms(fn, device: torch.device, reps: int) -> float:
    """Median time of fn() in milliseconds."""
    if device.type == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=25, rep=max(reps, 100), return_mode="median"))
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def _inputs(Z, H, K, M, N, d, dtype, device, requires_grad):
    g = torch.Generator(device="cpu").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype).requires_grad_(requires_grad)

    q, k, v = rnd(Z, H, M, d), rnd(Z, H, K, N, d), rnd(Z, H, K, N, d)
    w = torch.softmax(torch.randn(Z, K, generator=g), -1).to(device=device, dtype=dtype)
    return q, k, v, w.requires_grad_(requires_grad)


def _sdpa_inputs(q, k, v):
    """The same FLOPs as GCA: each query chunk repeated for its K chunks, [Z*K, H, M|N, d]."""
    Z, H, M, d = q.shape
    K, N = k.shape[2], k.shape[3]
    qs = q.detach().unsqueeze(1).expand(Z, K, H, M, d).reshape(Z * K, H, M, d).contiguous()
    ks = k.detach().transpose(1, 2).reshape(Z * K, H, N, d).contiguous()
    vs = v.detach().transpose(1, 2).reshape(Z * K, H, N, d).contiguous()
    return [t.requires_grad_(q.requires_grad) for t in (qs, ks, vs)]


def _ops(impl: str, softmax_one: bool):
    """(forward fn taking (q, k, v, w), whether it takes SDPA-layout inputs)."""
    if impl == "triton":
        from kernels.gca.triton_gca import gca_triton

        return (lambda q, k, v, w: gca_triton(q, k, v, w, softmax_one=softmax_one)), False
    if impl == "reference":
        return (lambda q, k, v, w: gca_reference(q, k, v, w, softmax_one=softmax_one)), False
    return (lambda q, k, v, w: F.scaled_dot_product_attention(q, k, v)), True


def bench_one(impl, Z, H, K, M, N, d, dtype, device, reps, softmax_one, decode_m):
    fn, sdpa_layout = _ops(impl, softmax_one)
    rows = []
    flops_fwd = 4.0 * Z * H * K * M * N * d

    # forward + backward (training path)
    q, k, v, w = _inputs(Z, H, K, M, N, d, dtype, device, requires_grad=True)
    args = (*_sdpa_inputs(q, k, v), None) if sdpa_layout else (q, k, v, w)
    leaves = [t for t in args if t is not None]
    ms = _time_ms(lambda: fn(*args), device, reps)
    rows.append({"impl": impl, "pass": "fwd", "ms": ms, "tflops": flops_fwd / ms / 1e9})
    o = fn(*args)
    do = torch.randn_like(o)
    ms = _time_ms(functools.partial(torch.autograd.grad, o, leaves, do, retain_graph=True), device, reps)
    rows.append({"impl": impl, "pass": "bwd", "ms": ms, "tflops": 2.5 * flops_fwd / ms / 1e9})
    del o, do, q, k, v, w, args, leaves

    # decode (inference path: nothing saved)
    q, k, v, w = _inputs(Z, H, K, decode_m, N, d, dtype, device, requires_grad=False)
    args = (*_sdpa_inputs(q, k, v), None) if sdpa_layout else (q, k, v, w)
    with torch.no_grad():
        ms = _time_ms(lambda: fn(*args), device, reps)
    flops = 4.0 * Z * H * K * decode_m * N * d
    kv_bytes = 2.0 * Z * H * K * N * d * k.element_size()
    rows.append({"impl": impl, "pass": f"decode M={decode_m}", "ms": ms, "tflops": flops / ms / 1e9,
                 "gbps": kv_bytes / ms / 1e6})
    for r in rows:
        r["dtype"] = str(dtype).replace("torch.", "")
    return rows


def check_triton(Z, H, K, M, N, d, dtype, device, softmax_one) -> float:
    """Max |triton - reference| of the forward at the benchmark shape (the gate before timing)."""
    from kernels.gca.triton_gca import gca_triton

    q, k, v, w = _inputs(min(Z, 16), H, K, M, N, d, dtype, device, requires_grad=False)
    with torch.no_grad():
        a = gca_triton(q, k, v, w, softmax_one=softmax_one).float()
        b = gca_reference(q, k, v, w, softmax_one=softmax_one).float()
    return (a - b).abs().max().item()


def format_table(res: dict) -> str:
    lines = [f"GCA benchmark on {res['machine']}", res["note"], f"shapes: {res['shapes']}", ""]
    head = f"{'impl':<10} {'pass':<12} {'dtype':<9} {'ms':>10} {'TFLOP/s':>9} {'K/V GB/s':>9}"
    lines += [head, "-" * len(head)]
    for r in res["results"]:
        gb = f"{r['gbps']:.1f}" if "gbps" in r else ""
        lines.append(
            f"{r['impl']:<10} {r['pass']:<12} {r['dtype']:<9} {r['ms']:>10.3f} {r['tflops']:>9.3f} {gb:>9}"
        )
    if res.get("check"):
        gate = ", ".join(f"{k}: max|triton - reference| = {v:.2e}" for k, v in res["check"].items())
        lines += ["", "gate: " + gate]
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.gca", description=__doc__.splitlines()[0])
    p.add_argument("--z", type=int, default=None,
                   help="query chunks Z = batch x chunks (default 256 on CUDA, 8 on CPU)")
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--topk", type=int, default=8, help="retrieved chunks K")
    p.add_argument("--m", type=int, default=64, help="query rows per chunk")
    p.add_argument("--n", type=int, default=64, help="keys per retrieved chunk")
    p.add_argument("--dim", type=int, default=64, help="head dim d")
    p.add_argument("--decode-m", type=int, default=1, help="query rows of the decode pass")
    p.add_argument("--dtypes", default=None,
                   help="comma list of fp32,bf16,fp16 (default bf16 on CUDA, fp32,bf16 on CPU)")
    p.add_argument("--impls", default=None,
                   help="comma list of triton,reference,sdpa (default: all on CUDA, reference on CPU)")
    p.add_argument("--softmax-one", action="store_true", help="time softmax_one=True (GCA impls only)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions (CPU; CUDA uses do_bench)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    Z = args.z or (256 if cuda else 8)
    dtypes = (args.dtypes or ("bf16" if cuda else "fp32,bf16")).split(",")
    impls = (args.impls or ("triton,reference,sdpa" if cuda else "reference")).split(",")
    bad = [x for x in dtypes if x not in DTYPES] + [x for x in impls if x not in IMPLS]
    if bad:
        p.error(f"unknown dtype or impl: {', '.join(bad)}")
    if not cuda and "triton" in impls:
        p.error("the triton impl needs CUDA (the CPU interpreter is for tests, not timing)")
    reps = args.reps or (100 if cuda else 5)
    H, K, M, N, d = args.heads, args.topk, args.m, args.n, args.dim
    note = (
        "CUDA: triton kernels vs the reference op vs SDPA with the same FLOPs."
        if cuda
        else "No CUDA device: the reference op alone, on CPU, at a smaller Z; no Triton or GPU figures."
    )
    results, check = [], {}
    for name in dtypes:
        dtype = DTYPES[name]
        if "triton" in impls:
            check[name] = check_triton(Z, H, K, M, N, d, dtype, device, args.softmax_one)
        for impl in impls:
            results += bench_one(impl, Z, H, K, M, N, d, dtype, device, reps, args.softmax_one, args.decode_m)
    res = dict(
        machine=machine_name(),
        device=device.type,
        note=note,
        shapes=dict(Z=Z, H=H, K=K, M=M, N=N, d=d, decode_m=args.decode_m, softmax_one=args.softmax_one),
        torch=torch.__version__,
        results=results,
        check=check,
    )
    print(json.dumps(res) if args.json else format_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
