"""The streaming engine against the batch model: same logits, same retrieval, stored states reload
to the same numbers, generation leaves the stored document untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from drt_core import DRTConfig, DRTForCausalLM
from drt_core import counterfactual
from drt_core.decode import ban_repeats
from drt_core.engine import Engine
from drt_core.stream import Stream
from drt_core.errors import CheckpointMismatch
from tests.drt_core.flavours import FLAVOURS, flavour_kw, toy_word_tables

V = 300


def make_model(arch="drt", groups=(2,), seed=0, preset="tiny", **kw):
    torch.manual_seed(seed)
    cfg = DRTConfig.from_preset(
        preset, arch=arch, vocab_size=V, hidden_size=64, num_heads=2, intermediate_size=128,
        upper_groups=list(groups), window=128, chunk_topk=3, **kw,
    )
    m = DRTForCausalLM(cfg).eval()
    if getattr(m, "copy_head", None) is not None:  # an open gate and a peaked pointer
        with torch.no_grad():
            m.copy_head.gate.bias.fill_(0.5)
            m.copy_head.gate.weight.normal_(0, 0.05)
            m.copy_head.q.weight.normal_(0, 0.3)
            m.copy_head.k.weight.normal_(0, 0.3)
            m.copy_head.k_prev.weight.normal_(0, 0.3)
            m.copy_head.q_tok.weight.normal_(0, 0.3)
            m.copy_head.k_tok.weight.normal_(0, 0.3)
            if m.copy_head.bigram:
                m.copy_head.q_tok2.weight.normal_(0, 0.3)
                m.copy_head.k_tok2.weight.normal_(0, 0.3)
                m.copy_head.gate_tok.weight.normal_(0, 0.3)
            if m.copy_head.match:  # non-zero suffix-match biases (zero at init: a no-op)
                m.copy_head.match_bias.copy_(torch.linspace(-0.1, 0.4, m.copy_head.match + 1))
                m.copy_head.match_gate.copy_(torch.linspace(0.2, -0.2, m.copy_head.match + 1))
            if m.copy_head.recall:
                m.copy_head.recall_bias.copy_(torch.linspace(-0.2, 0.4, m.copy_head.recall_bias.numel())
                                              .view_as(m.copy_head.recall_bias))
                m.copy_head.recall_gate.fill_(0.05)
            if m.copy_head.ages:  # copy_recall_age: zero at init, a no-op
                m.copy_head.recall_age_bias.normal_(0, 0.1)
    # non-trivial query norms, so a path that forgot them would retrieve differently (spec §6.2)
    with torch.no_grad():
        for n in getattr(m, "lmk_norms", []):
            n.weight.uniform_(0.2, 3.0)
        for proj in getattr(m, "query_projs", None) or []:  # query_key / query_encoder: zero at init, a no-op
            proj.weight.normal_(0, 0.3)
        if getattr(m, "lexical", None) is not None:  # zero at init, a no-op: some weights relu'd to 0
            m.lexical.weight.uniform_(-1.0, 3.0)
            m.lexical.scale.copy_(torch.linspace(0.7, 1.3, m.lexical.scale.numel()))
            if m.lexical.gate is not None:  # lexical_gates: zero at init (every gate 0.5); gates that vary
                m.lexical.gate.weight.normal_(0, 0.3)
            m.lexical.set_word_tables(toy_word_tables(V))  # lexical_words: this toy vocabulary's words
        ctx = getattr(getattr(m, "key_enc", None), "context", None)
        if ctx is not None:  # key_context: zero at init, a no-op
            ctx.o.weight.normal_(0, 0.3)
    return m


def ids_of(L, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, V, (1, L), generator=g)


def copy_kw(variant):
    """make_model options of a streaming-test variant: the copy head's options, the lexical terms, the preamble;
    "paper" and "shipped" are the two flavours (tests/drt_core/flavours.py)."""
    if variant in FLAVOURS:
        return flavour_kw(variant)
    full = variant in ("match", "lead", "allgroups")  # every copy option; "lead" adds copy_lead and key_context,
    # "allgroups" copy_groups="all" (with G = 2, the pointer reads both groups' selections)
    return dict(copy_head=variant in ("copy", "bigram", "global", "match", "lead", "allgroups"),
                copy_bigram=variant in ("bigram", "global") or full, copy_global=variant == "global" or full,
                copy_match=6 if full else 0, copy_recall=5 if full else 0,
                copy_span=9 if full else 0, query_encoder=1 if full else 0,
                copy_lead=11 if variant == "lead" else 0, key_encoder=int(variant == "lead"),
                key_context=5 if variant == "lead" else 0,
                copy_groups="all" if variant == "allgroups" else "last",
                copy_recall_age=4 if variant in ("lead", "allgroups") else 0,
                copy_qk_cap=2.0 if variant == "allgroups" else 0.0,
                lexical=variant in ("lexical", "lexdf", "lexwords", "lexgates"),
                lexical_doc_df=0.8 if variant in ("lexdf", "lexwords", "lexgates") else 0.0,
                lexical_words=1.3 if variant in ("lexwords", "lexgates") else 0.0,
                lexical_gates=0.9 if variant == "lexgates" else 0.0,
                stream_preamble=[5, 17, 42, 9, 250, 33, 7] if variant == "preamble" else None)


@pytest.fixture
def one_thread():
    """Batch and stream order their float reductions differently; with two threads that moves
    the shipped flavour's copy-head logits at one position by up to 2.1e-4 relative (its pointer's
    learned scores are large: 2026-12-03, 85 of 210,000 logits, selections equal, retrieval scores
    within 8e-6), at one thread by 1.1e-4. The tests check the semantics, not thread order."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def repeating_ids(L, period=130, seed=1):
    """A random block repeated: long exact suffix matches in the retrieved chunks (copy_match)."""
    return ids_of(period, seed).repeat(1, L // period + 1)[:, :L]


@pytest.mark.parametrize("arch,groups,variant", [("drt", (2,), False), ("drt", (1, 1), False),
                                                ("sliding_window", (2,), False), ("full_attention", (2,), False),
                                                ("drt", (2,), "copy"),
                                                ("drt", (1, 1), "copy"), ("drt", (2,), "bigram"),
                                                ("drt", (2,), "global"), ("drt", (2,), "match"),
                                                ("drt", (1, 1), "match"), ("drt", (2,), "lead"),
                                                ("drt", (1, 1), "allgroups"), ("drt", (1, 1), "lexical"),
                                                ("drt", (1, 1), "lexdf"), ("drt", (1, 1), "lexwords"),
                                                ("drt", (1, 1), "lexgates"),
                                                ("drt", (2,), "paper"),
                                                ("drt", (2,), "shipped"), ("drt", (2,), "preamble"),
                                                ("drt", (1, 1), "preamble"),
                                                ("sliding_window", (2,), "preamble"),
                                                ("full_attention", (2,), "preamble"),
                                                ("fixed_retriever", (2,), False),
                                                ("fixed_retriever", (1, 1), "preamble")])
def test_streaming_logits_equal_batch(arch, groups, variant, one_thread):
    """Teacher-forced streaming in uneven pieces == one batch forward (within the training length);
    with each extension too (the copy head: a pointer over the stored chunks' tokens)."""
    m = make_model(arch, groups, **copy_kw(variant))
    ids = repeating_ids(700) if variant in ("match", "lead", "allgroups", "shipped") else ids_of(700)
    with torch.no_grad():
        ref = m(ids).logits[0]
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    outs = []
    for a, b, blk in [(0, 130, 2), (130, 131, 2), (131, 400, 3), (400, 700, 16)]:
        outs.append(eng.feed(st, ids[0, a:b].tolist(), want_logits=True, block_chunks=blk))
    # the shipped flavour's copy head (every extension on, large pointer scores) turns float noise
    # in the retrieval scores into up to 1.1e-4 relative at a few positions (one_thread)
    torch.testing.assert_close(torch.cat(outs), ref, atol=2e-5, rtol=2e-4 if variant == "shipped" else 1e-4)


def test_streaming_attends_only_to_filled_cache_slots(monkeypatch):
    """Regression: the full-attention baseline's 64K-slot cache made every streamed query attend
    to 64K keys (empty slots masked) from the first token: ~220 tokens/s at any length."""
    import torch.nn.functional as F

    m = make_model("full_attention", (2,))
    seen = []
    sdpa = F.scaled_dot_product_attention

    def spy(q, k, v, *a, **kw):
        seen.append(k.shape[-2])
        return sdpa(q, k, v, *a, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(200)[0].tolist(), block_chunks=1)
    assert seen and max(seen) <= 200


@pytest.mark.parametrize("arch,groups,variant", [("drt", (2,), False), ("drt", (1, 1), False),
                                                ("sliding_window", (2,), False), ("drt", (2,), "copy"),
                                                ("drt", (2,), "bigram"),
                                                ("drt", (2,), "global"), ("drt", (2,), "match"),
                                                ("drt", (2,), "lead"), ("drt", (1, 1), "allgroups"),
                                                ("drt", (2,), "paper"), ("drt", (2,), "shipped"),
                                                ("drt", (2,), "preamble"), ("sliding_window", (2,), "preamble")])
def test_token_by_token_equals_batch(arch, groups, variant, one_thread):
    """Decoding one token at a time (the landmark inserted at chunk completion) == batch forward."""
    m = make_model(arch, groups, **copy_kw(variant))
    repeats = variant in ("match", "lead", "allgroups", "shipped")
    ids = repeating_ids(260, seed=2) if repeats else ids_of(260, seed=2)
    with torch.no_grad():
        ref = m(ids).logits[0]
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    out = torch.cat([eng.feed(st, [t], want_logits=True) for t in ids[0].tolist()])
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("query", [None, "encoder", "key_encoder", "key_context", "lexical", "lexdf",
                                   "lexwords", "lexcarry", "lexgates"])
def test_selections_equal_batch_retrieval(query):
    """The stored dependency map is the batch model's retrieval (row c serves chunk c+1), also with
    landmark queries that read their own chunk (query_encoder), keys of their own
    encoder (key_encoder) and keys that read the end of the chunk before (key_context, fed in
    pieces that cut chunks, so the carried tail is what the batch model reads)."""
    m = make_model("drt", (1, 1), query_encoder=2 if query == "encoder" else 0,
                   key_encoder=1 if query in ("key_encoder", "key_context") else 0,
                   key_context=7 if query == "key_context" else 0,
                   lexical=query in ("lexical", "lexdf", "lexwords", "lexcarry", "lexgates"),
                   lexical_doc_df=0.8 if query == "lexdf" else 0.0,
                   lexical_words=1.1 if query in ("lexwords", "lexcarry", "lexgates") else 0.0,
                   lexical_word_carry=query in ("lexcarry", "lexgates"),
                   lexical_gates=1.7 if query == "lexgates" else 0.0)
    ids = ids_of(63 * 12, seed=3)
    # toy words (every third id starts one): 6 7 8 cut as 6 | 7 8 by chunk 6's start, whole in chunk 10
    if query == "lexcarry":
        ids[0, 63 * 6 - 1: 63 * 6 + 3] = torch.tensor([6, 7, 8, 9])
        ids[0, 640:644] = torch.tensor([6, 7, 8, 9])
    with torch.no_grad():
        ref = m(ids, output_retrieval=True).retrieval
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    # fed in pieces that cut chunks (the carried tail, and a cut word's first part in the store)
    cuts = [0, 100, 101, 300, 63 * 12] if query in ("key_context", "lexcarry", "lexgates") else [0, 63 * 12]
    rec = []
    for a, b in zip(cuts, cuts[1:]):
        eng.feed(st, ids[0, a:b].tolist(), block_chunks=2, record=rec)
    if query in ("lexcarry", "lexgates"):  # the scores themselves (a cut word changes few selections)
        for r in (r for r in rec if r["group"] == 0):
            c = r["lmk_chunk"]
            np.testing.assert_allclose(r["scores"], ref[0]["scores"][0, c, :c].numpy(), rtol=1e-4, atol=1e-4)
        if query == "lexcarry":  # the carry matters
            m.lexical.carry = False
            with torch.no_grad():
                plain = m(ids, output_retrieval=True).retrieval[0]["scores"]
            m.lexical.carry = True
        else:  # the gates matter: the same model with every gate equal scores otherwise
            with torch.no_grad():
                w = m.lexical.gate.weight.clone()
                m.lexical.gate.weight.zero_()
                plain = m(ids, output_retrieval=True).retrieval[0]["scores"]
                m.lexical.gate.weight.copy_(w)
        assert not torch.equal(plain, ref[0]["scores"])
    si, sw = st.memory.selections()
    for g in range(2):
        w_ref = ref[g]["weights"][0].numpy()
        idx_ref = ref[g]["idx"][0].numpy()
        for c in range(si.shape[0]):
            keep = w_ref[c] > 0
            assert set(si[c, g][sw[c, g] > 0]) == set(idx_ref[c][keep])
            np.testing.assert_allclose(np.sort(sw[c, g][sw[c, g] > 0]), np.sort(w_ref[c][keep]), rtol=1e-4)
            assert all(e < c for e in si[c, g][sw[c, g] > 0])
    dep = st.dependency_map()
    assert dep[0]["chunk"] == 1 and dep[0]["retrieved"] == []  # chunk 1: nothing to retrieve
    assert dep[1]["retrieved"] == [0]  # chunk 2 retrieves chunk 0 (its only candidate)


def test_no_gca_gap_at_segment_boundaries():
    """Reference-code bug (spec §6.1): the first chunk of every prefill segment got no GCA.
    Here the selection is carried across feed() calls, so segment size does not matter."""
    m = make_model()
    ids = ids_of(63 * 10, seed=4)
    eng = Engine(m, memory_dtype=np.float32)
    logits = []
    for seg in (63 * 2, 63 * 5):
        st = eng.new_state()
        parts = [eng.feed(st, ids[0, i:i + seg].tolist(), want_logits=True) for i in range(0, ids.shape[1], seg)]
        logits.append(torch.cat(parts))
    torch.testing.assert_close(logits[0], logits[1], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("copy", [False, True, "bigram", "key_context", *FLAVOURS])
def test_store_reload_equals_recompute(tmp_path, copy):
    """Prefill into a state directory, reopen it with a new engine, continue: same logits as
    streaming everything in RAM. With the copy head, the chunks' token ids (tok.i32) and the
    partial chunk's (the carry's tok_buf) come back from disk too: 600 is not a chunk boundary.
    With key_context, the last chunk's tail that the next key reads (the carry's key_tail)."""
    ctx = copy == "key_context"
    m = make_model(**flavour_kw(copy)) if copy in FLAVOURS else make_model(
        copy_head=copy in (True, "bigram"), copy_bigram=copy == "bigram",
        key_encoder=int(ctx), key_context=9 if ctx else 0)
    ids = ids_of(900, seed=5)[0].tolist()
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    ref = eng.feed(st, ids, want_logits=True)[600:]

    st1 = eng.open_state(tmp_path / "s")
    list(eng.prefill(st1, ids[:600], block_chunks=2, checkpoint_every=1))
    del st1
    eng2 = Engine(m, memory_dtype=np.float32, fingerprint=eng.fingerprint)
    st2 = eng2.open_state(tmp_path / "s")
    assert st2.n_tokens == 600 and st2.n_chunks == 600 // 63
    out = eng2.feed(st2, ids[600:], want_logits=True)
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)


def test_fp16_disk_tier_close(tmp_path):
    m = make_model()
    ids = ids_of(800, seed=6)[0].tolist()
    ref = Engine(m, memory_dtype=np.float32).feed(Engine(m).new_state(), ids, want_logits=True)
    eng = Engine(m)  # float16 memmaps
    st = eng.open_state(tmp_path / "s")
    out = eng.feed(st, ids, want_logits=True)
    assert (out - ref).abs().max() < 5e-2


def test_resume_after_crash_matches_uninterrupted(tmp_path):
    """A crash after a checkpoint loses only the uncommitted work; resuming ends in the same state."""
    m = make_model()
    ids = ids_of(63 * 20 + 17, seed=7)[0].tolist()
    eng = Engine(m, memory_dtype=np.float32)
    full = eng.open_state(tmp_path / "full")
    list(eng.prefill(full, ids, block_chunks=2))

    st = eng.open_state(tmp_path / "crash")
    gen = eng.prefill(st, ids, block_chunks=2, checkpoint_every=3)
    for _ in range(4):  # 3 blocks committed, the 4th fed but not committed
        next(gen)
    del gen, st  # "killed"
    st = eng.open_state(tmp_path / "crash")
    assert st.n_tokens == 3 * 2 * 63
    list(eng.prefill(st, ids, block_chunks=2))
    assert st.n_tokens == full.n_tokens == len(ids)
    a, b = full.memory, st.memory
    np.testing.assert_allclose(a.keys(), b.keys(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.selections()[0], b.selections()[0])
    ka, _ = a.gather(np.arange(a.n))
    kb, _ = b.gather(np.arange(b.n))
    np.testing.assert_allclose(ka, kb, rtol=1e-5, atol=1e-6)


def test_question_time_settings_do_not_change_the_fingerprint(tmp_path):
    """Regression: a setting read at question time only (bm25_weight; abstain_z before it was
    retired) changed the fingerprint, so every prefilled document had to be prefilled again."""
    m = make_model(seed=0)
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.open_state(tmp_path / "s")
    list(eng.prefill(st, ids_of(200)[0].tolist()))
    m.config.bm25_weight = 5.0
    again = Engine(m, memory_dtype=np.float32)
    assert again.fingerprint == eng.fingerprint
    again.open_state(tmp_path / "s")  # not refused
    m.config.window = 64  # a setting the states depend on still changes it
    assert Engine(m, memory_dtype=np.float32).fingerprint != eng.fingerprint


def test_retired_keys_and_config_bytes_keep_the_fingerprint(tmp_path):
    """Regression: Engine.from_pretrained hashed config.json's bytes, so writing a question-time key
    into it gave every stored document of that model another fingerprint. And a config.json that
    still names the retired extensions at their "off" values (config.RETIRED: every checkpoint saved
    before they were removed) keeps the fingerprint it had."""
    import json

    m = make_model(seed=0)
    m.save_pretrained(tmp_path / "m")
    before = Engine.from_pretrained(tmp_path / "m").fingerprint
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg | {"bm25_weight": 4.5}, indent=1))
    assert Engine.from_pretrained(tmp_path / "m").fingerprint == before
    old = {"abstain_z": None, "smear_keys": False, "smear_init": 0.0, "detach_fusion_weights": False,
           "query_key": False, "lexical_window": 0.0}
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg | old))
    assert Engine.from_pretrained(tmp_path / "m").fingerprint == before
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg | {"window": 64}))
    assert Engine.from_pretrained(tmp_path / "m").fingerprint != before


