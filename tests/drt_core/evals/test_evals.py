"""drt_core.evals (eval niah / eval ppl), the engine's faiss retrieval path, bench.prefill's
full-attention loop. Tiny random models (D = 64) and inputs of a few hundred to 2000 tokens."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from drt_core.evals import harness, lengths, niah, ppl
from drt_core.hf_config import DRTConfig
from drt_core.engine import Engine
from drt_core.errors import DRTError
from drt_core.memory_index import MemoryIndex
from drt_core.drt import retrieval_scores
from drt_core.modeling import DRTForCausalLM
from drt_core.tokenizer import DEFAULT_PATH, encode, load_tokenizer
from store.chunk_store import RamChunkMemory

TINY = dict(vocab_size=8192, hidden_size=64, num_heads=2, intermediate_size=128, lower_layers=1,
            encoder_layers=1, upper_groups=[1], window=64, chunk_topk=2, gca_backend="reference")


def tiny_model(arch: str = "drt", seed: int = 0, **kw) -> DRTForCausalLM:
    torch.manual_seed(seed)
    cfg = DRTConfig(arch=arch, baseline_layers=None if arch == "drt" else 2, **(TINY | kw))
    return DRTForCausalLM(cfg).eval()


def entry(arch: str = "drt", **kw) -> harness.ModelEntry:
    """An engine over a tiny random model with the shipped tokenizer (tokenizer_path None = shipped)."""
    eng = Engine(tiny_model(arch, **kw), load_tokenizer(), fingerprint=f"test-{arch}")
    if arch == "full_attention":
        eng.stream.full_attention_capacity = 2048  # keeps the test's KV ring small
    return harness.ModelEntry(arch, None, eng, None)


@pytest.fixture(scope="module")
def haystack(tmp_path_factory) -> np.ndarray:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "assets" / "frankenstein_excerpt.txt").read_text()
    return np.asarray(encode(text), dtype=np.int64)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A tiny random DRT saved like a shipped checkpoint (weights + the shipped tokenizer)."""
    d = tmp_path_factory.mktemp("ckpt") / "tiny-drt"
    tiny_model("drt").save_pretrained(str(d))
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(DEFAULT_PATH / f, d / f)
    return d


# ------------------------------------------------------------------------------------------------
# lengths


@pytest.mark.parametrize("s,n", [("4k", 4096), ("64K", 65536), ("1m", 1048576), ("16m", 16 * 1048576),
                                 ("1.5k", 1536), ("4000", 4000), (" 2k ", 2048), (700, 700)])
def test_parse_length(s, n):
    assert lengths.parse_length(s) == n


@pytest.mark.parametrize("bad", ["abc", "0", "-1k", "1.0001k", "k", "", "4x"])
def test_parse_length_rejects(bad):
    with pytest.raises(DRTError):
        lengths.parse_length(bad)


def test_parse_lengths_and_format():
    assert lengths.parse_lengths("4k,64k,1m,16m") == [4096, 65536, 1048576, 16777216]
    assert [lengths.format_length(n) for n in (4096, 1048576, 4000)] == ["4k", "1m", "4000"]
    with pytest.raises(DRTError):
        lengths.parse_lengths(" , ")


# ------------------------------------------------------------------------------------------------
# niah


def test_niah_examples_are_seeded(haystack):
    d = niah.niah_depths(3)
    assert d == [0.0, 0.5, 1.0]
    a = niah.niah_example("single", haystack, 800, 1, 7, d, "train", None)
    b = niah.niah_example("single", haystack, 800, 1, 7, d, "train", None)
    c = niah.niah_example("single", haystack, 800, 1, 8, d, "train", None)
    assert np.array_equal(a.ids, b.ids) and a.answer == b.answer
    assert not np.array_equal(a.ids, c.ids)
    assert a.meta["depth"] == 0.5 and a.ids.size == 800


