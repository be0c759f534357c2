"""Shared helpers of the GCA kernel tests: inputs, the fp32 and same-dtype references."""

from __future__ import annotations

import torch

from kernels.gca.reference import gca_reference


def make_inputs(Z, H, M, K, N, d, dtype, *, device="cpu", seed=42):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, s=1.0):
        return (torch.randn(*shape, generator=g) * s).to(device=device, dtype=dtype)

    q = rnd(Z, H, M, d)
    k = rnd(Z, H, K, N, d)
    v = rnd(Z, H, K, N, d)
    w = torch.softmax(torch.randn(Z, K, generator=g), dim=-1).to(device=device, dtype=dtype)
    do = rnd(Z, H, M, d)
    return q, k, v, w, do


def forward_backward(fn, q, k, v, w, do, **kw):
    """o and the gradients of q, k, v, w of fn, on fresh leaves."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v, w)]
    o = fn(*leaves, **kw)
    o.backward(do)
    return [o.detach()] + [t.grad for t in leaves]


def reference_results(q, k, v, w, do, *, softmax_one):
    """(high-precision reference, same-dtype reference), each [o, dq, dk, dv, dw].

    The high-precision reference is the reference op in fp32 for bf16/fp16 inputs and in fp64 for
    fp32 inputs (against an fp32 reference, a same-dtype fp32 implementation has error 0 and the 2x
    rule would say nothing).
    """
    hi = torch.float64 if q.dtype == torch.float32 else torch.float32
    ref = forward_backward(
        gca_reference, *(t.to(hi) for t in (q, k, v, w, do)), softmax_one=softmax_one, upcast=False
    )
    same = forward_backward(gca_reference, q, k, v, w, do, softmax_one=softmax_one, upcast=False)
    return ref, same