def test_an_extension_at_its_off_value_is_not_in_the_fingerprint():
    """state_config (engine version 2) holds the extensions a model switches on and no other: one at
    its "off" value is the paper's model, so an extension added or retired later changes no
    fingerprint, and no key is re-inserted to keep one (state_migration moved version 1's)."""
    from drt_core.config import PAPER_FLAVOUR
    from drt_core.state_io import state_config

    for variant in ("paper", "lead", "preamble", "lexwords", "lexgates"):
        cfg = make_model(**copy_kw(variant)).config
        question_time = {"bm25_weight", "bm25_window"}
        assert {k for k in state_config(cfg) if k in PAPER_FLAVOUR} == set(cfg.extensions_on()) - question_time


def test_states_of_another_model_are_refused(tmp_path):
    eng = Engine(make_model(seed=0), memory_dtype=np.float32)
    st = eng.open_state(tmp_path / "s")
    list(eng.prefill(st, ids_of(200)[0].tolist()))
    other = Engine(make_model(seed=1), memory_dtype=np.float32)
    assert other.fingerprint != eng.fingerprint
    with pytest.raises(CheckpointMismatch):
        other.open_state(tmp_path / "s")


class _Tok:
    """Minimal tokenizer for generation tests: id -> one character."""

    def encode(self, s, add_special_tokens=False):
        return [3 + (ord(ch) % (V - 3)) for ch in s]

    def decode(self, ids):
        return "".join(chr(97 + (i % 26)) for i in ids)


