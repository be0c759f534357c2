"""Grouped Cross Attention for training without Triton (the CPU): the reference's forward, the
Triton kernels' memory.

`GCARecompute` runs gca_reference's function without an autograd graph (the same numbers up to float
rounding: the scores against every chunk, and the fused output, are single matmuls) and saves q, k,
v, w and the per-chunk log-sum-exp lse[z,h,m,j] (fp32), as the Triton training kernel does
(triton_gca.GCAFunction), instead of the graph's scores, probabilities and per-chunk outputs
([Z, H, K, M, N] and [Z, H, K, M, d] tensors: about 70 KiB a token per upper layer at D = 384).
The backward recomputes the probabilities from lse (the math of README.md, Backward):

    P_jn = exp(s_jn - lse_j)            dP'_jn = <dO, v_jn>           (dP = w_j dP')
    dw_j = sum_{h,m,n} P_jn dP'_jn      dS_jn = w_j P_jn (dP'_jn - sum_n' P_jn' dP'_jn')
    dq = scale sum_j dS_j k_j           dk_j = scale dS_j^T q         dv_j = w_j P_j^T dO

`gca(..., backend="reference")` (the CPU's "auto") uses it when a gradient is wanted.
"""

from __future__ import annotations

import math

import torch


def _scores(q, k, scale: float):
    """s [Z, H, M, K, N] = scale <q_m, k_jn>: one matmul against the K chunks' N keys side by side."""
    Z, H, K, N, d = k.shape
    return torch.matmul(q, k.reshape(Z, H, K * N, d).transpose(-1, -2)).mul_(scale).view(Z, H, q.shape[2], K, N)


def _forward(q, k, v, w, softmax_one: bool, scale: float):
    """The output [Z, H, M, d] and lse [Z, H, M, K, 1] (fp32, at least). Each query's scores against chunk j
    sit side by side ([M, K, N], the layout of one matmul against every chunk's keys), and the
    per-chunk outputs times w_j are one matmul of the weighted probabilities against every chunk's
    values: sum_j w_j P_j V_j = (P * w) V."""
    Z, H, K, N, d = k.shape
    acc = torch.promote_types(q.dtype, torch.float32)  # fp32, or fp64 for fp64 inputs (the tests)
    s = _scores(q.to(acc), k.to(acc), scale)
    m = s.amax(dim=-1, keepdim=True)
    if softmax_one:
        m = m.clamp_min(0.0)
    e = torch.exp(s - m)
    den = e.sum(dim=-1, keepdim=True)
    if softmax_one:
        den = den + torch.exp(-m)
    pw = e.div_(den).mul_(w.to(acc)[:, None, None, :, None])  # w_j P_j
    o = torch.matmul(pw.view(Z, H, -1, K * N), v.to(acc).reshape(Z, H, K * N, d))
    return o.to(q.dtype), m + torch.log(den)


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
        Z, H, K, N, d = k.shape
        acc = lse.dtype
        qf, wf, dof = q.to(acc), w.to(acc), do.to(acc)
        kf, vf = k.to(acc).reshape(Z, H, K * N, d), v.to(acc).reshape(Z, H, K * N, d)
        M = q.shape[2]
        p = _scores(qf, kf.view(Z, H, K, N, d), scale).sub_(lse).exp_()  # [Z, H, M, K, N]
        dpr = torch.matmul(dof, vf.transpose(-1, -2)).view(Z, H, M, K, N)  # dP' = <dO, v_jn>
        wj = wf[:, None, None, :, None]
        pdp = p * dpr
        dw = pdp.sum(dim=(1, 2, 4))  # [Z, K]
        dv = torch.matmul((p * wj).view(Z, H, M, K * N).transpose(-1, -2), dof)  # [Z, H, K*N, d]
        ds = p.mul_(dpr.sub_(pdp.sum(-1, keepdim=True))).mul_(wj * scale).view(Z, H, M, K * N)  # p is dS now
        del pdp, dpr
        dq = torch.matmul(ds, kf)
        dk = torch.matmul(ds.transpose(-1, -2), qf)
        return (dq.to(q.dtype), dk.view(Z, H, K, N, d).to(k.dtype), dv.view(Z, H, K, N, d).to(v.dtype),
                dw.to(w.dtype), None, None)


def gca_recompute(q, k, v, w, *, softmax_one: bool = False, scale: float | None = None) -> torch.Tensor:
    """gca_reference's output; for backward it saves what the Triton kernel saves (GCARecompute)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return GCARecompute.apply(q, k, v, w, bool(softmax_one), scale)
