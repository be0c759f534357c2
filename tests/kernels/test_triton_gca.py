"""The Triton GCA kernels (kernels/gca/triton_gca.py) against the reference op.

CPU tests run the kernels in the Triton interpreter. The training path (forward + the backward of
q, k, v, w) is checked over the full cross product dtype {fp32, bf16} x K {1, 3, 8} x M {1, 17, 64}
x N {33, 64} x d {32, 64} x softmax_one {off, on} at Z = H = 2 (144 cases, about a minute on two
cores): the interpreted blocks are 32 x 32, so M = 17 / N = 33 are ragged single tiles and
M = N = 64 take two tiles, with the online softmax carried across them.

Tolerance (kernels/testing.py): error against a high-precision reference (fp32 for bf16/fp16
inputs, fp64 for fp32 inputs) at most 2x the error of the same-dtype PyTorch op
(`gca_reference(..., upcast=False)`), dW included; fp32 has a tiny absolute floor.

`-m gpu` runs the same checks compiled on CUDA at the paper's shapes (Z=256, H=12, K=8, M=N=64,
d=64, bf16) and at a few ragged ones.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import triton.language as tl

from kernels.gca import gca, gca_reference, resolve_backend
from kernels.gca import triton_gca
from kernels.gca.triton_gca import gca_triton
from kernels.testing import assert_close_2x
from tests.kernels._gca_cases import forward_backward, make_inputs, reference_results

NAMES = ("o", "dq", "dk", "dv", "dw")


def check_training(Z, H, M, K, N, d, dtype, softmax_one, device="cpu"):
    q, k, v, w, do = make_inputs(Z, H, M, K, N, d, dtype, device=device)
    tri = forward_backward(gca_triton, q, k, v, w, do, softmax_one=softmax_one)
    ref, same = reference_results(q, k, v, w, do, softmax_one=softmax_one)
    for name, r, t, s in zip(NAMES, ref, tri, same):
        assert t.dtype == s.dtype, name
        assert_close_2x(name, r, t, s)


def check_decode(Z, H, M, K, N, d, dtype, softmax_one, device="cpu"):
    q, k, v, w, _ = make_inputs(Z, H, M, K, N, d, dtype, device=device)
    hi = torch.float64 if dtype == torch.float32 else torch.float32
    with torch.no_grad():
        tri = gca_triton(q, k, v, w, softmax_one=softmax_one)
        ref = gca_reference(*(t.to(hi) for t in (q, k, v, w)), softmax_one=softmax_one, upcast=False)
        same = gca_reference(q, k, v, w, softmax_one=softmax_one, upcast=False)
    assert tri.grad_fn is None and tri.dtype == dtype
    assert_close_2x("o", ref, tri, same)


TRAIN_CASES = list(
    itertools.product(
        (torch.float32, torch.bfloat16), (1, 3, 8), (1, 17, 64), (33, 64), (32, 64), (False, True)
    )
)


@pytest.mark.parametrize(
    ("dtype", "K", "M", "N", "d", "softmax_one"),
    TRAIN_CASES,
    ids=[f"{str(c[0])[6:]}-K{c[1]}-M{c[2]}-N{c[3]}-D{c[4]}-one{int(c[5])}" for c in TRAIN_CASES],
)
def test_training(nan_empty, dtype, K, M, N, d, softmax_one):
    check_training(2, 2, M, K, N, d, dtype, softmax_one)


@pytest.mark.parametrize(
    ("M", "K", "N", "d", "softmax_one"),
    [(5, 2, 16, 16, True), (64, 3, 128, 128, False), (100, 2, 65, 32, True), (3, 1, 1, 16, False)],
    ids=lambda x: str(x),
)
def test_training_fp16_and_edge_shapes(nan_empty, M, K, N, d, softmax_one):
    """fp16; d = 16 and 128; N = 1, 65 and 128; M > 64 (several query blocks)."""
    check_training(1, 2, M, K, N, d, torch.float16, softmax_one)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_all_m(nan_empty, dtype):
    """The inference kernel for every M from 1 to 64 (one query block of 16, 32 or 64 rows)."""
    for M in range(1, 65):
        check_decode(1, 2, M, 3, 33, 32, dtype, softmax_one=M % 2 == 1)


@pytest.mark.parametrize(
    ("M", "K", "N", "d", "dtype"),
    [(64, 8, 64, 64, torch.bfloat16), (130, 1, 128, 128, torch.float16), (1, 5, 63, 64, torch.float32)],
    ids=lambda x: str(x),
)
def test_decode_shapes(nan_empty, M, K, N, d, dtype):
    check_decode(2, 2, M, K, N, d, dtype, softmax_one=True)


def test_inference_path_saves_nothing(monkeypatch):
    """No grad needed -> the decode kernel; grad needed -> the training kernels."""
    q, k, v, w, _ = make_inputs(1, 1, 4, 2, 16, 16, torch.float32)
    calls = []
    real_fwd, real_decode = triton_gca.gca_fwd, triton_gca.gca_decode
    def spy(name, real):
        return lambda *a, **kw: calls.append(name) or real(*a, **kw)

    monkeypatch.setattr(triton_gca, "gca_fwd", spy("fwd", real_fwd))
    monkeypatch.setattr(triton_gca, "gca_decode", spy("decode", real_decode))
    o = gca_triton(q, k, v, w)
    assert calls == ["decode"] and o.grad_fn is None
    qg = q.clone().requires_grad_(True)
    with torch.no_grad():
        gca_triton(qg, k, v, w)
    assert calls == ["decode", "decode"]
    o = gca_triton(qg, k, v, w)
    assert calls == ["decode", "decode", "fwd"] and o.grad_fn is not None


def test_non_contiguous_and_mixed_dtypes():
    """Strided views are made contiguous; k/v in another dtype are cast to q's; w may be fp32."""
    q, k, v, w, do = make_inputs(2, 3, 17, 3, 33, 32, torch.bfloat16)
    qt = q.transpose(0, 1).contiguous().transpose(0, 1)  # same values, non-contiguous
    kt = k.float().transpose(2, 3).contiguous().transpose(2, 3)
    assert not qt.is_contiguous() and not kt.is_contiguous()
    wf = w.float()
    tri = forward_backward(gca_triton, qt, kt, v, wf, do)
    ref = forward_backward(gca_reference, q.float(), k.float(), v.float(), wf, do.float())
    assert tri[0].dtype == torch.bfloat16 and tri[2].dtype == torch.float32 and tri[4].dtype == torch.float32
    for name, r, t in zip(NAMES, ref, tri):
        torch.testing.assert_close(t.float(), r, atol=3e-2, rtol=3e-2, msg=name)


