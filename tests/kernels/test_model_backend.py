"""A tiny DRT training step gives the same loss and gradients with the Triton GCA kernels
(interpreted on CPU) as with the PyTorch reference op."""

from __future__ import annotations

import torch

from drt_core import DRTConfig, DRTForCausalLM
from kernels.gca import triton_gca

TINY = dict(
    hidden_size=64, num_heads=2, intermediate_size=128, vocab_size=96, lower_layers=1, encoder_layers=1,
    upper_groups=[1], window=64, chunk_topk=2,
)


def _step(backend: str, state: dict | None, ids: torch.Tensor):
    torch.manual_seed(0)
    model = DRTForCausalLM(DRTConfig.from_preset("tiny", gca_backend=backend, **TINY))
    if state is not None:
        model.load_state_dict(state)
    # eval(): no Gumbel noise in retrieval, so both backends select the same chunks; grads still flow
    model.eval()
    out = model(ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return model, out.loss.detach(), grads


def test_training_step_triton_matches_reference(monkeypatch):
    calls = []
    real = triton_gca.gca_triton
    monkeypatch.setattr(triton_gca, "gca_triton", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    g = torch.Generator().manual_seed(0)
    # 4 chunks of 63 real tokens (the last one partial): 3 query chunks retrieve from earlier ones
    ids = torch.randint(3, TINY["vocab_size"], (2, 4 * 63 - 10), generator=g)
    ref_model, ref_loss, ref_grads = _step("reference", None, ids)
    assert not calls
    _, tri_loss, tri_grads = _step("triton", ref_model.state_dict(), ids)
    assert calls, "the triton backend was not used"
    torch.testing.assert_close(tri_loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert tri_grads.keys() == ref_grads.keys()
    # gradients that pass through the operator: dQ, dK/dV (shared memory projections) and dW
    # (retrieval scores -> fusion weights -> the landmark norm of the group)
    through_gca = (
        "groups.0.0.gca.q.weight", "encoder.k_proj.weight", "encoder.v_proj.weight", "lmk_norms.0.weight"
    )
    for name in through_gca:
        assert ref_grads[name].abs().sum() > 0, name
    for name, ref in ref_grads.items():
        torch.testing.assert_close(tri_grads[name], ref, atol=1e-5, rtol=1e-4, msg=name)
