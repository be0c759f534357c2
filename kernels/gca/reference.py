"""Readable PyTorch reference of Grouped Cross Attention (docs/design.md, Contract 1).

    s[z,h,m,j,n] = scale * <q[z,h,m], k[z,h,j,n]>
    p[z,h,m,j,n] = exp(s) / (sum_n' exp(s[..., n']) + (1 if softmax_one else 0))
    o[z,h,m]     = sum_j w[z,j] * sum_n p[z,h,m,j,n] * v[z,h,j,n]

Each retrieved chunk j gets its own softmax over its N keys; the K chunk outputs are then mixed by
the fusion weights w (one per (z, j), shared by heads and query rows). Differentiable through
autograd in q, k, v and w. Computation is in fp32 and the output is cast to q's dtype.
"""

from __future__ import annotations

import math

import torch


def gca_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    *,
    softmax_one: bool = False,
    scale: float | None = None,
    upcast: bool = True,
) -> torch.Tensor:
    """GCA by dense einsums.

    Args:
        q: [Z, H, M, d] queries of one query chunk.
        k, v: [Z, H, K, N, d] keys/values of the K retrieved chunks.
        w: [Z, K] fusion weights (already normalised by the caller).
        softmax_one: add 1 to each chunk's softmax denominator (an implicit zero key and value).
        scale: score scale. Default: 1/sqrt(d).
        upcast: compute in fp32 (True) or in the input dtype (used by tests as the
            "same-dtype PyTorch implementation" in the tolerance rule).
    Returns:
        o: [Z, H, M, d] in q's dtype.
    """
    _check(q, k, v, w)
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    dtype = q.dtype
    if upcast:
        q, k, v, w = q.float(), k.float(), v.float(), w.float()
    # [Z, H, K, M, N]
    s = torch.einsum("zhmd,zhjnd->zhjmn", q, k) * scale
    if softmax_one:
        # exp(s)/(sum exp(s) + 1) == softmax over [s, 0] without the extra column; the max is
        # clamped at 0 so the implicit zero logit is part of the stabilisation.
        m = s.amax(dim=-1, keepdim=True).clamp_min(0.0)
        e = torch.exp(s - m)
        p = e / (e.sum(dim=-1, keepdim=True) + torch.exp(-m))
    else:
        p = torch.softmax(s, dim=-1)
    oj = torch.einsum("zhjmn,zhjnd->zhjmd", p.to(v.dtype), v)  # [Z, H, K, M, d]
    o = torch.einsum("zhjmd,zj->zhmd", oj, w.to(oj.dtype))
    return o.to(dtype)


def gca_naive_loop(q, k, v, w, *, softmax_one: bool = False, scale: float | None = None):
    """The definition written as loops over (z, h, j): slow, fp32, for tests only."""
    Z, H, M, d = q.shape
    K = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(Z, H, M, d, dtype=torch.float32, device=q.device)
    rows = []
    for z in range(Z):
        for h in range(H):
            acc = torch.zeros(M, d, dtype=torch.float32, device=q.device)
            for j in range(K):
                s = (q[z, h].float() @ k[z, h, j].float().T) * scale  # [M, N]
                e = torch.exp(s)
                den = e.sum(-1, keepdim=True) + (1.0 if softmax_one else 0.0)
                acc = acc + w[z, j].float() * ((e / den) @ v[z, h, j].float())
            rows.append(acc)
    out = torch.stack(rows).view(Z, H, M, d)
    return out.to(q.dtype)


def _check(q, k, v, w) -> None:
    if q.dim() != 4 or k.dim() != 5 or v.shape != k.shape or w.dim() != 2:
        raise ValueError(
            "gca expects q [Z,H,M,d], k and v [Z,H,K,N,d], w [Z,K]; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, w {tuple(w.shape)}"
        )
    Z, H, M, d = q.shape
    if k.shape[0] != Z or k.shape[1] != H or k.shape[4] != d:
        raise ValueError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)} in Z, H or d")
    if w.shape != (Z, k.shape[2]):
        raise ValueError(f"w must be [Z, K] = [{Z}, {k.shape[2]}], got {tuple(w.shape)}")
    if k.shape[2] < 1 or k.shape[3] < 1 or M < 1:
        raise ValueError("gca needs K >= 1, N >= 1 and M >= 1")