def test_scale_argument():
    q, k, v, w, do = make_inputs(1, 2, 9, 2, 20, 32, torch.float32)
    tri = forward_backward(gca_triton, q, k, v, w, do, scale=0.3, softmax_one=True)
    ref = forward_backward(gca_reference, q, k, v, w, do, scale=0.3, softmax_one=True)
    for name, r, t in zip(NAMES, ref, tri):
        torch.testing.assert_close(t, r, atol=2e-5, rtol=2e-5, msg=name)


def test_softmax_one_survives_rescaling():
    """Regression: the reference Triton kernel (ltriton/gca.py, docs/spec.md §3.3) starts each chunk's
    running max at -inf and its denominator at sm_n = 1; the first rescale multiplies the denominator
    by exp2(-inf - m) = 0, so the "+1" of softmax_one is wiped out and the kernel computes plain
    softmax whatever the flag says. Ours starts at max 0 and denominator 1.

    All logits here are about -8, so softmax_one puts almost all mass on the implicit zero slot
    (output near 0) while plain softmax averages the values (output of order 0.1-1)."""
    Z, H, M, K, N, d = 1, 2, 40, 3, 50, 32
    g = torch.Generator().manual_seed(0)
    q = torch.ones(Z, H, M, d) + 0.1 * torch.randn(Z, H, M, d, generator=g)
    # <q, k> / sqrt(d) = -8 for q = 1, k = -8 / sqrt(d)
    k = -8.0 / math.sqrt(d) * torch.ones(Z, H, K, N, d) + 0.05 * torch.randn(Z, H, K, N, d, generator=g)
    v = torch.randn(Z, H, K, N, d, generator=g) + 1.0
    w = torch.softmax(torch.randn(Z, K, generator=g), -1)
    do = torch.randn(Z, H, M, d, generator=g)
    s = torch.einsum("zhmd,zhjnd->zhjmn", q, k) / math.sqrt(d)
    assert s.max() < -5  # the regime where the +1 dominates
    ref_one = forward_backward(gca_reference, q, k, v, w, do, softmax_one=True)
    ref_plain = forward_backward(gca_reference, q, k, v, w, do, softmax_one=False)
    assert ref_one[0].abs().max() < 0.05 < ref_plain[0].abs().mean()
    tri = forward_backward(gca_triton, q, k, v, w, do, softmax_one=True)
    for name, r, t in zip(NAMES, ref_one, tri):
        torch.testing.assert_close(t, r, atol=1e-5, rtol=1e-4, msg=name)
    with torch.no_grad():
        dec = gca_triton(q, k, v, w, softmax_one=True)
    torch.testing.assert_close(dec, ref_one[0], atol=1e-6, rtol=1e-4)