@pytest.mark.parametrize("copy", [False, True, "bigram"])
def test_generate_streams_and_leaves_state_untouched(copy):
    """Generation runs on a fork (OverlayMemory over the stored chunks; with the copy head it also
    reads their token ids through it) and leaves the stored document as it was."""
    m = make_model(copy_head=bool(copy), copy_bigram=copy == "bigram")
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 8 + 5, seed=8)[0].tolist())
    n_chunks, n_tokens = st.n_chunks, st.n_tokens
    keys = st.memory.keys().copy()
    events = list(eng.generate(st, "what is it", max_new_tokens=80, stop_at_newline=False))
    assert events[-1].done and events[-1].trace is not None
    assert len(events) - 1 == 80 or events[-1].stop_reason == "eos"
    assert st.n_chunks == n_chunks and st.n_tokens == n_tokens
    np.testing.assert_array_equal(st.memory.keys(), keys)
    trace = events[-1].trace.to_json()
    assert trace["n_doc_chunks"] == n_chunks
    rows = trace["chunks"]
    assert len(rows) >= 2  # 80 tokens span at least two generated chunks
    for r in rows:
        assert all(c < r["gen_chunk"] - 1 for c in r["topk"])
        if r["scores"] is not None:
            assert len(r["scores"]) == r["gen_chunk"] - 1
    ev = eng.evidence(st, events[-1].trace)
    assert all(c < n_chunks for c, _ in ev)
    # greedy generation is deterministic
    again = list(eng.generate(st, "what is it", max_new_tokens=80, stop_at_newline=False))
    assert [e.token_id for e in again] == [e.token_id for e in events]


