"""The PyTorch reference op (kernels/gca/reference.py) against the loop form of the definition."""

from __future__ import annotations

import math

import pytest
import torch

from kernels.gca import gca, gca_naive_loop, gca_reference
from tests.kernels._gca_cases import forward_backward, make_inputs

NAMES = ("o", "dq", "dk", "dv", "dw")
SHAPES = [(2, 3, 17, 3, 33, 24), (1, 2, 1, 1, 5, 8), (3, 1, 64, 8, 64, 16), (1, 1, 7, 2, 1, 4)]


@pytest.mark.parametrize("softmax_one", [False, True])
@pytest.mark.parametrize(("Z", "H", "M", "K", "N", "d"), SHAPES, ids=lambda x: str(x))
def test_fp32_matches_loop(Z, H, M, K, N, d, softmax_one):
    q, k, v, w, do = make_inputs(Z, H, M, K, N, d, torch.float32)
    ref = forward_backward(gca_reference, q, k, v, w, do, softmax_one=softmax_one)
    loop = forward_backward(gca_naive_loop, q, k, v, w, do, softmax_one=softmax_one)
    for name, a, b in zip(NAMES, ref, loop):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("softmax_one", [False, True])
@pytest.mark.parametrize(("Z", "H", "M", "K", "N", "d"), SHAPES[:2], ids=lambda x: str(x))
def test_bf16(Z, H, M, K, N, d, softmax_one):
    """upcast=True computes in fp32 (one rounding at the end); upcast=False stays in bf16."""
    q, k, v, w, do = make_inputs(Z, H, M, K, N, d, torch.bfloat16)
    loop = forward_backward(gca_naive_loop, q.float(), k.float(), v.float(), w.float(), do.float(),
                            softmax_one=softmax_one)
    up = forward_backward(gca_reference, q, k, v, w, do, softmax_one=softmax_one)
    low = forward_backward(gca_reference, q, k, v, w, do, softmax_one=softmax_one, upcast=False)
    for name, l32, a, b in zip(NAMES, loop, up, low):
        assert a.dtype == b.dtype == torch.bfloat16, name
        torch.testing.assert_close(a.float(), l32, atol=1e-2, rtol=1e-2, msg=name)
        torch.testing.assert_close(b.float(), l32, atol=6e-2, rtol=6e-2, msg=name)


def test_softmax_one_is_a_zero_key_and_value():
    """softmax_one == plain softmax over the chunk plus one key and value of zeros (docs/spec.md §3.3)."""
    q, k, v, w, _ = make_inputs(2, 2, 9, 3, 11, 16, torch.float32)
    zero = torch.zeros(2, 2, 3, 1, 16)
    one = gca_reference(q, k, v, w, softmax_one=True)
    padded = gca_reference(q, torch.cat([k, zero], 3), torch.cat([v, zero], 3), w, softmax_one=False)
    torch.testing.assert_close(one, padded, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shift", [-200.0, 200.0])
def test_softmax_one_large_logits(shift):
    """Stable for large logits of either sign: -> plain softmax for s >> 0 and -> 0 for s << 0."""
    d = 8
    q, k, v, w, _ = make_inputs(1, 2, 5, 2, 7, d, torch.float32)
    # s = <q, k> / sqrt(d) = shift + O(1)
    q = 1.0 + 0.1 * q
    k = shift / math.sqrt(d) + 0.1 * k
    one = gca_reference(q, k, v, w, softmax_one=True)
    plain = gca_reference(q, k, v, w, softmax_one=False)
    assert torch.isfinite(one).all() and torch.isfinite(plain).all()
    if shift > 0:
        torch.testing.assert_close(one, plain, atol=1e-6, rtol=1e-5)
    else:
        assert one.abs().max() < 1e-6 < plain.abs().max()


def test_output_dtype_and_default_scale():
    q, k, v, w, _ = make_inputs(1, 1, 3, 2, 4, 16, torch.bfloat16)
    assert gca_reference(q, k, v, w).dtype == torch.bfloat16
    a = gca_reference(q.float(), k.float(), v.float(), w.float())
    b = gca_reference(q.float(), k.float(), v.float(), w.float(), scale=1 / 4)
    torch.testing.assert_close(a, b)


def test_dispatch_reference_backend():
    q, k, v, w, _ = make_inputs(1, 2, 3, 2, 4, 16, torch.float32)
    torch.testing.assert_close(gca(q, k, v, w, backend="reference"), gca_reference(q, k, v, w))


@pytest.mark.parametrize(
    ("q", "k", "v", "w", "match"),
    [
        ((1, 2, 3, 8), (1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 3), "w must be"),
        ((1, 2, 3, 8), (1, 2, 2, 4, 8), (1, 2, 2, 5, 8), (1, 2), "gca expects"),
        ((1, 2, 3), (1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 2), "gca expects"),
        ((1, 2, 3, 8), (1, 3, 2, 4, 8), (1, 3, 2, 4, 8), (1, 2), "does not match"),
        ((2, 2, 3, 8), (1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 2), "does not match"),
        ((1, 2, 3, 8), (1, 2, 2, 4, 6), (1, 2, 2, 4, 6), (1, 2), "does not match"),
        ((1, 2, 3, 8), (1, 2, 0, 4, 8), (1, 2, 0, 4, 8), (1, 0), "K >= 1"),
        ((1, 2, 0, 8), (1, 2, 2, 4, 8), (1, 2, 2, 4, 8), (1, 2), "M >= 1"),
    ],
)
def test_input_validation(q, k, v, w, match):
    with pytest.raises(ValueError, match=match):
        gca_reference(torch.zeros(q), torch.zeros(k), torch.zeros(v), torch.zeros(w))
