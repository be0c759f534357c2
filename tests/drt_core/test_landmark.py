"""Landmark Attention (drt_core/landmark.py): the grouped softmax against a loop-by-loop transcription
of the reference, the streaming (top-k) path against the batch model where they must agree and
against a per-query reference where they differ, and the engine around it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from drt_core import DRTConfig, DRTForCausalLM
from drt_core.engine import Engine
from drt_core.landmark import LandmarkAttention, grouped_softmax_attention, grouped_softmax_reference
from drt_core.attention import KVWindow

V = 300
S = 8  # block: 7 tokens + the landmark
K = 3  # blocks retrieved per token


def make(seed=0, init_std=0.3, **kw):
    torch.manual_seed(seed)
    cfg = DRTConfig.from_preset("tiny", arch="landmark", vocab_size=V, hidden_size=32, num_heads=2,
                                intermediate_size=64, chunk_size=S, chunk_topk=K, init_std=init_std, **kw)
    return DRTForCausalLM(cfg).eval()


def ids_of(n, seed=1):
    return torch.randint(3, V, (1, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("T", [4, 12, 20])
def test_grouped_softmax_matches_reference_forward_and_grads(T):
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(2, 3, T, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = -torch.rand(3, 1, 1, dtype=torch.float64) * (torch.arange(T)[:, None] - torch.arange(T)).abs()
    a = grouped_softmax_attention(q, k, v, 4, bias)
    b = grouped_softmax_reference(q, k, v, 4, bias)
    torch.testing.assert_close(a, b)
    w = torch.randn(a.shape, generator=g, dtype=torch.float64)
    ga = torch.autograd.grad((a * w).sum(), (q, k, v))
    gb = torch.autograd.grad((b * w).sum(), (q, k, v))
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y)


def test_grouped_softmax_never_reads_a_landmark_value():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 4, generator=g) for _ in range(3))
    v2 = v.clone()
    v2[:, :, 3::4] = 1e3  # the landmark slots' values
    torch.testing.assert_close(grouped_softmax_attention(q, k, v, 4), grouped_softmax_attention(q, k, v2, 4))


@pytest.mark.parametrize("n_tokens", [1, 7, 20, (K + 1) * (S - 1)])
def test_stream_equals_batch_while_every_block_is_retrieved(n_tokens):
    """With at most K earlier blocks every block is retrieved and laid out at its own position:
    the streamed logits are the batch model's, fed whole or token by token."""
    m = make()
    ids = ids_of(n_tokens)
    with torch.no_grad():
        ref = m(ids).logits[0]
    eng = Engine(m, memory_dtype=np.float32)
    whole = eng.feed(eng.new_state(), ids[0].tolist(), want_logits=True)
    st = eng.new_state()
    one = torch.cat([eng.feed(st, [t], want_logits=True) for t in ids[0].tolist()])
    torch.testing.assert_close(whole, ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(one, ref, atol=1e-4, rtol=1e-4)


def test_stream_beyond_topk_is_not_the_batch_model():
    """Beyond K earlier blocks each token reads only K of them (the test above would pass for
    a model that ignored top-k)."""
    m = make()
    ids = ids_of(12 * (S - 1))
    with torch.no_grad():
        ref = m(ids).logits[0]
    got = Engine(m).feed(Engine(m).new_state(), ids[0].tolist(), want_logits=True)
    n = (K + 1) * (S - 1)
    torch.testing.assert_close(got[:n], ref[:n], atol=1e-4, rtol=1e-4)
    assert (got[n:] - ref[n:]).abs().max() > 1e-2


def _reference_query(att: LandmarkAttention, q, keys, vals, i):
    """One query at stream position i, retrieval as the module docstring states it, loop by loop.
    q [H, d]; keys, vals [H, N, d] (every position so far)."""
    H, d = q.shape
    slopes = att.slopes
    b, s = divmod(i, S)
    kk = min(b, K)
    qpos = kk * S + s
    out = torch.zeros(H, d)
    for h in range(H):
        def score(t, pos):
            return float(q[h] @ keys[h, t]) / math.sqrt(d) - float(slopes[h]) * (qpos - pos)
        lay = [0] * b
        for r in range(kk):
            lay[b - kk + r] = r
        lscore = [score(j * S + S - 1, lay[j] * S + S - 1) for j in range(b)]
        chosen = sorted(sorted(range(b), key=lambda j: (-lscore[j], -j))[:kk])
        own = [t for t in range(b * S, i + 1) if t % S != S - 1]
        top_s = ([score(t, kk * S + t % S) for t in own]
                 + [score(j * S + S - 1, r * S + S - 1) for r, j in enumerate(chosen)])
        top = torch.tensor(top_s).softmax(0)
        for w, t in zip(top[: len(own)], own):
            out[h] += w * vals[h, t]
        for gate, (r, j) in zip(top[len(own):], enumerate(chosen)):
            toks = range(j * S, j * S + S - 1)
            ws = torch.tensor([score(t, r * S + t % S) for t in toks]).softmax(0)
            for w, t in zip(ws, toks):
                out[h] += gate * w * vals[h, t]
    return out


def test_stream_beyond_topk_matches_the_per_query_reference():
    torch.manual_seed(3)
    cfg = DRTConfig.from_preset("tiny", arch="landmark", vocab_size=V, hidden_size=16, num_heads=2,
                                chunk_size=S, chunk_topk=K)
    att = LandmarkAttention(cfg).eval()
    N = 9 * S + 5
    x = torch.randn(1, N, 16)
    cache = KVWindow.empty(1, 2, 16, 8, "cpu", torch.float32)  # grows as the stream does
    with torch.no_grad():
        got = torch.cat([att(x[:, a:b], a, cache) for a, b in [(0, 13), (13, 40), (40, 41), (41, N)]], 1)
        q, k, v = att._split(x)
        pre = torch.stack([_reference_query(att, q[0, :, i], k[0], v[0], i) for i in range(N)], 1)  # [H, N, d]
        want = att.o(pre.transpose(0, 1).reshape(1, N, 16))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert cache.k.shape[2] >= N and cache.next_pos == N


def test_selection_does_not_depend_on_how_the_stream_is_cut():
    """Regression: at layer 0 every landmark key is the same vector, so the older blocks' scores
    tie up to float noise, and top-k picked different blocks when the same tokens arrived in
    different runs (up to 5.9 apart in these logits). Ties now go to the most recent block."""
    m = make(seed=3, init_std=0.3)
    ids = ids_of(12 * (S - 1), seed=1)[0].tolist()
    eng = Engine(m, memory_dtype=np.float32)
    whole = eng.feed(eng.new_state(), ids, want_logits=True)
    st = eng.new_state()
    parts = torch.cat([eng.feed(st, ids[a:a + 5], want_logits=True) for a in range(0, len(ids), 5)])
    torch.testing.assert_close(parts, whole, atol=1e-4, rtol=1e-4)


def test_stored_state_reopens_to_the_same_numbers(tmp_path):
    m = make()
    eng = Engine(m, memory_dtype=np.float32)
    ids = ids_of(15 * (S - 1) + 3)[0].tolist()
    ram = eng.new_state()
    eng.feed(ram, ids[:60])
    want = eng.feed(ram, ids[60:], want_logits=True)
    st = eng.open_state(tmp_path / "doc")
    eng.feed(st, ids[:60])
    st.checkpoint()
    st2 = eng.open_state(tmp_path / "doc")
    torch.testing.assert_close(eng.feed(st2, ids[60:], want_logits=True), want)


def test_generation_through_the_engine():
    eng = Engine(make(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(50)[0].tolist())
    fork = st.fork()
    out = eng.feed(fork, [5, 6, 7], want_logits=True)
    assert out.shape == (3, V) and torch.isfinite(out).all()
    assert st.carry.pos == 50 + 50 // (S - 1)  # the fork left the state alone


def test_config_rejects_a_stream_preamble():
    with pytest.raises(ValueError, match="landmark"):
        DRTConfig.from_preset("tiny", arch="landmark", stream_preamble=[5, 6])


def test_starts_from_a_sliding_window_checkpoint(tmp_path):
    """`train --init SW --set arch=landmark`: the same parameters, every one loaded."""
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", arch="sliding_window", vocab_size=V, hidden_size=32, num_heads=2,
                                intermediate_size=64)
    DRTForCausalLM(cfg).save_pretrained(tmp_path)
    m, info = DRTForCausalLM.from_pretrained(tmp_path, arch="landmark", output_loading_info=True)
    assert m.config.arch == "landmark" and isinstance(m.layers[0].attn, LandmarkAttention)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_top_blocks_prefers_the_best_then_the_most_recent():
    # blocks 0..5; block 4 best; blocks 1, 3 and 5 tie within 2^-10 (the engine's rounding step)
    raw = torch.tensor([[0.0, 2.0, 1.0, 2.0 + 2e-4, 3.0, 2.0 - 2e-4]])
    assert LandmarkAttention.top_blocks(raw, 1).tolist() == [[4]]
    assert LandmarkAttention.top_blocks(raw, 3).tolist() == [[4, 5, 3]]
    assert LandmarkAttention.top_blocks(raw, 6).tolist() == [[4, 5, 3, 1, 2, 0]]
    # a gap of one rounding step or more is not a tie
    raw = torch.tensor([[2.0 + 2.0 ** -9, 2.0]])
    assert LandmarkAttention.top_blocks(raw, 1).tolist() == [[0]]
