"""kernels/gca/recompute.py, the CPU training path of gca (what `gca(backend="reference")` runs when
a gradient is wanted): the reference's output and gradients, within float rounding, on odd sizes,
both softmaxes, a zero fusion weight, non-contiguous keys (the model's gathered memory), bf16."""

from __future__ import annotations

import pytest
import torch

from kernels.gca import gca
from kernels.gca.recompute import gca_recompute
from kernels.gca.reference import gca_reference
from tests.kernels._gca_cases import forward_backward, make_inputs


@pytest.mark.parametrize("softmax_one", [True, False])
@pytest.mark.parametrize("shape", [(3, 2, 5, 3, 7, 16), (1, 1, 1, 1, 1, 8), (2, 3, 64, 4, 63, 64)])
def test_recompute_equals_the_reference(shape, softmax_one):
    q, k, v, w, do = make_inputs(*shape, torch.float64, seed=7)
    w[:, -1] = 0.0  # an unused pick: weight 0, its keys and values get no gradient
    want = forward_backward(gca_reference, q, k, v, w, do, softmax_one=softmax_one, upcast=False)  # in fp64
    # the model's keys are a gathered, transposed view ([Z, K, H, N, d] -> [Z, H, K, N, d])
    kt = k.transpose(1, 2).contiguous().transpose(1, 2)
    got = forward_backward(gca_recompute, q, kt, v, w, do, softmax_one=softmax_one)
    for name, a, b in zip(("o", "dq", "dk", "dv", "dw"), got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-9, msg=name)
    assert not got[2][:, :, -1].any() and not got[3][:, :, -1].any()


def test_gca_dispatches_to_it_only_with_a_gradient_and_bf16_stays_close():
    q, k, v, w, do = make_inputs(2, 2, 9, 3, 11, 32, torch.float32, seed=3)
    with torch.no_grad():  # inference: the reference itself, bit for bit
        assert torch.equal(gca(q, k, v, w, softmax_one=True, backend="reference"),
                           gca_reference(q, k, v, w, softmax_one=True))
    qb, kb, vb, wb, dob = (t.to(torch.bfloat16) for t in (q, k, v, w, do))
    got = forward_backward(gca, qb, kb, vb, wb, dob, softmax_one=True, backend="reference")
    want = forward_backward(gca_reference, q, k, v, w, do, softmax_one=True)
    for a, b in zip(got, want):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), b, atol=3e-2, rtol=3e-2)