def test_dependency_map_includes_the_partial_last_chunk():
    """Regression: a document ending in a partial chunk lost that chunk's row in the map."""
    m = make_model()
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 5 + 10, seed=9)[0].tolist())
    dep = st.dependency_map()
    assert [r["chunk"] for r in dep] == [1, 2, 3, 4, 5]
    st2 = eng.new_state()
    eng.feed(st2, ids_of(63 * 5, seed=9)[0].tolist())
    assert [r["chunk"] for r in st2.dependency_map()] == [1, 2, 3, 4]


def test_orphan_carry_file_is_removed_on_open(tmp_path):
    """Regression: a kill between writing carry-<n> and committing meta.json left the file forever."""
    m = make_model()
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.open_state(tmp_path / "s")
    list(eng.prefill(st, ids_of(200)[0].tolist()))
    (tmp_path / "s" / "carry-999.safetensors").write_bytes(b"x")
    st = eng.open_state(tmp_path / "s")
    assert sorted(p.name for p in (tmp_path / "s").glob("carry-*")) == ["carry-200.safetensors"]
    assert st.n_tokens == 200


def test_a_state_saved_before_token_ids_were_stored_is_refused(tmp_path):
    """Regression (the padding of such states is gone): a state directory committed before the chunk
    store kept token ids (no tok.i32) is refused on open with a one-line StateTooOld, never read on
    with pad ids in place of its tokens (ingest then prefills it again: tests/ingest/test_pipeline.py).
    A state reopened mid-chunk has one token id per buffered state."""
    from store.errors import StateTooOld

    m = make_model(copy_head=True)
    eng = Engine(m, memory_dtype=np.float32)
    ids = ids_of(300, seed=9)[0].tolist()
    st = eng.open_state(tmp_path / "s")
    list(eng.prefill(st, ids[:200], block_chunks=2, checkpoint_every=1))  # 3 chunks, 11 tokens buffered
    del st
    st = eng.open_state(tmp_path / "s")
    assert len(st.carry.tok_buf) == len(st.carry.h_buf) > 0 and st.carry.tok_buf[-1] == ids[199]
    del st
    (tmp_path / "s" / "tok.i32").unlink()
    with pytest.raises(StateTooOld, match="saved before the chunks' token ids were stored") as e:
        eng.open_state(tmp_path / "s")
    assert "\n" not in str(e.value)


def test_copy_head_reads_the_keys_gca_gathered(monkeypatch):
    """The copy head reuses the memory keys GCA gathered for the same selection: one read of the
    chunk store per group and run (a second read doubled the I/O of a disk-backed document)."""
    m = make_model(copy_head=True, copy_bigram=True)
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    ids = ids_of(63 * 6 + 10, seed=11)[0].tolist()
    eng.feed(st, ids[:-1])
    calls = []
    gather = type(st.memory).gather
    monkeypatch.setattr(type(st.memory), "gather", lambda self, idx: calls.append(idx.shape) or gather(self, idx))
    out = eng.feed(st, ids[-1:], want_logits=True)
    assert len(calls) == 1 and torch.isfinite(out).all()


def test_ban_repeats_forbids_only_the_tokens_that_repeat_an_ngram():
    lg = torch.zeros(10)
    out = ban_repeats(lg, [5, 6, 7, 5, 6], 3)  # "5 6" was followed by 7
    assert torch.isinf(out[7]) and torch.isfinite(out).sum() == 9
    assert torch.equal(ban_repeats(lg, [5, 6, 7, 5, 8], 3), lg)  # no repeated head
    assert torch.equal(ban_repeats(lg, [5, 6], 3), lg)  # too short
    assert torch.isinf(ban_repeats(lg, [1, 2, 1], 1)[[1, 2]]).all()  # n = 1: no token twice


def test_generate_with_no_repeat_ngram_does_not_loop():
    """Greedy decoding of a random model loops; with no_repeat_ngram = 2 no bigram of the answer
    repeats (the app asks with 4: qa.ask.NO_REPEAT_NGRAM)."""
    m = make_model(copy_head=True)
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 3 + 5, seed=12)[0].tolist())

    def answer_ids(n):
        evs = list(eng.generate(st, prompt_ids=[5, 6, 7], max_new_tokens=40, stop_at_newline=False,
                                no_repeat_ngram=n))
        return [e.token_id for e in evs if e.token_id is not None]

    def bigrams(ids):
        return list(zip(ids, ids[1:]))

    loop = answer_ids(0)
    assert len(set(bigrams(loop))) < len(bigrams(loop))  # the plain greedy answer does repeat itself
    ids = answer_ids(2)
    assert len(ids) == 40 and len(set(bigrams(ids))) == len(bigrams(ids))


def test_a_forks_memory_index_starts_from_its_bases(monkeypatch):
    """MemoryIndex: a question's fork takes the stored chunks' token ids, distinct tokens and words
    and lexical counts from its base's index, never reading the stored memory again; it adds its
    own chunks, and its rows equal those of an index computed from scratch over its memory. The
    base's index is left as it was."""
    from drt_core.memory_index import MemoryIndex

    m = make_model(groups=(1, 1), **copy_kw("lexwords"))
    eng = Engine(m, memory_dtype=np.float32)
    lex, c = m.lexical, eng.cfg
    ids = ids_of(63 * 8 + 10, seed=7)[0].tolist()
    st = eng.new_state()
    eng.feed(st, ids[: 63 * 6])
    st.index.lexical_stats(lex, c.vocab_size, c.pad_token_id)  # as the document's first question leaves it
    base_rows = {k: v.clone() for k, v in st.index.rows.items()}
    fork = st.fork()
    reads = []
    tokens = type(st.memory).tokens
    monkeypatch.setattr(type(st.memory), "tokens",
                        lambda self, idx: (self is st.memory and reads.append(idx)) or tokens(self, idx))
    eng.feed(fork, ids[63 * 6:])  # two more chunks, each selected with the lexical term
    assert reads == [] and fork.memory.n == 8
    fresh = MemoryIndex(fork.memory, eng.device)
    fresh.lexical_stats(lex, c.vocab_size, c.pad_token_id)
    assert set(fresh.rows) == set(fork.index.rows) == {"tokens", "distinct_tokens", "distinct_words"}
    for k, v in fresh.rows.items():
        assert len(v) == 8 and torch.equal(v, fork.index.rows[k]), k
        assert torch.equal(st.index.rows[k], base_rows[k]), k


