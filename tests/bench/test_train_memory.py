"""Issue 53, item 5 (training memory): the sliding-window attention and the CPU GCA that save only
q, k, v, the output and its log-sum-exp for backward give the numbers of the dense forms, and
bench.train's memory comparison and batch sizing run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bench.train import LeanSlidingWindow, bench_memory, fit_batch, main, parse_overrides, saved_bytes
from drt_core import DRTConfig, DRTForCausalLM
from drt_core.attention import alibi_slopes, window_attention, window_bias
from kernels.gca import gca, gca_reference


def _dense(q, k, v, slopes, W):
    pos = torch.arange(q.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=window_bias(pos, pos, slopes, W).to(q.dtype)[None])


@pytest.mark.parametrize(("B", "H", "T", "W", "block"), [
    (1, 2, 1, 1, 4), (2, 3, 37, 8, 4), (1, 2, 50, 50, 16), (2, 2, 130, 20, 16), (1, 1, 17, 3, 8), (1, 2, 200, 70, 64),
])
def test_window_attention_equals_the_dense_masked_attention(B, H, T, W, block):
    torch.manual_seed(0)
    slopes = alibi_slopes(H)
    q, k, v = (torch.randn(B, H, T, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    o = window_attention(q, k, v, slopes, W, block)
    ref = _dense(q, k, v, slopes, W)
    do = torch.randn_like(o)
    for a, b in zip((o,) + torch.autograd.grad(o, (q, k, v), do), (ref,) + torch.autograd.grad(ref, (q, k, v), do)):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_window_attention_saves_linear_in_the_length():
    """q, k, v (views of one qkv tensor), the output and its log-sum-exp: about 5 x D values a token in
    fp32, nothing of size window x tokens (the dense form saves ~40 KiB a token at D = 384)."""
    H, d, T = 6, 64, 1024
    qkv = torch.randn(1, T, 3, H, d, requires_grad=True)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    n = saved_bytes(lambda: window_attention(q, k, v, alibi_slopes(H), 512))
    assert n / T <= 4 * (3 * H * d + H * d + H) + 64


def test_model_gradients_unchanged_by_the_lean_paths():
    """A sliding-window model: its loss and gradients with window_attention equal the dense
    attention's (the batch path as it was: the model's attention with a full window_bias mask)."""
    torch.manual_seed(0)
    mc = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, window=40,
                               arch="sliding_window")
    model = DRTForCausalLM(mc)
    ids = torch.randint(3, mc.vocab_size, (2, 150))
    out = model(ids, labels=ids).loss
    grads = torch.autograd.grad(out, list(model.parameters()))
    from drt_core import attention

    orig = attention.SelfAttention._attend_blocked
    try:
        attention.SelfAttention._attend_blocked = lambda self, q, k, v, block=64: _dense(
            q, k, v, self.slopes, min(self.window, q.shape[2]))
        ref = model(ids, labels=ids).loss
        ref_grads = torch.autograd.grad(ref, list(model.parameters()))
    finally:
        attention.SelfAttention._attend_blocked = orig
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("softmax_one", [False, True])
def test_cpu_gca_training_path_equals_the_reference_and_saves_less(softmax_one):
    torch.manual_seed(0)
    Z, H, M, K, N, d = 3, 2, 16, 4, 15, 8
    q = torch.randn(Z, H, M, d, requires_grad=True)
    k, v = (torch.randn(Z, H, K, N, d, requires_grad=True) for _ in range(2))
    w = torch.softmax(torch.randn(Z, K), -1).requires_grad_()
    do = torch.randn(Z, H, M, d)
    got = gca(q, k, v, w, softmax_one=softmax_one, backend="reference")
    ref = gca_reference(q, k, v, w, softmax_one=softmax_one)
    # the same function (tests/kernels/test_recompute.py: fp64)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (q, k, v, w), do), torch.autograd.grad(ref, (q, k, v, w), do)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    lean = saved_bytes(lambda: gca(q, k, v, w, softmax_one=softmax_one, backend="reference"))
    dense = saved_bytes(lambda: gca_reference(q, k, v, w, softmax_one=softmax_one))
    assert lean < dense
    with torch.no_grad():  # inference: the reference itself
        assert torch.equal(gca(q, k, v, w, softmax_one=softmax_one), ref)


def test_lean_reference_loss_chunked_or_not():
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, arch="sliding_window")
    plain = LeanSlidingWindow.like(cfg, block=32)
    chunked = LeanSlidingWindow.like(cfg, block=32, chunked_ce=True, ce_chunk=50)
    chunked.load_state_dict(plain.state_dict())
    ids = torch.randint(3, cfg.vocab_size, (2, 130))
    torch.testing.assert_close(plain(ids, ids), chunked(ids, ids))
    assert saved_bytes(lambda: chunked(ids, ids)) < saved_bytes(lambda: plain(ids, ids))


def test_bench_memory_reports_the_three_models():
    res = bench_memory("tiny", 252, 1, torch.device("cpu"), False,
                       {"hidden_size": 64, "num_heads": 2, "intermediate_size": 128})
    k, r = res["kib_per_token"], res["ratios"]
    assert set(k) == {"drt", "sliding_window", "lean", "lean_chunked_ce"} and all(x > 0 for x in k.values())
    assert k["lean_chunked_ce"] < k["lean"]
    assert r["drt_over_lean"] == pytest.approx(k["drt"] / k["lean"])


def test_overrides_and_fit_batch_cli(capsys):
    assert parse_overrides(["hidden_size=384", "softmax_one=false", "gca_backend=reference"]) == {
        "hidden_size": 384, "softmax_one": False, "gca_backend": "reference"}
    small = {"hidden_size": 384, "num_heads": 6, "intermediate_size": 1024}
    b80 = fit_batch("small", small, 4032, True, memory_gib=80)
    assert b80 >= 32  # bench/gpu_train.sh's batch fits an 80 GB card
    assert fit_batch("small", small, 4032, True, memory_gib=80, max_batch=32) == 32
    assert fit_batch("small", small, 4032, True, memory_gib=8) < b80
    assert fit_batch("paper", {}, 4032, True, memory_gib=80) >= 8  # bench/gpu.sh's
    assert main(["--fit-batch", "--preset", "tiny", "--memory-gib", "2", "--max-batch", "3", "--seq-len", "504"]) == 0
    assert capsys.readouterr().out.strip() == "3"