def test_input_validation():
    q, k, v, w, _ = make_inputs(1, 2, 4, 2, 16, 16, torch.float32)
    with pytest.raises(ValueError, match="head dims"):
        gca_triton(q[..., :12], k[..., :12], v[..., :12], w)
    big = torch.zeros(1, 2, 2, 129, 16)
    with pytest.raises(ValueError, match="at most 128"):
        gca_triton(q, big, big, w)
    with pytest.raises(ValueError, match="fp32, bf16 and fp16"):
        gca_triton(q.double(), k.double(), v.double(), w.double())
    with pytest.raises(ValueError, match="w must be"):
        gca_triton(q, k, v, w[:, :1])
    empty = gca_triton(q[:0], k[:0], v[:0], w[:0])
    assert empty.shape == (0, 2, 4, 16)


def test_resolve_backend(interpret, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_backend("auto", cpu) == "triton"
    assert resolve_backend("auto", cuda) == "triton"
    monkeypatch.delenv("TRITON_INTERPRET")
    assert resolve_backend("auto", cpu) == "reference"
    assert resolve_backend("auto", cuda) == "triton"
    assert resolve_backend("triton", cpu) == "triton"
    assert resolve_backend("reference", cuda) == "reference"
    with pytest.raises(ValueError, match="backend must be"):
        resolve_backend("flash", cpu)


def test_gca_auto_runs_triton_when_interpreting(interpret, monkeypatch):
    q, k, v, w, do = make_inputs(1, 2, 17, 3, 33, 32, torch.float32)
    called = []
    real = triton_gca.gca_triton
    monkeypatch.setattr(triton_gca, "gca_triton", lambda *a, **kw: called.append(1) or real(*a, **kw))
    tri = forward_backward(gca, q, k, v, w, do, softmax_one=True, backend="auto")
    assert called == [1]
    ref = forward_backward(gca_reference, q, k, v, w, do, softmax_one=True)
    for name, r, t in zip(NAMES, ref, tri):
        torch.testing.assert_close(t, r, atol=2e-5, rtol=2e-5, msg=name)


def _cast_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o).to(tl.bfloat16))


def test_interpreter_rounds_bf16_to_nearest_even():
    """Regression: triton 3.9's interpreter casts fp32 -> bf16 by truncation (its cast_impl passes no
    rounding mode), where the GPU rounds to nearest even; every bf16 output of the interpreted
    kernels then had up to 1 ulp of error and failed the 2x rule. `_interpreter_rounding` patches
    the cast during our launches: bit-exact with torch's fp32 -> bf16, inf and NaN included."""
    x = torch.randn(4096) * 100
    x[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.4e38])
    y = torch.empty(4096, dtype=torch.bfloat16)
    triton_gca._Kernel(_cast_kernel).launch((1,), x, y, BLOCK=4096, interpret=True)
    ref = x.to(torch.bfloat16)
    assert torch.isnan(y[0])
    assert torch.equal(y[1:].view(torch.int16), ref[1:].view(torch.int16))