@pytest.mark.parametrize("kind", ["ram", "memmap", "overlay"])
def test_gather_keys_is_gathers_k(tmp_path, kind):
    """gather_keys (what copy_span / copy_lead read of a neighbour chunk) returns gather's K for
    every memory kind, in idx's shape, including an overlay's mix of stored and appended rows."""
    from drt_core.memory_index import OverlayMemory
    from store.chunk_store import MemmapChunkMemory, RamChunkMemory

    D, N, G, k = 8, 5, 1, 2
    rng = np.random.default_rng(0)

    def rows(m):
        return (rng.normal(size=(m, D)).astype(np.float32), rng.normal(size=(m, N, D)).astype(np.float32),
                rng.normal(size=(m, N, D)).astype(np.float32), np.zeros((m, G, k), np.int32),
                np.zeros((m, G, k), np.float32), rng.integers(0, 9, (m, N)).astype(np.int32))

    mem = (MemmapChunkMemory(tmp_path, D, N, G, k, np.float32) if kind == "memmap"
           else RamChunkMemory(D, N, G, k, np.float32))
    mem.append(*rows(6))
    if kind == "overlay":
        mem = OverlayMemory(mem)
        mem.append(*rows(3))
    idx = np.array([[8, 0, 5], [2, 6, 2]])
    K, Vv = mem.gather(idx)
    assert K.shape == Vv.shape == (2, 3, N, D) and not np.array_equal(K, Vv)
    np.testing.assert_array_equal(mem.gather_keys(idx), K)
    assert mem.gather_keys(np.zeros((2, 0), np.int64)).shape == (2, 0, N, D)


# ----------------------------------------------------------------------------------------------
# counterfactual masking (issue 31): generate(mask=...), answer_logprob, causal_effects


def _picked(trace: dict) -> set[int]:
    """Every document chunk a selection of the trace picked with weight > 0, in any group."""
    return {c for r in trace["chunks"] for g in r["groups"] for c, w in zip(g["topk"], g["weights"]) if w > 0}


@pytest.mark.parametrize("flavour", ["paper", "shipped"])
def test_masking_a_chunk_never_retrieved_changes_nothing(flavour):
    """Barring a chunk that no selection picked leaves the answer, the evidence and the trace as
    they were, bit for bit, but for the barred chunk's score (None); its causal effect is exactly 0."""
    m = make_model(**copy_kw(flavour))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 12 + 5, seed=21)[0].tolist())
    keys = st.memory.keys().copy()
    base = list(eng.generate(st, "what is it", max_new_tokens=70, stop_at_newline=False))
    tb = base[-1].trace.to_json()
    # the chunks some selection of the pass picked: the answer's (the trace), and the prompt's own
    # chunks' and the carried one (not in the trace: counterfactual.answer_logprob collects them)
    _, picked = counterfactual.answer_logprob(st, eng.prompt_ids(st, "what is it"), base[-1].ids, frozenset())
    assert _picked(tb) <= picked
    never = sorted(set(range(st.n_chunks)) - picked)
    assert never, "every chunk was picked: lengthen the document"
    c = never[len(never) // 2]
    masked = list(eng.generate(st, "what is it", max_new_tokens=70, stop_at_newline=False, mask=[c]))
    tm = masked[-1].trace.to_json()
    assert [e.token_id for e in masked] == [e.token_id for e in base] and masked[-1].answer == base[-1].answer
    assert masked[-1].ids == base[-1].ids and len(base[-1].ids) == 70
    assert eng.evidence(st, masked[-1].trace) == eng.evidence(st, base[-1].trace)
    assert tm.pop("masked") == [c] and "masked" not in tb
    for rb, rm in zip(tb["chunks"], tm["chunks"], strict=True):
        if rb["scores"] is not None and c < len(rb["scores"]):
            assert rm["scores"][c] is None
            rm["scores"][c] = rb["scores"][c]
        assert rm == rb
    np.testing.assert_array_equal(st.memory.keys(), keys)
    ids = base[-1].ids
    assert eng.answer_logprob(st, "what is it", ids, mask=[c]) == eng.answer_logprob(st, "what is it", ids)
    assert eng.causal_effects(st, "what is it", ids, [c]) == {c: 0.0}


def test_masked_chunks_are_never_selected_and_effects_are_logprob_differences():
    """A barred chunk is in no selection of the masked generation (any group, the carried one
    included); the causal effect of a chunk is logprob(answer) - logprob(answer | chunk masked)."""
    m = make_model(groups=(1, 1), **copy_kw("shipped"))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 10 + 40, seed=22)[0].tolist())
    base = list(eng.generate(st, "tell me", max_new_tokens=70, stop_at_newline=False))
    ev = [c for c, _ in eng.evidence(st, base[-1].trace)]
    top = ev[:2]
    masked = list(eng.generate(st, "tell me", max_new_tokens=70, stop_at_newline=False, mask=top))
    assert not _picked(masked[-1].trace.to_json()) & set(top)
    ids = base[-1].ids
    lp = eng.answer_logprob(st, "tell me", ids)
    assert np.isfinite(lp) and lp < 0
    eff = eng.causal_effects(st, "tell me", ids, ev)
    assert set(eff) == set(ev)
    assert eff[top[0]] == pytest.approx(lp - eng.answer_logprob(st, "tell me", ids, mask=[top[0]]), abs=1e-9)
    assert any(v != 0.0 for v in eff.values())
    assert eng.causal_effects(st, "tell me", [], ev) == {c: 0.0 for c in ev}
    # the batched public form: one row per mask, the numbers of one pass each (float noise)
    many = eng.answer_logprobs(st, "tell me", ids, [[], top[:1], top])
    one = [eng.answer_logprob(st, "tell me", ids, mask=m) for m in ([], top[:1], top)]
    assert many == pytest.approx(one, abs=1e-4) and many[0] == pytest.approx(lp, abs=1e-4)