def test_niah_end_to_end(haystack, tmp_path):
    models = [entry("drt"), entry("sliding_window"), entry("fixed_retriever")]  # every arch streams
    res = niah.run_niah(models, [700, 1500], task="single", haystack=haystack, samples=2, depths=2, seed=3,
                      memmap_above=1000, tmp_dir=str(tmp_path))
    assert res["depths"] == [0.0, 1.0] and res["lengths"] == [700, 1500]
    assert [m["arch"] for m in res["models"]] == ["drt", "sliding_window", "fixed_retriever"]
    for m in res["models"]:
        assert len(m["results"]) == 2
        for r in m["results"]:
            assert r["status"] == "ok" and r["n"] == 2
            for k in ("accuracy", "first_token_acc", "teacher_forced_acc"):
                assert 0.0 <= r[k] <= 1.0
            assert r["teacher_forced_acc"] <= r["first_token_acc"]
            assert [d["depth"] for d in r["per_depth"]] == [0.0, 1.0]
            assert all(d["n"] == 1 for d in r["per_depth"])
            assert r["seconds"] > 0 and r["peak_rss_mb"] > 0 and r["prefill_tokens_per_s"] > 0
            assert all(isinstance(s["generated"], str) for s in r["samples"])
        assert m["results"][0]["tier"] == "ram"
    assert res["models"][0]["results"][1]["tier"].startswith("memmap")  # DRT above memmap_above
    assert res["models"][1]["results"][1]["tier"] == "ram"  # no chunk memory in the baseline
    assert res["models"][2]["results"][1]["tier"].startswith("memmap")  # a reopened memory re-embeds its chunks
    # the same examples for every model
    ans = [[s["answer"] for r in m["results"] for s in r["samples"]] for m in res["models"]]
    assert ans[0] == ans[1] == ans[2]
    assert list(tmp_path.iterdir()) == []  # temporary states removed
    json.dumps(res)  # serialisable


def test_niah_first_token_matches_generation(haystack):
    """The first generated token is the argmax at the prompt's last position: generation correct
    implies first-token correct (greedy)."""
    res = niah.run_niah([entry("drt")], [600], haystack=haystack, samples=3, depths=3, seed=1)
    for s in res["models"][0]["results"][0]["samples"]:
        if s["correct"]:
            assert s["first_token"]


def test_full_attention_over_capacity_is_na(haystack, tmp_path):
    fa = entry("full_attention")
    fa.engine.stream.full_attention_capacity = 512
    res = niah.run_niah([fa], [500, 900], haystack=haystack, samples=1, depths=1, seed=0)
    r0, r1 = res["models"][0]["results"]
    assert r0["status"] == "ok"
    assert r1["status"].startswith("n/a: exceeds capacity")
    f = tmp_path / "toks.bin"
    haystack[:2000].astype(np.uint16).tofile(f)
    pres = ppl.run_ppl([fa], [400, 900], file=str(f), windows=1)
    p0, p1 = pres["models"][0]["results"]
    assert p0["status"] == "ok" and math.isfinite(p0["ppl"])
    assert p1["status"].startswith("n/a: exceeds capacity") and p1["ppl"] == p1["status"]
    assert "n/a: exceeds capacity" in ppl.ppl_text(pres)


# ------------------------------------------------------------------------------------------------
# perplexity


@pytest.mark.parametrize("arch", ["drt", "sliding_window", "full_attention", "fixed_retriever"])
def test_ppl_equals_batch_model(haystack, tmp_path, arch):
    e = entry(arch)
    f = tmp_path / "toks.bin"
    haystack[:1500].astype(np.uint16).tofile(f)
    L = 700
    res = ppl.run_ppl([e], [L], file=str(f), windows=2)
    r = res["models"][0]["results"][0]
    assert r["status"] == "ok" and r["windows"] == 2 and r["predicted_tokens"] == 2 * (L - 1)
    losses = []
    with torch.no_grad():
        for w in range(2):
            ids = torch.from_numpy(haystack[w * L:(w + 1) * L].copy())[None]
            losses.append(float(e.engine.model(ids, labels=ids).loss))
    want = math.exp(sum(losses) / 2)  # equal token counts per window: mean of means = global mean
    assert abs(r["ppl"] - want) / want < 1e-4
    assert abs(r["window_ppl"][0] - math.exp(losses[0])) / math.exp(losses[0]) < 1e-4