_TL_PTR = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32"}
SM80_SHARED = 166912  # bytes of shared memory a block may use on an A100 (the H100 has more)
# the shapes of the CUDA tests below (PAPER, GPU_RAGGED), compiled here with the GPU's own blocks
GPU_SHAPES = [(torch.bfloat16, 64, 64, 64), (torch.bfloat16, 17, 33, 32), (torch.bfloat16, 1, 63, 128),
              (torch.float16, 100, 128, 16), (torch.float32, 64, 64, 64)]


@pytest.mark.parametrize(("dtype", "M", "N", "d"), GPU_SHAPES, ids=lambda x: str(x))
def test_gpu_block_choices_compile_for_cuda(dtype, M, N, d, tmp_path, monkeypatch):
    """The compiled path, which the interpreter never sees (its blocks are 32 x 32 and it upcasts):
    each kernel with the blocks, head dim, dtype and dot precision that the CUDA launch picks for
    these shapes (_blocks(..., interpret=False), _dot_precision) goes through Triton's CUDA pipeline
    down to a cubin for sm_80 (triton's bundled ptxas), no GPU needed, in the autotuner's smallest
    config, whose shared memory must fit an A100's. Catches what the interpreter tolerates and the
    compiler does not (loop-carried types, dot shapes, globals, block sizes)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    scalars = dict(sm_scale="fp32", H="i32", M="i32", N="i32", K="i32")
    cases = [
        (triton_gca.gca_fwd_kernel, "fwd", dict(SOFTMAX_ONE=True)),
        (triton_gca.gca_decode_kernel, "decode", dict(SOFTMAX_ONE=False)),
        (triton_gca.gca_bwd_kernel_dkv, "dkv", {}),
        (triton_gca.gca_bwd_kernel_dq, "dq", {}),
    ]
    smallest = min(triton_gca._AUTOTUNE_CONFIGS, key=lambda c: (c.num_warps, c.num_stages))
    for fn, kind, extra in cases:
        block_m, block_n = triton_gca._blocks(kind, M, N, interpret=False)
        jf = JITFunction(fn)
        signature = {}
        for name in jf.arg_names:
            if name in scalars:
                signature[name] = scalars[name]
            elif name.isupper():
                signature[name] = "constexpr"
            else:
                signature[name] = "*fp32" if name in ("lse", "delta") else _TL_PTR[dtype]
        constexprs = dict(HEAD_DIM=d, UPCAST=False, DOT_PREC=triton_gca._dot_precision(dtype),
                          BLOCK_M=block_m, BLOCK_N=block_n, **extra)
        kernel = triton.compile(
            ASTSource(fn=jf, signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", 80, 32),
            options=dict(num_warps=smallest.num_warps, num_stages=smallest.num_stages),
        )
        assert kernel.asm.get("cubin"), (fn.__name__, block_m, block_n)
        assert kernel.metadata.shared <= SM80_SHARED, (fn.__name__, block_m, block_n, kernel.metadata.shared)


# ----------------------------------------------------------------------------------------------
# CUDA (compiled kernels): pytest -m gpu

PAPER = dict(Z=256, H=12, M=64, K=8, N=64, d=64)


@pytest.mark.gpu
@pytest.mark.parametrize("softmax_one", [False, True])
def test_gpu_training_paper_shapes(softmax_one):
    p = PAPER
    check_training(p["Z"], p["H"], p["M"], p["K"], p["N"], p["d"], torch.bfloat16, softmax_one, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 2, 17, 64])
def test_gpu_decode_paper_shapes(M):
    p = PAPER
    check_decode(p["Z"], p["H"], M, p["K"], p["N"], p["d"], torch.bfloat16, softmax_one=True, device="cuda")


GPU_RAGGED = [
    (torch.bfloat16, 3, 17, 33, 32, True),
    (torch.bfloat16, 1, 1, 63, 128, False),
    (torch.float16, 5, 100, 128, 16, True),
    (torch.float32, 8, 64, 64, 64, False),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "K", "M", "N", "d", "softmax_one"), GPU_RAGGED, ids=lambda x: str(x))
def test_gpu_training_ragged(dtype, K, M, N, d, softmax_one):
    check_training(4, 3, M, K, N, d, dtype, softmax_one, device="cuda")
    check_decode(4, 3, M, K, N, d, dtype, softmax_one, device="cuda")