@pytest.mark.parametrize("flavour,groups", [("paper", (2,)), ("shipped", (1, 1)), ("allgroups", (1, 1))])
def test_masked_variants_in_one_batch_match_one_fork_each(flavour, groups):
    """counterfactual.fork_variants runs several masks side by side (causal_effects' batched pass): each row's
    logits are those of a fork with that mask alone, over a run that closes chunks (landmarks,
    new selections, GCA over several segments, the copy head), and the state is untouched."""
    m = make_model(groups=groups, **copy_kw(flavour))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 9 + 20, seed=23)[0].tolist())
    keys, sel = st.memory.keys().copy(), st.carry.sel_idx.clone()
    prompt = eng.prompt_ids(st, "tell me")
    ids = prompt + ids_of(150, seed=24)[0].tolist()  # past two chunk boundaries
    _, picked = counterfactual.answer_logprob(st, prompt, ids[len(prompt):], frozenset())
    some = sorted(picked)
    masks = [frozenset(), frozenset(some[:1]), frozenset(some[1:3]), frozenset({some[-1]})]
    fork = counterfactual.fork_variants(st, masks)
    got = eng.feed(fork, ids[:70], want_logits=True)
    got = torch.cat([got, eng.feed(fork, ids[70:], want_logits=True)], dim=1)  # two runs: the carry's rows move on
    assert got.shape == (len(masks), len(ids), V)
    for b, mask in enumerate(masks):
        one = counterfactual.masked_fork(st, mask)  # a generation's fork with that mask alone
        want = eng.feed(one, ids, want_logits=True)
        # rtol 1e-4: a batch of four rows and a single row take other GEMM kernels on some CPUs (an AMX
        # Xeon: logits of ~11 off by 1.7e-4); a wrong mask or selection moves them by far more
        torch.testing.assert_close(got[b], want, atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(fork.carry.sel_idx[b], one.carry.sel_idx)
    assert not torch.allclose(got[0], got[1], atol=1e-3)  # the masks matter
    lps = counterfactual.answer_logprobs(st, prompt, ids[len(prompt):], masks)
    for b, mask in enumerate(masks):
        assert lps[b] == pytest.approx(eng.answer_logprob(st, None, ids[len(prompt):], mask, prompt_ids=prompt),
                                       rel=1e-5)
    np.testing.assert_array_equal(st.memory.keys(), keys)
    assert torch.equal(st.carry.sel_idx, sel)


def test_mask_is_checked():
    eng = Engine(make_model(), tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 4)[0].tolist())
    for bad, msg in (([st.n_chunks], "not a chunk"), ([-1], "not a chunk"), (["2"], "integers"), ([1.5], "integers")):
        with pytest.raises(ValueError, match=msg):
            list(eng.generate(st, "q", max_new_tokens=2, mask=bad))
    assert counterfactual.check_mask(st, None) == frozenset() and counterfactual.check_mask(st, [np.int64(2), 2]) == {2}


SHIPPED_DIR = Path(__file__).resolve().parents[2] / "checkpoints" / "drt-tiny"
ASSETS = Path(__file__).resolve().parents[1] / "assets"


