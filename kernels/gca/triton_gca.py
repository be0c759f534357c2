"""Triton kernels of Grouped Cross Attention (docs/design.md, Contract 1; the math is in README.md here).

    s[z,h,m,j,n] = scale * <q[z,h,m], k[z,h,j,n]>
    p[z,h,m,j,n] = exp(s) / (sum_n' exp(s[..., n']) + (1 if softmax_one else 0))
    o[z,h,m]     = sum_j w[z,j] * sum_n p[z,h,m,j,n] * v[z,h,j,n]

FlashAttention-2 style (Dao, 2023; the Triton fused-attention tutorial), one softmax per retrieved
chunk, as in the DRT reference kernel (`ltriton/gca.py`, docs/spec.md §4) without its defects:

- `gca_fwd_kernel`       training forward: per chunk an online softmax in base 2, fused by w in
                         registers, fp32 accumulation; saves lse[z,h,m,j] (natural log, fp32).
- `gca_decode_kernel`    inference forward (M = 1..64 per block, any M): one key tile per chunk,
                         nothing saved.
- `gca_bwd_kernel_dkv`   one program per (chunk j, z, h): dK_j, dV_j, and delta[z,h,m,j] = <O_j, dO>,
                         which is dL/dw per row; computed as rowsum(P * dP), no extra matmul.
- `gca_bwd_kernel_dq`    dQ; reads delta, so it runs after the dK/dV kernel.
- dW = delta.sum over h and m (exact, fp32), on the host.

softmax_one starts every chunk's running max at 0 and its denominator at 1 (the implicit zero logit),
so the "+1" survives every rescale; the reference kernel starts at -inf and loses it (docs/spec.md §3.3).

The kernels are plain Python functions made into Triton kernels per call: compiled (`JITFunction`)
for CUDA tensors, interpreted (`InterpretedFunction`) for CPU tensors or when TRITON_INTERPRET=1.
So one process can run both, whatever TRITON_INTERPRET was when triton was imported. For that the
kernels call no other `@triton.jit` function (no `tl.max`/`tl.sum`: `tl.reduce` with the standard
combine functions instead) and, when interpreted, feed `tl.dot` fp32 operands (the interpreter's dot
multiplies bf16 storage as integers; bf16 x bf16 products are exact in fp32, so this is the same math).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from .reference import _check

__all__ = ["gca_triton", "GCAFunction", "gca_fwd", "gca_bwd", "gca_decode"]

# combine functions of tl.max / tl.sum; the interpreter maps these two to numpy reductions
_max_combine = tl.standard._elementwise_max
_sum_combine = tl.standard._sum_combine

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
MAX_CHUNK_LEN = 128
SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def gca_fwd_kernel(
    q, k, v, w, o, lse,  #
    sm_scale, H, M, N, K,  #
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
    SOFTMAX_ONE: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,  #
):
    i_zh = tl.program_id(0).to(tl.int64)
    i_m = tl.program_id(1)
    i_z = i_zh // H
    # base-2 exponentials: exp(x) = exp2(x * log2(e))
    qk_scale = sm_scale * 1.4426950408889634

    o_m = i_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o_d = tl.arange(0, HEAD_DIM)
    m_m = o_m < M
    p_q = q + i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
    # [BLOCK_M, HEAD_DIM]
    b_q = tl.load(p_q, mask=m_m[:, None], other=0.0)
    if UPCAST:
        b_q = b_q.to(tl.float32)
    b_o = tl.full([BLOCK_M, HEAD_DIM], 0.0, tl.float32)

    for j in range(K):
        b_w = tl.load(w + i_z * K + j).to(tl.float32)
        # running max and denominator; softmax_one is the implicit logit 0 with value 0
        if SOFTMAX_ONE:
            b_mi = tl.full([BLOCK_M], 0.0, tl.float32)
            b_li = tl.full([BLOCK_M], 1.0, tl.float32)
        else:
            b_mi = tl.full([BLOCK_M], float("-inf"), tl.float32)
            b_li = tl.full([BLOCK_M], 0.0, tl.float32)
        b_acc = tl.full([BLOCK_M, HEAD_DIM], 0.0, tl.float32)
        o_kv = (i_zh * K + j) * N * HEAD_DIM
        for n0 in range(0, N, BLOCK_N):
            o_n = n0 + tl.arange(0, BLOCK_N)
            m_n = o_n < N
            p_kv = o_kv + o_n[:, None] * HEAD_DIM + o_d[None, :]
            # [BLOCK_N, HEAD_DIM]
            b_k = tl.load(k + p_kv, mask=m_n[:, None], other=0.0)
            b_v = tl.load(v + p_kv, mask=m_n[:, None], other=0.0)
            if UPCAST:
                b_k = b_k.to(tl.float32)
                b_v = b_v.to(tl.float32)
            # [BLOCK_M, BLOCK_N]
            b_s = tl.dot(b_q, tl.trans(b_k), input_precision=DOT_PREC) * qk_scale
            b_s = tl.where(m_n[None, :], b_s, float("-inf"))
            # [BLOCK_M]
            b_mn = tl.maximum(b_mi, tl.reduce(b_s, 1, _max_combine))
            b_p = tl.exp2(b_s - b_mn[:, None])
            b_alpha = tl.exp2(b_mi - b_mn)
            b_li = b_li * b_alpha + tl.reduce(b_p, 1, _sum_combine)
            b_pv = b_p.to(v.dtype.element_ty)
            if UPCAST:
                b_pv = b_pv.to(tl.float32)
            b_acc = b_acc * b_alpha[:, None] + tl.dot(b_pv, b_v, input_precision=DOT_PREC)
            b_mi = b_mn
        b_o += (b_w / b_li)[:, None] * b_acc
        # natural-log lse of chunk j: (m + log2 l) * ln 2
        b_lse = (b_mi + tl.log2(b_li)) * 0.6931471805599453
        tl.store(lse + i_zh * M * K + o_m * K + j, b_lse, mask=m_m)

    p_o = o + i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
    tl.store(p_o, b_o.to(o.dtype.element_ty), mask=m_m[:, None])


def gca_decode_kernel(
    q, k, v, w, o,  #
    sm_scale, H, M, N, K,  #
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
    SOFTMAX_ONE: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,  #
):
    # inference: BLOCK_N >= N, so each chunk is one key tile and its softmax is exact in one pass
    tl.static_assert(BLOCK_M >= 16)
    i_zh = tl.program_id(0).to(tl.int64)
    i_m = tl.program_id(1)
    i_z = i_zh // H
    qk_scale = sm_scale * 1.4426950408889634

    o_m = i_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o_n = tl.arange(0, BLOCK_N)
    o_d = tl.arange(0, HEAD_DIM)
    m_m = o_m < M
    m_n = o_n < N
    p_q = q + i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
    # [BLOCK_M, HEAD_DIM]
    b_q = tl.load(p_q, mask=m_m[:, None], other=0.0)
    if UPCAST:
        b_q = b_q.to(tl.float32)
    b_o = tl.full([BLOCK_M, HEAD_DIM], 0.0, tl.float32)

    for j in range(K):
        b_w = tl.load(w + i_z * K + j).to(tl.float32)
        p_kv = (i_zh * K + j) * N * HEAD_DIM + o_n[:, None] * HEAD_DIM + o_d[None, :]
        # [BLOCK_N, HEAD_DIM]
        b_k = tl.load(k + p_kv, mask=m_n[:, None], other=0.0)
        b_v = tl.load(v + p_kv, mask=m_n[:, None], other=0.0)
        if UPCAST:
            b_k = b_k.to(tl.float32)
            b_v = b_v.to(tl.float32)
        # [BLOCK_M, BLOCK_N]
        b_s = tl.dot(b_q, tl.trans(b_k), input_precision=DOT_PREC) * qk_scale
        b_s = tl.where(m_n[None, :], b_s, float("-inf"))
        b_mx = tl.reduce(b_s, 1, _max_combine)
        if SOFTMAX_ONE:
            b_mx = tl.maximum(b_mx, 0.0)
        b_p = tl.exp2(b_s - b_mx[:, None])
        b_l = tl.reduce(b_p, 1, _sum_combine)
        if SOFTMAX_ONE:
            b_l += tl.exp2(-b_mx)
        b_pv = b_p.to(v.dtype.element_ty)
        if UPCAST:
            b_pv = b_pv.to(tl.float32)
        b_o += (b_w / b_l)[:, None] * tl.dot(b_pv, b_v, input_precision=DOT_PREC)

    p_o = o + i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
    tl.store(p_o, b_o.to(o.dtype.element_ty), mask=m_m[:, None])


def gca_bwd_kernel_dkv(
    q, k, v, w, do, lse, delta, dk, dv,  #
    sm_scale, H, M, N, K,  #
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
    UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,  #
):
    # one program owns the whole chunk j (BLOCK_N >= N), so delta needs no cross-program reduction
    # flat grid, j fastest: the K programs of one (z, h) share its q and dO
    i_p = tl.program_id(0).to(tl.int64)
    i_zh = i_p // K
    i_j = i_p % K
    i_z = i_zh // H
    qk_scale = sm_scale * 1.4426950408889634

    o_n = tl.arange(0, BLOCK_N)
    o_d = tl.arange(0, HEAD_DIM)
    m_n = o_n < N
    p_kv = (i_zh * K + i_j) * N * HEAD_DIM + o_n[:, None] * HEAD_DIM + o_d[None, :]
    # [BLOCK_N, HEAD_DIM]
    b_k = tl.load(k + p_kv, mask=m_n[:, None], other=0.0)
    b_v = tl.load(v + p_kv, mask=m_n[:, None], other=0.0)
    if UPCAST:
        b_k = b_k.to(tl.float32)
        b_v = b_v.to(tl.float32)
    b_w = tl.load(w + i_z * K + i_j).to(tl.float32)
    b_dk = tl.full([BLOCK_N, HEAD_DIM], 0.0, tl.float32)
    b_dv = tl.full([BLOCK_N, HEAD_DIM], 0.0, tl.float32)

    for m0 in range(0, M, BLOCK_M):
        o_m = m0 + tl.arange(0, BLOCK_M)
        m_m = o_m < M
        p_qo = i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
        # [BLOCK_M, HEAD_DIM]
        b_q = tl.load(q + p_qo, mask=m_m[:, None], other=0.0)
        b_do = tl.load(do + p_qo, mask=m_m[:, None], other=0.0)
        if UPCAST:
            b_q = b_q.to(tl.float32)
            b_do = b_do.to(tl.float32)
        # [BLOCK_M]
        p_lse = i_zh * M * K + o_m * K + i_j
        b_lse = tl.load(lse + p_lse, mask=m_m, other=0.0) * 1.4426950408889634
        # normalised probabilities of chunk j, recomputed: [BLOCK_M, BLOCK_N]
        b_s = tl.dot(b_q, tl.trans(b_k), input_precision=DOT_PREC) * qk_scale
        b_p = tl.exp2(b_s - b_lse[:, None])
        b_p = tl.where(m_m[:, None] & m_n[None, :], b_p, 0.0)
        # dP = dO V^T; delta = <O_j, dO> = sum_n P dP, in fp32
        b_dp = tl.dot(b_do, tl.trans(b_v), input_precision=DOT_PREC)
        b_delta = tl.reduce(b_p * b_dp, 1, _sum_combine)
        tl.store(delta + p_lse, b_delta, mask=m_m)
        # the gradient reaching O_j is w_j dO
        b_wp = (b_w * b_p).to(v.dtype.element_ty)
        if UPCAST:
            b_wp = b_wp.to(tl.float32)
        b_dv += tl.dot(tl.trans(b_wp), b_do, input_precision=DOT_PREC)
        b_ds = (b_w * b_p * (b_dp - b_delta[:, None])).to(k.dtype.element_ty)
        if UPCAST:
            b_ds = b_ds.to(tl.float32)
        b_dk += tl.dot(tl.trans(b_ds), b_q, input_precision=DOT_PREC)

    b_dk *= sm_scale
    tl.store(dk + p_kv, b_dk.to(dk.dtype.element_ty), mask=m_n[:, None])
    tl.store(dv + p_kv, b_dv.to(dv.dtype.element_ty), mask=m_n[:, None])


def gca_bwd_kernel_dq(
    q, k, v, w, do, lse, delta, dq,  #
    sm_scale, H, M, N, K,  #
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,  #
    UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,  #
):
    i_zh = tl.program_id(0).to(tl.int64)
    i_m = tl.program_id(1)
    i_z = i_zh // H
    qk_scale = sm_scale * 1.4426950408889634

    o_m = i_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o_d = tl.arange(0, HEAD_DIM)
    m_m = o_m < M
    p_qo = i_zh * M * HEAD_DIM + o_m[:, None] * HEAD_DIM + o_d[None, :]
    # [BLOCK_M, HEAD_DIM]
    b_q = tl.load(q + p_qo, mask=m_m[:, None], other=0.0)
    b_do = tl.load(do + p_qo, mask=m_m[:, None], other=0.0)
    if UPCAST:
        b_q = b_q.to(tl.float32)
        b_do = b_do.to(tl.float32)
    b_dq = tl.full([BLOCK_M, HEAD_DIM], 0.0, tl.float32)

    for j in range(K):
        b_w = tl.load(w + i_z * K + j).to(tl.float32)
        # [BLOCK_M]
        p_lse = i_zh * M * K + o_m * K + j
        b_lse = tl.load(lse + p_lse, mask=m_m, other=0.0) * 1.4426950408889634
        b_delta = tl.load(delta + p_lse, mask=m_m, other=0.0)
        o_kv = (i_zh * K + j) * N * HEAD_DIM
        for n0 in range(0, N, BLOCK_N):
            o_n = n0 + tl.arange(0, BLOCK_N)
            m_n = o_n < N
            p_kv = o_kv + o_n[:, None] * HEAD_DIM + o_d[None, :]
            # [BLOCK_N, HEAD_DIM]
            b_k = tl.load(k + p_kv, mask=m_n[:, None], other=0.0)
            b_v = tl.load(v + p_kv, mask=m_n[:, None], other=0.0)
            if UPCAST:
                b_k = b_k.to(tl.float32)
                b_v = b_v.to(tl.float32)
            # [BLOCK_M, BLOCK_N]
            b_s = tl.dot(b_q, tl.trans(b_k), input_precision=DOT_PREC) * qk_scale
            b_p = tl.exp2(b_s - b_lse[:, None])
            b_p = tl.where(m_m[:, None] & m_n[None, :], b_p, 0.0)
            b_dp = tl.dot(b_do, tl.trans(b_v), input_precision=DOT_PREC)
            b_ds = (b_w * b_p * (b_dp - b_delta[:, None])).to(k.dtype.element_ty)
            if UPCAST:
                b_ds = b_ds.to(tl.float32)
            b_dq += tl.dot(b_ds, b_k, input_precision=DOT_PREC)

    b_dq *= sm_scale
    tl.store(dq + p_qo, b_dq.to(dq.dtype.element_ty), mask=m_m[:, None])


# Few configs on purpose: the blocks are fixed by the shapes (see _blocks), only warps and stages
# are tuned; configs that run out of shared memory are skipped by the autotuner.
_AUTOTUNE_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (2, 3)]
_AUTOTUNE_KEY = ["HEAD_DIM", "BLOCK_M", "BLOCK_N"]


@contextlib.contextmanager
def _interpreter_rounding():
    """Make the interpreter round fp32 -> bf16 to nearest even, as the GPU does.

    triton 3.9's interpreter truncates in that cast (its `cast_impl` passes no rounding mode), which
    doubles the error of every bf16 result. Scoped to one interpreted launch; a no-op if the
    interpreter's internals differ from what this expects.
    """
    from triton.runtime import interpreter as _interp

    builder = getattr(_interp, "interpreter_builder", None)
    handle_cls = getattr(_interp, "TensorHandle", None)
    original = getattr(builder, "create_fp_trunc", None)
    if builder is None or handle_cls is None or original is None:
        yield
        return

    def create_fp_trunc(src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            x = np.asarray(src.data, dtype=np.float32)
            bits = x.view(np.uint32)
            rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
            rounded = np.where(np.isnan(x), (bits >> np.uint32(16)) | np.uint32(0x40), rounded)
            return handle_cls(rounded.astype(np.uint16), tl.bfloat16)
        return original(src, dst_type)

    builder.create_fp_trunc = create_fp_trunc
    try:
        yield
    finally:
        del builder.create_fp_trunc


class _Kernel:
    """One kernel, compiled (autotuned) for CUDA tensors or run by the Triton interpreter."""

    def __init__(self, fn):
        self.fn = fn
        self._compiled = None
        self._interpreted = None

    def launch(self, grid, *args, interpret: bool, **kwargs) -> None:
        if interpret:
            if self._interpreted is None:
                self._interpreted = InterpretedFunction(self.fn)
            with _interpreter_rounding():
                self._interpreted[grid](*args, **kwargs)
        else:
            if self._compiled is None:
                self._compiled = triton.autotune(configs=_AUTOTUNE_CONFIGS, key=_AUTOTUNE_KEY)(
                    JITFunction(self.fn)
                )
            self._compiled[grid](*args, **kwargs)


_fwd = _Kernel(gca_fwd_kernel)
_decode = _Kernel(gca_decode_kernel)
_bwd_dkv = _Kernel(gca_bwd_kernel_dkv)
_bwd_dq = _Kernel(gca_bwd_kernel_dq)


def _use_interpreter(device: torch.device) -> bool:
    return device.type == "cpu" or bool(triton.knobs.runtime.interpret)


def _dot_precision(dtype: torch.dtype) -> str:
    # fp32 inputs get fp32 products unless PyTorch itself is told to use TF32 for matmuls
    if dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return "ieee"
    return "tf32"


def _np2(x: int, lo: int = 16) -> int:
    return max(lo, triton.next_power_of_2(x))


def _blocks(kind: str, M: int, N: int, interpret: bool) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of a kernel. Interpreted blocks are small enough to exercise the ragged
    and multi-tile paths at test shapes (M = 17/64, N = 33/64)."""
    if kind == "decode":
        return min(64, _np2(M)), _np2(N)
    if kind == "dkv":
        return (32, _np2(N)) if interpret or N <= 64 else (16, _np2(N))
    if interpret:
        return 32, 32
    if kind == "fwd":
        return min(64, _np2(M)), min(64, _np2(N))
    return min(32, _np2(M)), min(64, _np2(N))  # dq