def test_ppl_text_file_and_memmap_tier(haystack, tmp_path, assets):
    e = entry("drt")
    res = ppl.run_ppl([e], [600], file=str(assets / "frankenstein_excerpt.txt"), windows=1, memmap_above=500,
                     tmp_dir=str(tmp_path))
    r = res["models"][0]["results"][0]
    assert r["status"] == "ok" and r["tier"].startswith("memmap") and math.isfinite(r["ppl"])
    with torch.no_grad():
        ids = torch.from_numpy(haystack[:600].copy())[None]
        want = math.exp(float(e.engine.model(ids, labels=ids).loss))
    assert abs(r["ppl"] - want) / want < 1e-2  # fp16 K/V memory in the memmap tier
    short = ppl.run_ppl([e], [10**6], file=str(assets / "frankenstein_excerpt.txt"), windows=1)
    assert short["models"][0]["results"][0]["status"].startswith("n/a: the file has")


# ------------------------------------------------------------------------------------------------
# the command line


def test_cli_niah_and_ppl(ckpt, tmp_path, capsys, assets):
    import app

    rc = app.main(["--model", str(ckpt), "eval", "niah", "--lengths", "700", "--samples", "2", "--depths", "2",
                   "--haystack", str(assets / "frankenstein_excerpt.txt"), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    r = out["models"][0]["results"][0]
    assert out["task"] == "single" and r["label"] == "700" and r["n"] == 2 and out["models"][0]["arch"] == "drt"
    f = tmp_path / "toks.bin"
    np.asarray(encode((assets / "frankenstein_excerpt.txt").read_text())[:1400], np.uint16).tofile(f)
    rc = app.main(["--model", str(ckpt), "eval", "ppl", "--file", str(f), "--lengths", "700,2k",
                   "--models", f"{ckpt},{ckpt}", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in out["models"]] == ["tiny-drt", "tiny-drt#2"]
    a, b = (m["results"] for m in out["models"])
    assert a[0]["ppl"] == b[0]["ppl"] and a[1]["status"].startswith("n/a")
    rc = app.main(["--model", str(ckpt), "eval", "ppl", "--file", str(f), "--lengths", "7q"])
    assert rc == 2
    assert "bad length" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# faiss retrieval = exact retrieval


def _exact_and_faiss(eng, index, q, q_chunk):
    keys = torch.from_numpy(index.memory.keys())
    scores = retrieval_scores(q[None], keys[None], q_chunk, torch.arange(keys.shape[0]))[0]
    eng.stream.use_faiss = False
    ie, we = eng.stream.topk(scores, index, q, q_chunk)
    eng.stream.use_faiss = True
    i_f, wf = eng.stream.topk(None, index, q, q_chunk)
    return ie, we, i_f, wf


@pytest.mark.parametrize("n,k,qchunks", [(200, 4, [185, 190, 199]), (30, 4, list(range(14, 30))),
                                         (3, 4, [1, 2]), (1, 2, [0]), (50, 8, [5, 49])])
def test_faiss_topk_equals_exact(n, k, qchunks):
    g = torch.Generator().manual_seed(n)
    D = 64
    eng = Engine(tiny_model("drt", chunk_topk=k), None, fingerprint="t")
    mem = RamChunkMemory(D, 63, 1, k)
    keys = torch.randn(n, D, generator=g)
    mem.append(keys.numpy(), np.zeros((n, 63, D), np.float32), np.zeros((n, 63, D), np.float32),
               np.zeros((n, 1, k), np.int32), np.zeros((n, 1, k), np.float32))
    q = torch.randn(len(qchunks), D, generator=g)
    qc = torch.tensor(qchunks)
    ie, we, i_f, wf = _exact_and_faiss(eng, MemoryIndex(mem, eng.device), q, qc)
    assert ie.shape == i_f.shape == (len(qchunks), k)
    assert torch.equal(ie, i_f)
    torch.testing.assert_close(we, wf, rtol=1e-5, atol=1e-6)
    # strict causality and the padding convention
    for j, c in enumerate(qchunks):
        used = wf[j] > 0
        assert (i_f[j][used] < c).all() and int(used.sum()) == min(k, c)
        assert (i_f[j][~used] == 0).all()


def test_faiss_incremental_index_grows_and_rebuilds():
    eng = Engine(tiny_model("drt"), None, fingerprint="t", use_faiss=True)
    D, k = 64, 2
    mem = RamChunkMemory(D, 63, 1, k)
    index = MemoryIndex(mem, eng.device)
    g = torch.Generator().manual_seed(1)

    def add(m):
        mem.append(torch.randn(m, D, generator=g).numpy(), np.zeros((m, 63, D), np.float32),
                   np.zeros((m, 63, D), np.float32), np.zeros((m, 1, k), np.int32), np.zeros((m, 1, k), np.float32))

    for step in range(4):
        add(10)
        q = torch.randn(2, D, generator=g)
        qc = torch.tensor([mem.n - 1, mem.n - 1])
        ie, we, i_f, wf = _exact_and_faiss(eng, index, q, qc)
        assert torch.equal(ie, i_f)
        assert index.faiss.ntotal == mem.n
    mem.truncate(15)  # a reopened / truncated memory rebuilds its index
    ie, we, i_f, wf = _exact_and_faiss(eng, index, torch.randn(1, D, generator=g), torch.tensor([15]))
    assert torch.equal(ie, i_f) and index.faiss.ntotal == 15


def test_faiss_engine_stream_equals_exact(haystack):
    """Whole streams: same selections (the stored dependency map) and the same logits."""
    ids = haystack[:1800].tolist()
    outs = []
    for use_faiss in (False, True):
        eng = Engine(tiny_model("drt"), None, fingerprint="t", use_faiss=use_faiss)
        st = eng.new_state()
        lg = torch.cat([eng.feed(st, ids[i:i + 500], want_logits=True) for i in range(0, len(ids), 500)])
        outs.append((lg, *st.memory.selections()))
    (l0, i0, w0), (l1, i1, w1) = outs
    assert np.array_equal(i0, i1)
    np.testing.assert_allclose(w0, w1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(l0, l1, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------
# bench.prefill's growing-cache full attention is the batch model


def test_bench_full_attention_kv_loop_matches_batch():
    from bench.prefill import fa_growing_prefill, parse_length

    assert parse_length("16k") == 16384 and parse_length("1m") == 1048576
    m = tiny_model("full_attention")
    ids = np.random.RandomState(0).randint(8, 8192, 300)
    x = fa_growing_prefill(m, ids, block=128)
    with torch.no_grad():
        ref = m(torch.from_numpy(ids)[None]).logits[0, 256:]
        got = m.lm_head(m.norm(x))[0]
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


def test_bench_prefill_measures_landmark_on_request(tmp_path):
    """`--archs landmark` streams the Landmark baseline; above --landmark-max it is not run."""
    from bench.prefill import main

    tokens = tmp_path / "t.bin"
    np.random.RandomState(0).randint(8, 8192, 3000).astype(np.uint16).tofile(tokens)
    out = tmp_path / "r.json"
    assert main(["--archs", "landmark", "--lengths", "2k,4k", "--landmark-max", "2k", "--tokens", str(tokens),
                 "--threads", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["arch"] == "landmark" and rows[0]["status"] == "ok" and rows[0]["tokens_per_s"] > 0
    assert rows[1]["status"].startswith("not run: memory grows")


# ----------------------------------------------------------------------------------------------
# bench.niah_retrieval --semantic: the fixed retriever's (frozen MiniLM) hit on a NIAH example


def test_semantic_hit_finds_the_chunk_with_the_same_text(assets):
    """Row r's text is an exact copy of chunk 2: with k = 1 the MiniLM retriever must select chunk 2
    and nothing else; chunks at or after the row are never candidates."""
    from bench.niah_retrieval import semantic_hit
    from drt_core.hf_config import DRTConfig
    from drt_core.tokenizer import encode

    cfg = DRTConfig.from_preset("tiny", chunk_topk=1)
    S1 = cfg.chunk_tokens
    ids = encode((assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8"))[: 6 * S1]
    prompt = ids + ids[2 * S1 : 3 * S1] + ids[:40]  # row 6 = chunk 2's text, then part of a chunk 7
    assert semantic_hit(prompt, 6, 2, cfg)
    assert not any(semantic_hit(prompt, 6, t, cfg) for t in (0, 1, 3, 4, 5))
    assert not semantic_hit(prompt, 2, 2, cfg)  # a chunk is not its own candidate


def test_niah_prefix_share_is_the_right_part_before_the_first_mistake():
    from bench.niah_retrieval import prefix_share

    assert prefix_share("84666", "84606") == 0.6
    assert prefix_share(" 84606", "84606") == 1.0
    assert prefix_share("9", "84606") == 0.0
    assert prefix_share("846061234", "84606") == 1.0  # extra text after the answer: still all of it
    assert prefix_share("", "84606") == 0.0


@pytest.mark.parametrize("qenc", [0, 1, "context", "lexical"])
def test_niah_landmark_rank_is_the_engines_ranking(haystack, qenc):
    """bench.niah_retrieval --retrieval-only ranks the needle's chunk from model.landmarks; the
    engine's streamed scores (fp16 keys) give the same rank for every target, and rank <= k is
    exactly 'in the engine's selection' (also with keys that read the chunk before, key_context,
    and with the lexical terms, whose part bench niah_miss reports: total = dense + lexical)."""
    from bench.niah_retrieval import landmark_scores, score_rank

    ctx, lex = qenc == "context", qenc == "lexical"
    kw = dict(lexical=True, lexical_doc_df=1.0, lexical_words=2.0) if lex else {}
    m = tiny_model("drt", lower_layers=2, query_encoder=int(bool(qenc) and not lex), key_encoder=int(ctx),
                   key_context=9 if ctx else 0, **kw)
    if qenc and not lex:
        with torch.no_grad():
            m.query_projs[0].weight.normal_(0, 0.3)
            if ctx:
                m.key_enc.context.o.weight.normal_(0, 0.3)
    eng = Engine(m, load_tokenizer(), fingerprint="test-rank")
    S1 = m.config.chunk_tokens
    ids = haystack[: 14 * S1 + 5].tolist()
    st = eng.new_state()
    rec = []
    eng.feed(st, ids, record=rec)
    row = 13
    scores = np.array(next(r for r in rec if r["lmk_chunk"] == row)["scores"])
    sel = set(st.memory.selections()[0][row, 0].tolist())
    s = landmark_scores(eng, ids, row)
    for t in range(row):
        rank = score_rank(s, t)
        assert rank == int((scores > scores[t]).sum()) + 1
        assert (rank <= m.config.chunk_topk) == (t in sel)
    total, dense = landmark_scores(eng, ids, row, parts=True)
    assert torch.equal(total, s)
    assert torch.equal(total, dense) != lex  # the lexical part is there exactly when configured


def test_lemma_selection_from_landmarks_is_the_forwards(haystack):
    """bench.lemma_retrieval.drt_selection (landmarks only) == the full forward's group-0 selection,
    unfilled slots of the first rows marked -1."""
    from bench.lemma_retrieval import drt_selection

    m = tiny_model("drt", lower_layers=2, chunk_topk=3)
    ids = haystack[: 11 * 63 + 20].tolist()
    with torch.no_grad():
        r = m(torch.tensor([ids]), output_retrieval=True).retrieval[0]
    want = r["idx"][0].clone()
    want[r["weights"][0] <= 0] = -1
    got = drt_selection(m, ids)
    assert got.shape == want.shape == (12, 3)
    assert [set(a.tolist()) for a in got] == [set(a.tolist()) for a in want]
    assert (got[0] == -1).all() and (got[2] >= 0).sum() == 2


def test_niah_readable_counts_the_copy_span():
    """The value is readable from its own chunk (running on into the next by at most the span),
    or from the chunk before when it lies within the span's first slots."""
    from bench.niah_retrieval import readable

    S1, span = 63, 16
    assert readable({5}, 5 * 63 + 10, 5 * 63 + 15, S1, span)
    assert readable({5}, 5 * 63 + 60, 6 * 63 + 3, S1, span)  # across: the tail is in the span
    assert not readable({5}, 5 * 63 + 60, 6 * 63 + 17, S1, 16)
    assert readable({4}, 5 * 63 + 0, 5 * 63 + 6, S1, span)  # from the chunk before, through the span
    assert not readable({4}, 5 * 63 + 12, 5 * 63 + 18, S1, span)
    assert not readable({4}, 5 * 63 + 0, 5 * 63 + 6, S1, 0)  # no span: the chunk before is no use
    assert not readable({3, 6}, 5 * 63, 5 * 63 + 5, S1, span)
    # copy_lead: the chunk after the value's reads the value's chunk's last slots
    assert readable({6}, 5 * 63 + 55, 5 * 63 + 61, S1, 0, lead=8)
    assert readable({6}, 5 * 63 + 60, 6 * 63 + 3, S1, 0, lead=8)  # across, from the chunk after
    assert not readable({6}, 5 * 63 + 54, 5 * 63 + 60, S1, span, lead=8)
    assert not readable({6}, 5 * 63 + 55, 5 * 63 + 61, S1, span, lead=0)


def test_niah_bench_makes_its_state_dir(ckpt, haystack, tmp_path, capsys):
    """Regression: `bench.niah_retrieval --state-dir D` failed with FileNotFoundError, after loading
    the haystack, when D did not exist yet; it now makes D (and removes each sample's memory)."""
    from bench.niah_retrieval import main

    hay = tmp_path / "hay.bin"
    haystack.astype(np.uint16).tofile(hay)
    sdir = tmp_path / "new" / "states"
    assert main(["--model", str(ckpt), "--lengths", "2k", "--samples", "1", "--haystack", str(hay),
                 "--state-dir", str(sdir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"]["2048"]["samples"] == 1
    assert sdir.is_dir() and not any(sdir.iterdir())


def test_niah_score_trace_reads_only_the_serving_landmark(haystack):
    """bench.niah_retrieval's trace of a miss: recorded from a feed split before the last chunk, it
    holds the serving landmark only, and its rank/top-k agree with that landmark's selection."""
    from bench.niah_retrieval import score_trace

    m = tiny_model("drt", lower_layers=2)
    eng = Engine(m, load_tokenizer(), fingerprint="test-trace")
    S1 = m.config.chunk_tokens
    ids = haystack[: 14 * S1].tolist()
    st = eng.new_state()
    cut = len(ids) - S1
    eng.feed(st, ids[:cut])
    rec = []
    eng.feed(st, ids[cut:], record=rec)
    assert {r["lmk_chunk"] for r in rec} == {13}
    sel = set(st.memory.selections()[0][13, 0].tolist())
    k = m.config.chunk_topk
    for t in range(13):
        tr = score_trace(rec, 13, t, k)
        assert (tr["rank"] <= k) == (t in sel)
        assert set(tr["top_chunks"]) == sel and len(tr["top_scores"]) == k
        assert tr["top_scores"] == sorted(tr["top_scores"], reverse=True)
    assert score_trace(rec, 12, 0, k) == {}  # a landmark that was not recorded: no trace


def test_niah_peak_rss_is_at_least_the_current_rss():
    """bench.niah_retrieval records the process's peak memory (the 16M run's figure): in GB, never
    below what the process holds now (/proc's VmRSS, in kB)."""
    from bench.niah_retrieval import peak_rss_gb

    held = np.ones(64 * 2**20 // 8)  # 64 MB, touched
    now_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
    assert peak_rss_gb() >= now_kb / 2**20 - 0.01 > 0.05 and held.sum() > 0
