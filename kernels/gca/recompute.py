"""Grouped Cross Attention for training without Triton (the CPU): the reference's forward, the
Triton kernels' memory.

`GCARecompute` runs gca_reference's forward without an autograd graph (the same numbers, bit for bit)
and saves q, k, v, w and the per-chunk log-sum-exp lse[z,h,j,m] (fp32), as the Triton training
kernel does (triton_gca.GCAFunction), instead of the graph's scores, probabilities and per-chunk
outputs ([Z, H, K, M, N] and [Z, H, K, M, d] tensors: about 70 KiB a token per upper layer at
D = 384). The backward recomputes the probabilities from lse (the math of README.md, Backward):

    P_jn = exp(s_jn - lse_j)            dP'_jn = <dO, v_jn>           (dP = w_j dP')
    dw_j = sum_{h,m,n} P_jn dP'_jn      dS_jn = w_j P_jn (dP'_jn - sum_n' P_jn' dP'_jn')
    dq = scale sum_j dS_j k_j           dk_j = scale dS_j^T q         dv_j = w_j P_j^T dO

`gca(..., backend="reference")` (the CPU's "auto") uses it when a gradient is wanted.
"""

from __future__ import annotations

import math

import torch


def _forward(q, k, v, w, softmax_one: bool, scale: float):
    """gca_reference's forward, op for op (fp32), returning the output and lse [Z, H, K, M, 1]."""
    dtype = q.dtype
    q, k, v, w = q.float(), k.float(), v.float(), w.float()
    s = torch.einsum("zhmd,zhjnd->zhjmn", q, k) * scale
    if softmax_one:
        m = s.amax(dim=-1, keepdim=True).clamp_min(0.0)
        e = torch.exp(s - m)
        den = e.sum(dim=-1, keepdim=True) + torch.exp(-m)
        p = e / den
    else:
        m = s.amax(dim=-1, keepdim=True)
        e = torch.exp(s - m)
        den = e.sum(dim=-1, keepdim=True)
        p = torch.softmax(s, dim=-1)
    oj = torch.einsum("zhjmn,zhjnd->zhjmd", p.to(v.dtype), v)
    o = torch.einsum("zhjmd,zj->zhmd", oj, w.to(oj.dtype))
    return o.to(dtype), m + torch.log(den)


class GCARecompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, w, softmax_one: bool, scale: float):
        with torch.no_grad():
            o, lse = _forward(q, k, v, w, softmax_one, scale)
        ctx.save_for_backward(q, k, v, w, lse)
        ctx.scale = scale
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, w, lse = ctx.saved_tensors
        scale = ctx.scale
        qf, kf, vf, wf, dof = q.float(), k.float(), v.float(), w.float(), do.float()
        p = torch.einsum("zhmd,zhjnd->zhjmn", qf, kf).mul_(scale).sub_(lse).exp_()  # [Z, H, K, M, N]
        dpr = torch.einsum("zhmd,zhjnd->zhjmn", dof, vf)  # dP' = <dO, v>
        wj = wf[:, None, :, None, None]
        dv = torch.einsum("zhjmn,zhmd->zhjnd", p, dof).mul_(wj)
        pdp = p * dpr
        dw = pdp.sum(dim=(1, 3, 4))  # [Z, K]
        ds = p.mul_(dpr.sub_(pdp.sum(-1, keepdim=True))).mul_(wj * scale)  # p is dS now
        del pdp, dpr
        dq = torch.einsum("zhjmn,zhjnd->zhmd", ds, kf)
        dk = torch.einsum("zhjmn,zhmd->zhjnd", ds, qf)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dw.to(w.dtype), None, None


def gca_recompute(q, k, v, w, *, softmax_one: bool = False, scale: float | None = None) -> torch.Tensor:
    """gca_reference's output; for backward it saves what the Triton kernel saves (GCARecompute)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return GCARecompute.apply(q, k, v, w, bool(softmax_one), scale)