def _prep(q, k, v, w):
    _check(q, k, v, w)
    d, N = q.shape[-1], k.shape[3]
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(
            f"gca_triton supports head dims {SUPPORTED_HEAD_DIMS}, got d={d}; pad the head dim or use "
            "backend='reference'"
        )
    if N > MAX_CHUNK_LEN:
        raise ValueError(f"gca_triton supports chunks of at most {MAX_CHUNK_LEN} keys, got N={N}; "
                         "use backend='reference'")
    for name, t in (("q", q), ("k", k), ("v", v), ("w", w)):
        if t.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"gca_triton supports fp32, bf16 and fp16, got {name}.dtype={t.dtype}")
        if t.device != q.device:
            raise ValueError(f"all inputs must be on one device; q is on {q.device}, {name} on {t.device}")


def gca_fwd(q, k, v, w, *, softmax_one: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Training forward on contiguous inputs: (o [Z,H,M,d], lse [Z,H,M,K] fp32, natural log)."""
    Z, H, M, d = q.shape
    K, N = k.shape[2], k.shape[3]
    interpret = _use_interpreter(q.device)
    o = torch.empty_like(q)
    lse = torch.empty(Z, H, M, K, dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N = _blocks("fwd", M, N, interpret)
    grid = (Z * H, triton.cdiv(M, BLOCK_M))
    _fwd.launch(
        grid, q, k, v, w, o, lse, scale, H, M, N, K,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, SOFTMAX_ONE=softmax_one,
        UPCAST=interpret, DOT_PREC=_dot_precision(q.dtype), interpret=interpret,
    )
    return o, lse


def gca_decode(q, k, v, w, *, softmax_one: bool, scale: float) -> torch.Tensor:
    """Inference forward on contiguous inputs (nothing saved): o [Z,H,M,d]."""
    Z, H, M, d = q.shape
    K, N = k.shape[2], k.shape[3]
    interpret = _use_interpreter(q.device)
    o = torch.empty_like(q)
    BLOCK_M, BLOCK_N = _blocks("decode", M, N, interpret)
    grid = (Z * H, triton.cdiv(M, BLOCK_M))
    _decode.launch(
        grid, q, k, v, w, o, scale, H, M, N, K,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, SOFTMAX_ONE=softmax_one,
        UPCAST=interpret, DOT_PREC=_dot_precision(q.dtype), interpret=interpret,
    )
    return o


def gca_bwd(q, k, v, w, do, lse, *, scale: float):
    """Backward on contiguous inputs: (dq, dk, dv, dw, delta); dw and delta in fp32."""
    Z, H, M, d = q.shape
    K, N = k.shape[2], k.shape[3]
    interpret = _use_interpreter(q.device)
    dq = torch.empty_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    delta = torch.empty(Z, H, M, K, dtype=torch.float32, device=q.device)
    common = dict(UPCAST=interpret, DOT_PREC=_dot_precision(q.dtype), interpret=interpret)
    BLOCK_M, BLOCK_N = _blocks("dkv", M, N, interpret)
    _bwd_dkv.launch(
        (Z * H * K,), q, k, v, w, do, lse, delta, dk, dv, scale, H, M, N, K,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, **common,
    )
    BLOCK_M, BLOCK_N = _blocks("dq", M, N, interpret)
    _bwd_dq.launch(
        (Z * H, triton.cdiv(M, BLOCK_M)), q, k, v, w, do, lse, delta, dq, scale, H, M, N, K,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, **common,
    )
    dw = delta.sum(dim=(1, 2))
    return dq, dk, dv, dw, delta


class GCAFunction(torch.autograd.Function):
    """Training op: Triton forward saving the per-chunk lse, Triton backward (dK/dV + delta, dQ)."""

    @staticmethod
    def forward(ctx, q, k, v, w, softmax_one: bool, scale: float):
        o, lse = gca_fwd(q, k, v, w, softmax_one=softmax_one, scale=scale)
        ctx.save_for_backward(q, k, v, w, lse)
        ctx.scale = scale
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, w, lse = ctx.saved_tensors
        dq, dk, dv, dw, _ = gca_bwd(q, k, v, w, do.contiguous(), lse, scale=ctx.scale)
        return dq, dk, dv, dw.to(w.dtype), None, None


def gca_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    *,
    softmax_one: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Grouped Cross Attention by the Triton kernels.

    Args:
        q (torch.Tensor): [Z, H, M, d] queries of one query chunk, any M >= 1.
        k (torch.Tensor): [Z, H, K, N, d] keys of the K retrieved chunks, K >= 1, N <= 128.
        v (torch.Tensor): [Z, H, K, N, d] values, same shape as k.
        w (torch.Tensor): [Z, K] fusion weights (normalised by the caller).
        softmax_one (bool, Optional): add 1 to each chunk's softmax denominator. Default: False.
        scale (float, Optional): score scale. Default: 1/sqrt(d).
    Returns:
        o (torch.Tensor): [Z, H, M, d] in q's dtype.

    d must be 16, 32, 64 or 128 and the dtypes fp32, bf16 or fp16 (k and v are cast to q's dtype).
    When no input requires grad (or grad is disabled) the inference kernel runs and nothing is saved;
    otherwise the training kernels run through `GCAFunction`. CPU tensors run in the Triton
    interpreter (slow; for tests), CUDA tensors compiled.
    """
    _prep(q, k, v, w)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if k.dtype != q.dtype:
        k = k.to(q.dtype)
    if v.dtype != q.dtype:
        v = v.to(q.dtype)
    q, k, v, w = q.contiguous(), k.contiguous(), v.contiguous(), w.contiguous()
    if q.numel() == 0:
        # Z = 0 or H = 0: nothing to launch
        return q.new_zeros(q.shape)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, w))
    if not needs_grad:
        return gca_decode(q, k, v, w, softmax_one=softmax_one, scale=scale)
    return GCAFunction.apply(q, k, v, w, bool(softmax_one), scale)