@pytest.mark.skipif(not (SHIPPED_DIR / "model.safetensors").exists(), reason="no shipped checkpoint")
def test_masking_the_needles_chunk_destroys_the_answer():
    """A 4K passkey needle (drt_core.train.tasks.needles.single over the Frankenstein excerpt's tokens, the
    question laid out as the app lays it out): the shipped model retrieves the needle's chunk and
    copies the value; with that chunk masked it no longer can, and that chunk's causal effect on
    the answer dwarfs every other evidence chunk's."""
    from drt_core.train.tasks.needles import score_answer, single, value_span

    eng = Engine.from_pretrained(SHIPPED_DIR)
    text = (ASSETS / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    hay = np.asarray(eng.tokenizer.encode(text, add_special_tokens=False), dtype=np.int64)
    ex = single(hay, 4096, 0, depth=0.4, tokenizer_path=SHIPPED_DIR)
    ids = ex.prompt_ids(0).tolist()
    st = eng.new_state()
    eng.feed(st, ids[: ex.n_context])  # the document; the question is generate's prompt
    needle = value_span(ex, 0, SHIPPED_DIR)[0] // (eng.cfg.chunk_size - 1)
    base = list(eng.generate(st, prompt_ids=ids[ex.n_context:], max_new_tokens=12))
    assert score_answer(base[-1].answer, ex.answer)
    evidence = [c for c, _ in eng.evidence(st, base[-1].trace)]
    assert evidence[0] == needle
    masked = list(eng.generate(st, prompt_ids=ids[ex.n_context:], max_new_tokens=12, mask=[needle]))
    assert not score_answer(masked[-1].answer, ex.answer) and ex.answer not in masked[-1].answer
    assert needle not in [c for c, _ in eng.evidence(st, masked[-1].trace)]
    eff = eng.causal_effects(st, None, base[-1].ids, evidence, prompt_ids=ids[ex.n_context:])
    assert eff[needle] > 5.0 and all(abs(v) < 1.0 for c, v in eff.items() if c != needle)


@pytest.mark.parametrize("arch", ["sliding_window", "full_attention"])
def test_stream_preamble_is_text_before_the_stream(arch):
    """config stream_preamble: for a model without chunks, the preamble's logits-to-be are exactly
    those of the same model reading the preamble's tokens first; the engine holds them the same way."""
    pre = [5, 17, 42, 9]
    m = make_model(arch, stream_preamble=pre)
    plain = make_model(arch)
    plain.load_state_dict(m.state_dict())
    ids = ids_of(300)
    with torch.no_grad():
        got = m(ids).logits[0]
        want = plain(torch.cat([torch.tensor([pre]), ids], dim=1)).logits[0, len(pre):]
        assert not torch.allclose(plain(ids).logits[0, :8], want[:8], atol=1e-3)  # it changes the first positions
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    assert st.n_tokens == 0 and st.carry.pos == 0
    torch.testing.assert_close(eng.feed(st, ids[0].tolist(), want_logits=True), want, atol=2e-5, rtol=1e-4)


def test_stream_preamble_belongs_to_no_chunk(tmp_path):
    """With a preamble, chunk 0 still holds the document's first 63 tokens; the stored state reloads
    to the same numbers; and the preamble leaves the fingerprint of a config without one unchanged."""
    from drt_core.state_io import state_config

    m = make_model(stream_preamble=[5, 17, 42, 9, 250])
    eng = Engine(m, memory_dtype=np.float32)
    ids = ids_of(400)[0].tolist()
    st = eng.new_state(tmp_path / "s")
    eng.feed(st, ids[:300])
    st.checkpoint()
    assert st.memory.tokens(np.array([0]))[0].tolist() == ids[:63]
    st2 = Engine(m, memory_dtype=np.float32, fingerprint=eng.fingerprint).open_state(tmp_path / "s")
    a = eng.feed(st, ids[300:], want_logits=True)
    b = eng.feed(st2, ids[300:], want_logits=True)
    torch.testing.assert_close(a, b)
    assert "stream_preamble" not in state_config(make_model().config)
    assert state_config(m.config)["stream_preamble"] == [5, 17, 42, 9, 250]


def test_train_set_stream_preamble_default_is_the_shipped_preamble():
    """`train --set stream_preamble=default` writes prompts.STREAM_PREAMBLE's ids, which are what
    checkpoints/drt-tiny reads before every stream (so a new training run sees the shipped layout)."""
    import argparse
    import json

    from drt_core.prompts import stream_preamble_ids
    from drt_core.train.flags import add_args, config_from_args
    from tests.drt_core.flavours import SHIPPED_CONFIG

    p = argparse.ArgumentParser()
    add_args(p)
    cfg = config_from_args(p.parse_args(["--set", "stream_preamble=default"]))
    ids = cfg.model.model_overrides["stream_preamble"]
    assert ids == stream_preamble_ids() and len(ids) >= 16
    assert json.loads(SHIPPED_CONFIG.read_text())["stream_preamble"] == ids


@pytest.mark.parametrize("variant", ["lexwords", "lexgates"])
def test_lexical_counts_of_a_fork_and_a_reopened_state_equal_a_fresh_stream(tmp_path, one_thread, variant):
    """The engine keeps each memory's in-document counts (LexicalStats) and a fork starts from a copy
    of its base's: the fork's logits, and a reopened state's, equal those of one fresh stream of the
    same tokens (engines that never cached anything). With lexical_gates, the word gates the stream
    handed over and those a reopened state recomputes from its stored token ids (MemoryIndex.word_gates)."""
    m = make_model(groups=(1, 1), **copy_kw(variant))
    ids = repeating_ids(900, seed=3)[0].tolist()
    fresh = Engine(m, memory_dtype=np.float32)
    st = fresh.new_state()
    want = fresh.feed(st, ids, want_logits=True)[600:]
    eng = Engine(m, memory_dtype=np.float32)
    base = eng.new_state(tmp_path / "s")
    eng.feed(base, ids[:600])
    base.checkpoint()
    fork = base.fork()
    torch.testing.assert_close(eng.feed(fork, ids[600:], want_logits=True), want, atol=2e-5, rtol=1e-4)
    again = Engine(m, memory_dtype=np.float32, fingerprint=eng.fingerprint).open_state(tmp_path / "s")
    torch.testing.assert_close(Engine(m, memory_dtype=np.float32, fingerprint=eng.fingerprint)
                               .feed(again, ids[600:], want_logits=True), want, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(eng.feed(base, ids[600:], want_logits=True), want, atol=2e-5, rtol=1e-4)


# -- deferred retrieval groups (Engine.prefill defer_upper, feed upper=False) ----------------------


def _prefilled(eng, ids, defer, directory=None):
    st = eng.new_state(directory)
    list(eng.prefill(st, ids, block_chunks=2, checkpoint_every=1, defer_upper=defer))
    return st


@pytest.mark.parametrize("arch,variant", [("drt", False), ("drt", "shipped"), ("drt", "preamble"),
                                        ("fixed_retriever", "preamble")])
def test_deferred_groups_give_the_numbers_of_running_them(arch, variant, one_thread, tmp_path):
    """A prefill that defers the retrieval groups, caught up when forked (generate) or fed again,
    reopened from disk or not: the same memory (bit for bit), the same logits after it (float noise:
    the catch-up runs the last positions in one run, not block by block) and the same answer."""
    m = make_model(arch, (2,), **copy_kw(variant))
    eng = Engine(m, memory_dtype=np.float32)
    assert eng.stream.can_defer
    ids = (repeating_ids(1000) if variant == "shipped" else ids_of(1000, seed=3))[0].tolist()
    doc, q = ids[:900], ids[900:]
    full = _prefilled(eng, doc, defer=False)
    lazy = _prefilled(eng, doc, defer=True)
    assert lazy.carry.upper_stale and not full.carry.upper_stale
    assert lazy.carry.mid.shape[0] == eng.stream.catch_up_span
    np.testing.assert_array_equal(full.memory.keys(), lazy.memory.keys())
    for a, b in zip(full.memory.selections(), lazy.memory.selections()):
        np.testing.assert_array_equal(a, b)
    ref = eng.feed(full.fork(), q, want_logits=True)
    torch.testing.assert_close(eng.feed(lazy.fork(), q, want_logits=True), ref, atol=2e-5, rtol=1e-4)
    assert not lazy.carry.upper_stale  # forking caught the state up, once
    # committed while deferred, reopened by another engine, fed directly (no fork)
    _prefilled(eng, doc, defer=True, directory=tmp_path / "s")
    st = Engine(m, memory_dtype=np.float32, fingerprint=eng.fingerprint).open_state(tmp_path / "s")
    assert st.carry.upper_stale and st.carry.mid is not None
    torch.testing.assert_close(eng.feed(st, q, want_logits=True), ref, atol=2e-5, rtol=1e-4)
    gen = [e.token_id for e in eng.generate(_prefilled(eng, doc, defer=True), prompt_ids=q, max_new_tokens=12)]
    assert gen == [e.token_id for e in eng.generate(full, prompt_ids=q, max_new_tokens=12)]


def test_a_catch_up_that_reaches_too_little_back_is_caught(monkeypatch, one_thread):
    """The control of the test above: rebuilding the windows from half a window of positions does not
    give the numbers of running the groups, so that test can fail."""
    m = make_model()
    eng = Engine(m, memory_dtype=np.float32)
    ids = ids_of(1000, seed=3)[0].tolist()
    ref = eng.feed(_prefilled(eng, ids[:900], defer=False).fork(), ids[900:], want_logits=True)
    monkeypatch.setattr(Stream, "catch_up_span", property(lambda self: self.cfg.window // 2))
    out = eng.feed(_prefilled(eng, ids[:900], defer=True).fork(), ids[900:], want_logits=True)
    assert (out - ref).abs().max() > 1e-3


def test_two_groups_are_never_deferred():
    """With G = 2 the second group's landmark queries read the first group's outputs: nothing is
    deferred, and a prefill asked to defer runs every layer."""
    m = make_model(groups=(1, 1))
    eng = Engine(m, memory_dtype=np.float32)
    assert not eng.stream.can_defer
    ids = ids_of(700, seed=4)[0].tolist()
    st = _prefilled(eng, ids, defer=True)
    assert not st.carry.upper_stale and st.carry.mid is None
    ref = _prefilled(eng, ids, defer=False)
    for a, b in zip(st.carry.windows, ref.carry.windows):
        assert torch.equal(a.k, b.k) and torch.equal(a.pos, b.pos)


@pytest.mark.parametrize("variant", [False, "shipped"])
def test_a_haystack_fed_without_selections_gives_the_same_answer(variant, one_thread):
    """feed(select=False), the NIAH bench's haystack at 16M: a deferred prefix whose landmarks select
    nothing, then a tail fed with selections that covers the catch-up span: the same memory keys,
    the same selections in the tail, the same logits and answer as selecting everywhere. A catch-up
    that reaches an unselected chunk raises instead of reading it, and select=False needs a deferral."""
    m = make_model("drt", (2,), **copy_kw(variant))
    eng = Engine(m, memory_dtype=np.float32)
    S = eng.cfg.chunk_size
    ids = (repeating_ids(1700) if variant == "shipped" else ids_of(1700, seed=5))[0].tolist()
    doc, q = ids[:1600], ids[1600:]
    cut = 16 * (S - 1)  # a block boundary of feed's default blocks: both streams run the same blocks
    assert cut <= len(doc) - eng.stream.catch_up_span - S
    full = eng.new_state()
    eng.feed(full, doc, upper=False)
    lazy = eng.new_state()
    eng.feed(lazy, doc[:cut], upper=False, select=False)
    eng.feed(lazy, doc[cut:], upper=False)
    np.testing.assert_array_equal(full.memory.keys(), lazy.memory.keys())
    (fi, fw), (li, lw) = full.memory.selections(), lazy.memory.selections()
    first = -(-cut // (S - 1))  # the first chunk whose landmark was fed with select=True (real tokens: S - 1 a chunk)
    assert np.isnan(np.asarray(lw[:first])).all() and not np.isnan(np.asarray(lw[first:])).any()
    np.testing.assert_array_equal(np.asarray(fi[first:]), np.asarray(li[first:]))
    np.testing.assert_array_equal(np.asarray(fw[first:]), np.asarray(lw[first:]))
    ref = eng.feed(full.fork(), q, want_logits=True)
    torch.testing.assert_close(eng.feed(lazy.fork(), q, want_logits=True), ref, atol=1e-6, rtol=1e-6)
    gen = [e.token_id for e in eng.generate(lazy, prompt_ids=q, max_new_tokens=8)]
    assert gen == [e.token_id for e in eng.generate(full, prompt_ids=q, max_new_tokens=8)]

    short = eng.new_state()  # the tail is one chunk: the catch-up reaches unselected rows
    eng.feed(short, doc[:-S], upper=False, select=False)
    eng.feed(short, doc[-S:], upper=False)
    with pytest.raises(RuntimeError, match="select=False"):
        eng.feed(short.fork(), q, want_logits=True)
    with pytest.raises(ValueError, match="select=False"):
        eng.feed(eng.new_state(), doc[:S], select=False)


# ----------------------------------------------------------------------------------------------
# the question's BM25 term (issue 50): config bm25_weight, Engine.question_bias, DocState.bias


def test_question_bias_is_added_to_every_selection_of_the_question():
    """With a question bias, every selection of the question's fork scores the document's chunks
    as the learned scores plus the bias (the trace records the sum), a chunk the bias favours is
    selected, and the causal effects are measured on that same selection (answer_logprob agrees)."""
    m = make_model(groups=(1, 1), **copy_kw("shipped"))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 12 + 5, seed=31)[0].tolist())
    n = st.n_chunks
    base = list(eng.generate(st, "tell me", max_new_tokens=70, stop_at_newline=False))
    tb = base[-1].trace.to_json()
    ev = [c for c, _ in eng.evidence(st, base[-1].trace)]
    far = next(c for c in range(n) if c not in ev and c not in _picked(tb))
    bias = torch.zeros(n)
    bias[far] = 1e4
    bias[(far + 5) % n] = 0.37
    eng.question_bias = lambda state, question, terms=None: bias if question == "tell me" else None
    out = list(eng.generate(st, "tell me", max_new_tokens=70, stop_at_newline=False))
    to = out[-1].trace.to_json()
    for rb, ro in zip(tb["chunks"][:1], to["chunks"][:1], strict=True):  # the question's selection: same learned scores
        for c, (sb, so) in enumerate(zip(rb["scores"], ro["scores"])):
            assert so == pytest.approx(sb + (float(bias[c]) if c < n else 0.0), abs=1e-2)
    assert all(far in r["topk"] for r in to["chunks"])  # every landmark of the fork picks it
    ids = out[-1].ids
    eff = eng.causal_effects(st, "tell me", ids, [far])
    assert eff[far] == pytest.approx(eng.answer_logprob(st, "tell me", ids)
                                     - eng.answer_logprob(st, "tell me", ids, mask=[far]), abs=1e-9)
    assert eff[far] != 0.0  # the favoured chunk is read: masking it changes the answer's likelihood
    # no question (a summary), or the term off: nothing is added
    eng.question_bias = Engine.question_bias.__get__(eng)
    assert eng.question_bias(st, "tell me") is None and eng.question_bias(st, None) is None


def test_question_terms_steer_the_selection_and_question_scores_rank_as_it_does():
    """qa.ask's cross-encoder term (`terms=`): added to the question's selection scores as the BM25
    term is, in generate, question_scores and the causal effects alike; without terms nothing moves."""
    m = make_model(groups=(1, 1), **copy_kw("shipped"))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 12 + 5, seed=33)[0].tolist())
    n = st.n_chunks
    s0 = eng.question_scores(st, "tell me")
    assert s0.shape == (n,) and np.isfinite(s0).all()
    base = list(eng.generate(st, "tell me", max_new_tokens=8, stop_at_newline=False))[-1]
    assert base.trace.to_json()["chunks"][0]["scores"][:n] == pytest.approx(s0.tolist(), abs=1e-3)
    far = int(np.argmin(s0))
    terms = np.zeros(n)
    terms[far] = 1e4
    s1 = eng.question_scores(st, "tell me", terms=terms)
    assert s1[far] == pytest.approx(s0[far] + 1e4, abs=1e-2) and np.delete(s1 - s0, far) == pytest.approx(0, abs=1e-4)
    out = list(eng.generate(st, "tell me", max_new_tokens=8, stop_at_newline=False, terms=terms))[-1]
    assert far in out.trace.to_json()["chunks"][0]["topk"]
    eff = eng.causal_effects(st, "tell me", out.ids, [far], terms=terms)
    assert eff[far] == pytest.approx(eng.answer_logprob(st, "tell me", out.ids, terms=terms)
                                     - eng.answer_logprob(st, "tell me", out.ids, mask=[far], terms=terms), abs=1e-9)
    assert np.isneginf(eng.question_scores(st, "tell me", mask=[far])[far])


def test_bm25_index_is_the_documents_chunks(monkeypatch):
    """Engine.bm25_index reads the stored chunks' token ids (decoded), one unit per chunk, and
    question_bias is bm25_weight x its scores; a fork uses its base's index."""
    m = make_model(groups=(1, 1), **copy_kw("shipped"))
    eng = Engine(m, tokenizer=_Tok(), memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids_of(63 * 6 + 5, seed=32)[0].tolist())
    ix = eng.bm25_index(st)
    assert ix.n == st.n_chunks
    word = _Tok().decode(st.memory.tokens(np.arange(2, 3))[0].tolist())  # chunk 2's text: one "word"
    monkeypatch.setattr(eng.cfg, "bm25_weight", 2.5)
    b = eng.question_bias(st, word)
    assert b is not None and float(b[2]) == float(b.max()) > 0  # chunk 2 (and, with bm25_window, its neighbours)
    np.testing.assert_allclose(b.numpy(), 2.5 * ix.scores(word), rtol=1e-6)
    assert eng.bm25_index(st.fork()) is ix


def test_question_time_selections_leave_the_word_gates_out(one_thread):
    """lexical_gates: a generation fork (counterfactual.masked_fork: an answer, with or without the
    question's selection term) scores without the gated term, as the same model with its gates' scale
    at 0; a plain fork (a passage read after the document, as the prefill reads) keeps it."""
    from drt_core import counterfactual

    m = make_model(groups=(1, 1), **copy_kw("lexgates"))
    ids = ids_of(63 * 8, seed=4)[0].tolist()
    eng = Engine(m, memory_dtype=np.float32)
    st = eng.new_state()
    eng.feed(st, ids[: 63 * 6])
    scale = m.lexical.gates.detach().clone()

    def scores(bias, scale_on):
        with torch.no_grad():
            m.lexical.gates.copy_(scale if scale_on else torch.zeros_like(scale))
        fork = counterfactual.masked_fork(st, frozenset(), bias) if bias is not False else st.fork()
        rec = []
        eng.feed(fork, ids[63 * 6:], record=rec)
        return [r["scores"] for r in rec if r["group"] == 0]

    zero = torch.zeros(st.n_chunks)
    assert scores(zero, True) == scores(zero, False)  # a question's selections: no gated term
    assert scores(None, True) == scores(None, False)  # a generation without a question's term: none either
    assert scores(False, True) != scores(False, False)  # a plain fork's: the gated term counts
    with torch.no_grad():
        m.lexical.gates.copy_(scale)
