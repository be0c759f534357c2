"""The engine's device path: chunk K/V move from the chunk memory to the engine's device once per
selection (G gathers every S tokens when decoding, as in the paper), and the engine runs the Triton
GCA kernels (here in the Triton interpreter on the CPU; compiled on CUDA) with the same numbers as
the reference operator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from drt_core.engine import Engine
from tests.drt_core.test_engine import copy_kw, ids_of, make_model


def _decode(eng, st, ids, reuse: bool):
    """Feed ids one token at a time (as generation does); logits of each. reuse=False forgets the
    last gathers before every step, so every step reads the chunk memory again."""
    out = []
    for t in ids:
        if not reuse:
            st.gathered.clear()
        out.append(eng.feed(st, [int(t)], want_logits=True))
    return torch.cat(out)


def test_decoding_gathers_once_per_selection_with_the_same_logits():
    m = make_model("drt", (1, 1), **copy_kw("lexwords"))
    G, S = m.config.num_groups, m.config.chunk_size
    ids = ids_of(700)[0].tolist()
    eng = Engine(m, memory_dtype=np.float32)
    a, b = eng.new_state(), eng.new_state()
    eng.feed(a, ids[:400]), eng.feed(b, ids[:400])
    n0 = a.transfers.gathers
    steps = ids[400:400 + 2 * S]  # two chunks of decode steps
    la = _decode(eng, a, steps, reuse=True)
    lb = _decode(eng, b, steps, reuse=False)
    assert torch.equal(la, lb)  # reusing a gather changes nothing, bit for bit
    # the selection changes only at landmarks: at most G gathers for each chunk the steps touch
    touched = len({(400 + i) // S for i in range(len(steps))})
    assert a.transfers.gathers - n0 <= G * touched
    assert a.transfers.reused >= G * (len(steps) - touched)
    assert b.transfers.gathers - n0 >= G * (len(steps) - touched)  # without reuse: every step reads
    assert a.transfers.bytes > 0 and a.transfers.chunks >= a.transfers.gathers


def test_generation_fork_reads_the_memory_it_appends_to():
    """A fork gets its own gathers (its overlay memory grows while it generates), and the same
    numbers whether it reuses them or not."""
    m = make_model("drt", (2,))
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    ids = ids_of(500)[0].tolist()
    eng.feed(st, ids[:300])
    f1, f2 = st.fork(), st.fork()
    l1 = _decode(eng, f1, ids[300:420], reuse=True)
    l2 = _decode(eng, f2, ids[300:420], reuse=False)
    assert torch.equal(l1, l2)
    assert not st.gathered or all(v[0][0] == id(st.memory) for v in st.gathered.values())


def test_engine_on_the_triton_kernels_matches_the_reference_operator(monkeypatch):
    """Prefill and decode with gca_backend="triton" (the path CUDA takes; interpreted on CPU
    tensors) against gca_backend="reference": the same logits within fp32 rounding."""
    ref = make_model("drt", (1, 1), **copy_kw("lexwords"))
    tri = make_model("drt", (1, 1), **copy_kw("lexwords"))
    tri.load_state_dict(ref.state_dict())
    for model, backend in ((ref, "reference"), (tri, "triton")):
        for mod in model.modules():
            if hasattr(mod, "backend"):
                mod.backend = backend
    from kernels.gca import triton_gca

    calls, real = [], triton_gca.gca_triton
    monkeypatch.setattr(triton_gca, "gca_triton", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    ids = ids_of(330)[0].tolist()
    outs = {}
    for name, model in (("reference", ref), ("triton", tri)):
        eng = Engine(model, memory_dtype=np.float32)
        st = eng.new_state()
        pre = eng.feed(st, ids[:300], want_logits=True)
        outs[name] = torch.cat([pre, _decode(eng, st, ids[300:], reuse=True)])
    assert calls, "the Triton kernels were not called"
    torch.testing.assert_close(outs["triton"], outs["reference"], atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_engine_on_cuda_matches_the_cpu_engine():
    """The engine on CUDA (Triton kernels compiled, memory gathered through pinned buffers) against
    the CPU engine on the reference operator: same logits within TF32-free fp32 rounding."""
    m = make_model("drt", (1, 1), **copy_kw("lexwords"))
    ids = ids_of(700)[0].tolist()
    outs = {}
    for dev in ("cpu", "cuda"):
        eng = Engine(m, memory_dtype=np.float32, device=dev)
        st = eng.new_state()
        pre = eng.feed(st, ids[:600], want_logits=True)
        outs[dev] = torch.cat([pre, _decode(eng, st, ids[600:], reuse=True)]).cpu()
        assert dev == "cpu" or st.transfers.reused > 0
    torch.testing.assert_close(outs["cuda"], outs["cpu"], atol=2e-3, rtol=2e-3)
