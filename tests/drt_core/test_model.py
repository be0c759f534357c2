"""DRTForCausalLM and its baselines on tiny CPU shapes (docs/spec.md §1-§3, §7).

Causality (every architecture), the retrieval rules (strictly earlier chunks, row c serves chunk c+1,
Gumbel noise only when training), the GCA residual bypass, gradients through the fusion weights,
any input length, the loss, checkpoints and the configuration presets.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from drt_core import DRTConfig, DRTForCausalLM, drt, modeling
from drt_core.attention import alibi_slopes
from drt_core.config import EXTENSIONS, PAPER_FLAVOUR
from drt_core.train.model import init_added_encoder_layers, init_retrieval_encoders
from drt_core.train.objective import training_forward
from tests.drt_core.flavours import FLAVOURS, flavour_kw, toy_word_tables

V = 300
TINY = dict(
    vocab_size=V, hidden_size=64, num_heads=2, intermediate_size=128, lower_layers=1, encoder_layers=1,
    upper_groups=[1], window=128, chunk_topk=2,
)
ARCHS = ("drt", "sliding_window", "full_attention", "fixed_retriever", "landmark")
S1 = 63  # real tokens per chunk


def make(arch: str = "drt", **kw) -> DRTForCausalLM:
    torch.manual_seed(0)
    return DRTForCausalLM(DRTConfig.from_preset("tiny", arch=arch, **{**TINY, **kw})).eval()


def rand_ids(B: int, L: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, V, (B, L), generator=g)


def fake_chunk_embeddings(ids: torch.Tensor, dim: int = 16) -> torch.Tensor:
    """Stand-in for MiniLM: unit bag-of-tokens vector per chunk of 63, a function of that chunk only."""
    B, L = ids.shape
    C = max(1, -(-L // S1))
    proj = torch.randn(V, dim, generator=torch.Generator().manual_seed(7))
    e = torch.stack([proj[ids[:, c * S1 : (c + 1) * S1]].sum(1) for c in range(C)], dim=1)
    return F.normalize(e + 1e-3, dim=-1)  # [B, C, dim]


def logits_of(model: DRTForCausalLM, ids: torch.Tensor, **kw) -> torch.Tensor:
    if model.config.arch == "fixed_retriever" and "chunk_embeddings" not in kw:
        kw["chunk_embeddings"] = fake_chunk_embeddings(ids)
    with torch.no_grad():
        return model(ids, **kw).logits


def assert_causal(model: DRTForCausalLM, ids: torch.Tensor, positions) -> None:
    base = logits_of(model, ids)
    for t in positions:
        ids2 = ids.clone()
        ids2[:, t] = (ids[:, t] - 3 + 1 + t % 7) % (V - 3) + 3
        new = logits_of(model, ids2)
        torch.testing.assert_close(new[:, :t], base[:, :t], rtol=0, atol=1e-6,
                                   msg=f"logits before t={t} changed")
        assert not torch.allclose(new[:, t:], base[:, t:]), f"changing token {t} changed nothing after it"


def assert_causal_mask(scores: torch.Tensor) -> None:
    """scores [..., C, C]: -inf exactly where key chunk e >= query chunk c."""
    C = scores.shape[-1]
    future = torch.ones(C, C, dtype=torch.bool).triu()
    assert torch.isneginf(scores[..., future]).all() and torch.isfinite(scores[..., ~future]).all()


# ----------------------------------------------------------------------------------------------
# causality


# positions on both sides of the chunk boundaries 63, 126, 189, 252 (retrieval serves chunks >= 2)
EDGES = [0, 61, 62, 63, 64, 125, 126, 127, 188, 189, 251, 252, 290]


@pytest.mark.parametrize(
    "arch,groups", [("drt", [1]), ("drt", [1, 1]), ("sliding_window", [1]), ("full_attention", [1]),
                    ("fixed_retriever", [1]), ("fixed_retriever", [1, 1])],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_causal_all_archs(arch, groups):
    """Changing token t changes no logit before t (eval: retrieval active, no noise)."""
    model = make(arch, upper_groups=groups)
    ids = rand_ids(2, 5 * S1 - 20)
    extra = torch.randint(0, ids.shape[1], (4,), generator=torch.Generator().manual_seed(1)).tolist()
    assert_causal(model, ids, EDGES + extra)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_causal_flavours(flavour):
    """The paper's model (the `paper` preset) and the shipped one (every extension its config.json
    switches on, with the weights that start as no-ops woken up) are causal."""
    from tests.drt_core.test_engine import make_model

    model = make_model("drt", (1,), **flavour_kw(flavour))
    assert bool(model.config.extensions_on()) == (flavour == "shipped")
    assert_causal(model, rand_ids(2, 5 * S1 - 20), EDGES)


def test_causal_with_copy_head():
    """The pointer reads only chunks that retrieval may read."""
    model = make("drt", copy_head=True)
    with torch.no_grad():
        model.copy_head.gate.bias.fill_(0.5)
        model.copy_head.q.weight.normal_(0, 0.3)
    ids = rand_ids(2, 5 * S1 - 20)
    assert_causal(model, ids, EDGES)


def test_causal_fixed_retriever_real_minilm(assets):
    """The RPT baseline with the frozen MiniLM embedder itself (no precomputed embeddings)."""
    from drt_core.fixed_retriever import embed_chunks
    from drt_core.tokenizer import encode

    text = (assets / "frankenstein_excerpt.txt").read_text(encoding="utf-8")
    model = make("fixed_retriever", vocab_size=8192)
    ids = torch.tensor([encode(text[:6000])[: 4 * S1 + 10]])
    e = embed_chunks(ids, model.config)
    assert e.shape == (1, 5, 384)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(1, 5))
    with torch.no_grad():
        base = model(ids, output_retrieval=True)
        torch.testing.assert_close(model(ids, chunk_embeddings=e).logits, base.logits, rtol=0, atol=0)
    # cosine scores / temperature, strictly causal
    s = base.retrieval[0]["scores"][0]
    torch.testing.assert_close(s[3, :3], (e[0, 3] @ e[0, :3].T) / model.config.retriever_temperature)
    assert_causal_mask(s)
    for t in (70, 200):
        ids2 = ids.clone()
        ids2[0, t] = 1000 + t
        with torch.no_grad():
            new = model(ids2).logits
        torch.testing.assert_close(new[:, :t], base.logits[:, :t], rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# retrieval


@pytest.mark.parametrize("arch,groups", [("drt", [1]), ("drt", [1, 1]), ("fixed_retriever", [1])])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_retrieval_selects_only_earlier_chunks(arch, groups, train):
    """Row c (the landmark of chunk c, serving chunk c+1) gives weight only to chunks e < c."""
    model = make(arch, upper_groups=groups, chunk_topk=3)
    model.train(train)
    C = 8
    ids = rand_ids(2, C * S1)
    out = model(ids, output_retrieval=True, chunk_embeddings=fake_chunk_embeddings(ids))
    assert len(out.retrieval) == len(groups)
    for r in out.retrieval:
        idx, w, s = r["idx"], r["weights"], r["scores"]
        assert idx.shape == w.shape == (2, C, 3) and s.shape == (2, C, C)
        rows = torch.arange(C).view(1, C, 1).expand_as(idx)
        assert (idx[w > 0] < rows[w > 0]).all()
        assert (w >= 0).all()
        # every row with c >= 1 candidates puts all its weight on min(c, k) of them
        torch.testing.assert_close(w.sum(-1)[:, 1:], torch.ones(2, C - 1))
        assert ((w > 0).sum(-1) == torch.arange(C).clamp(max=3)).all()
        assert_causal_mask(s)


def test_first_chunks_get_no_gca_and_chunk2_reads_chunk0(monkeypatch):
    """Chunk 0 is never served; chunk 1 gets zero weight (row 0 has no candidate); chunk 2 reads
    chunk 0 with weight 1 (row 1's only candidate)."""
    outputs = []
    real = modeling.DRTForCausalLM.batch_gca

    def spy(self, *a, **kw):
        fn = real(self, *a, **kw)

        def wrapped(gca_mod, x):
            o = fn(gca_mod, x)
            outputs.append(o.detach())
            return o

        return wrapped

    monkeypatch.setattr(modeling.DRTForCausalLM, "batch_gca", spy)
    model = make("drt", chunk_topk=2)
    ids = rand_ids(2, 4 * S1)
    with torch.no_grad():
        out = model(ids, output_retrieval=True)
    idx, w = out.retrieval[0]["idx"], out.retrieval[0]["weights"]
    assert (w[:, 0] == 0).all()
    assert (idx[:, 1, 0] == 0).all() and (w[:, 1, 0] == 1).all() and (w[:, 1, 1:] == 0).all()
    (o,) = outputs
    o = o.view(2, 4, 64, -1)
    assert (o[:, 0] == 0).all() and (o[:, 1] == 0).all()
    assert (o[:, 2].abs().sum(-1) > 0).all() and (o[:, 3].abs().sum(-1) > 0).all()


def test_gumbel_noise_only_in_training():
    model = make("drt", chunk_topk=2)
    ids = rand_ids(1, 12 * S1)

    def run(seed):
        torch.manual_seed(seed)
        with torch.no_grad():
            out = model(ids, output_retrieval=True)
        return out.retrieval[0]["idx"], out.logits

    ref_idx, ref_logits = run(0)
    for seed in (1, 2):
        idx, logits = run(seed)
        assert torch.equal(idx, ref_idx) and torch.equal(logits, ref_logits)
    model.train()
    a, b = run(0), run(0)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    picks = {tuple(run(seed)[0].flatten().tolist()) for seed in range(6)}
    assert len(picks) > 1, "training-mode selection does not depend on the seed"
    # the fusion weights are the softmax of the CLEAN scores over the selected chunks
    torch.manual_seed(3)
    r = model(ids, output_retrieval=True).retrieval[0]
    picked = r["scores"].gather(-1, r["idx"])[0, 5:]
    torch.testing.assert_close(r["weights"][0, 5:], torch.softmax(picked, -1))


# ----------------------------------------------------------------------------------------------
# residual wiring and gradients


def test_upper_block_gca_bypasses_residual():
    """y = a + MLP(norm2(a + GCA(a))): GCA enters the FFN input only (spec §3.2)."""
    cfg = DRTConfig.from_preset("tiny", **TINY)
    blk = drt.UpperBlock(cfg)
    x = torch.randn(1, 128, 64)
    gca_out = torch.randn(1, 128, 64)
    seen = []
    blk.mlp.register_forward_hook(lambda mod, inp, out: seen.append((inp[0], out)))
    y = blk(x, lambda mod, a: gca_out)
    a = x + blk.attn(blk.norm1(x))
    (mlp_in, mlp_out), = seen
    torch.testing.assert_close(mlp_in, blk.norm2(a + gca_out))
    torch.testing.assert_close(y, a + mlp_out)


def test_model_gca_reaches_logits_only_through_ffn(monkeypatch):
    """With the upper FFNs silenced, scaling the GCA output changes nothing; with them, it does.
    A model that put GCA on the residual stream would fail the first assertion."""
    model = make("drt", upper_groups=[1, 1])
    ids = rand_ids(1, 5 * S1)
    real_fwd = drt.GCA.forward
    monkeypatch.setattr(drt.GCA, "forward", lambda self, *a: 100.0 * real_fwd(self, *a))
    loud = logits_of(model, ids)
    monkeypatch.setattr(drt.GCA, "forward", real_fwd)
    assert not torch.allclose(loud, logits_of(model, ids))

    class Zero(torch.nn.Module):
        def forward(self, x):
            return torch.zeros_like(x)

    for group in model.groups:
        for blk in group:
            blk.mlp = Zero()
    quiet = logits_of(model, ids)
    monkeypatch.setattr(drt.GCA, "forward", lambda self, *a: 100.0 * real_fwd(self, *a))
    torch.testing.assert_close(logits_of(model, ids), quiet, rtol=0, atol=0)


def _nonzero_finite(grads: dict, names) -> None:
    for n in names:
        g = grads.get(n)
        assert g is not None, f"{n}: no gradient"
        assert torch.isfinite(g).all(), f"{n}: non-finite gradient"
        assert g.abs().sum() > 0, f"{n}: zero gradient"


@pytest.mark.parametrize("groups", [[1], [1, 1]])
def test_gradients_flow_through_fusion_weights(monkeypatch, groups):
    """d(f(w))/dθ is non-zero and finite for the query norms, the encoder (its landmark output), the
    lower layers and the embedding: the retriever learns only through w (spec §2)."""
    captured = []
    real = drt.select_topk
    monkeypatch.setattr(drt, "select_topk",
                        lambda *a, **kw: captured.append(real(*a, **kw)) or captured[-1])
    model = make("drt", upper_groups=groups, chunk_topk=2).train()
    torch.manual_seed(0)
    model(rand_ids(2, 6 * S1))
    assert len(captured) == len(groups)
    probe = sum((w * torch.randn(w.shape, generator=torch.Generator().manual_seed(i))).sum()
                for i, (_, w) in enumerate(captured))
    params = dict(model.named_parameters())
    grads = dict(zip(params, torch.autograd.grad(probe, list(params.values()), allow_unused=True)))
    names = [f"lmk_norms.{g}.weight" for g in range(len(groups))]
    names += ["encoder.prenorm.weight", "encoder.norm.weight", "encoder.layers.0.qkv.weight",
              "encoder.layers.0.mlp.down.weight", "lower.0.attn.qkv.weight", "lower.0.mlp.up.weight",
              "embed.weight"]
    if len(groups) == 1:
        _nonzero_finite(grads, names)
        # the memory projections do not take part in the scores
        assert grads["encoder.k_proj.weight"] is None and grads["encoder.v_proj.weight"] is None
    else:
        # group 1's query is the landmark state after group 0, which read the chunk memory (2-hop)
        names += ["groups.0.0.attn.qkv.weight", "groups.0.0.gca.q.weight", "encoder.k_proj.weight",
                  "encoder.v_proj.weight"]
        _nonzero_finite(grads, names)


def test_loss_gradients_with_memory_detached(monkeypatch):
    """Training loss with the K/V chunk memory cut off: the encoder and the query norm still learn
    (through w alone); the memory projections get nothing. All gradients finite, incl. chunk 1's
    empty row (no NaN from a softmax over nothing)."""
    real = modeling.DRTForCausalLM.batch_gca
    monkeypatch.setattr(modeling.DRTForCausalLM, "batch_gca",
                        lambda self, idx, w, mk, mv: real(self, idx, w, mk.detach(), mv.detach()))
    model = make("drt", chunk_topk=2).train()
    ids = rand_ids(2, 5 * S1)
    model(ids, labels=ids).loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    _nonzero_finite(grads, ["lmk_norms.0.weight", "encoder.prenorm.weight", "encoder.layers.0.qkv.weight",
                            "encoder.layers.0.mlp.gate.weight", "lower.0.attn.qkv.weight"])
    assert grads["encoder.k_proj.weight"] is None and grads["encoder.v_proj.weight"] is None
    assert all(torch.isfinite(g).all() for g in grads.values() if g is not None)


# ----------------------------------------------------------------------------------------------
# lengths and loss


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("L", [1, 62, 63, 64, 127])
def test_any_length(arch, L):
    model = make(arch).train()
    ids = rand_ids(2, L)
    out = model(ids, labels=ids, chunk_embeddings=fake_chunk_embeddings(ids))
    assert out.logits.shape == (2, L, V)
    assert torch.isfinite(out.logits).all()
    if L > 1:
        assert torch.isfinite(out.loss)
        out.loss.backward()


@pytest.mark.parametrize("arch", ["drt", "sliding_window"])
def test_loss_is_mean_ce_over_real_tokens(arch):
    model = make(arch)
    ids = rand_ids(2, 3 * S1 + 5)
    labels = ids.clone()
    labels[0, 10:40] = -100
    labels[1, -3:] = -100
    with torch.no_grad():
        out = model(ids, labels=labels)
    logp = out.logits[:, :-1].log_softmax(-1)
    tgt = labels[:, 1:]
    keep = tgt != -100
    ce = -logp.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(out.loss, ce[keep].mean())
    # weighted mean with label_weights aligned to labels
    wts = torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) * 4
    with torch.no_grad():
        wl = training_forward(model, ids, labels, wts).loss
    ww = wts[:, 1:] * keep
    torch.testing.assert_close(wl, (ce * ww).sum() / ww.sum())


# ----------------------------------------------------------------------------------------------
# checkpoints and configuration


@pytest.mark.parametrize("arch,groups,flavour", [("drt", [1, 1], None), ("sliding_window", [1], None),
                                                  ("drt", [1], "paper"), ("drt", [1], "shipped")])
def test_save_load_roundtrip(tmp_path, arch, groups, flavour):
    from transformers import AutoConfig, AutoModelForCausalLM

    from tests.drt_core.test_engine import make_model

    model = make_model(arch, groups, **flavour_kw(flavour)) if flavour else make(arch, upper_groups=groups)
    ids = rand_ids(1, 3 * S1)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    for loaded in (DRTForCausalLM.from_pretrained(tmp_path), AutoModelForCausalLM.from_pretrained(tmp_path)):
        assert type(loaded) is type(model)  # the class of its arch (DRTForCausalLM.__new__)
        loaded.eval()
        assert loaded.config.upper_groups == groups and loaded.config.arch == arch
        assert loaded.config.extensions_on() == model.config.extensions_on()
        assert torch.equal(logits_of(loaded, ids), logits_of(model, ids))
        assert loaded.lm_head.weight.data_ptr() == loaded.embed.weight.data_ptr()
    assert isinstance(AutoConfig.from_pretrained(tmp_path), DRTConfig)


def test_from_pretrained_restores_alibi_slopes(tmp_path):
    """Regression: the ALiBi slopes are a non-persistent buffer; transformers 5 materialises such
    buffers with torch.empty_like in from_pretrained and relies on _init_weights to fill them, which
    did not, so every loaded model (the engine, `train --init`) attended with garbage slopes."""
    make("drt").save_pretrained(tmp_path)
    loaded = DRTForCausalLM.from_pretrained(tmp_path)
    slopes = {n: b for n, b in loaded.named_buffers() if n.endswith("slopes")}
    assert len(slopes) == 2  # one lower, one upper self-attention
    for name, b in slopes.items():
        assert torch.equal(b, alibi_slopes(2)), name


CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


@pytest.mark.parametrize("name", sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").exists()))
def test_shipped_checkpoints_load_every_key(name):
    """Every checkpoint in checkpoints/ loads into the class of its arch with no key missing,
    unexpected or reshaped: the modules that left modeling.py (encoders, baselines, pretrained, drt, base)
    kept their state-dict keys. The tied head is the one key the file does not hold."""
    from safetensors import safe_open

    model, info = DRTForCausalLM.from_pretrained(CHECKPOINTS / name, output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (set(), set(), set())
    with safe_open(str(CHECKPOINTS / name / "model.safetensors"), "pt") as f:
        stored = set(f.keys())
    assert set(model.state_dict()) - stored == {"lm_head.weight"} and stored <= set(model.state_dict())
    assert isinstance(model, DRTForCausalLM) == model.config.uses_chunks


@pytest.mark.parametrize("arch", ARCHS)
def test_a_config_builds_the_class_of_its_arch(arch):
    """DRTForCausalLM(config) builds DRT, the fixed retriever (a DRT subclass) or a baseline, and a
    copy of each is of its class."""
    import copy

    from drt_core.baselines import BaselineForCausalLM
    from drt_core.modeling import FixedRetrieverForCausalLM

    model = make(arch)
    want = {"drt": DRTForCausalLM, "fixed_retriever": FixedRetrieverForCausalLM}.get(arch, BaselineForCausalLM)
    assert type(model) is want and type(copy.deepcopy(model)) is want


def test_each_extension_initialises_its_own_parameters():
    """_init_weights knows the model's layers, not the extensions' insides: the copy head's exact-feature
    biases and the lexical weights get their values from the modules' own reset_parameters (zero,
    the scales one, the idf scales their config values), so each starts as a no-op."""
    model = make(copy_head=True, copy_match=4, copy_recall=3, copy_recall_age=2, lexical=True,
                 lexical_doc_df=0.7, lexical_words=1.5)
    head, lex = model.copy_head, model.lexical
    with torch.no_grad():
        for p in (*head.parameters(), *lex.parameters()):
            p.fill_(0.123)
    for m in (head, lex):
        m.reset_parameters()
    for name in ("match_bias", "match_gate", "recall_bias", "recall_gate", "recall_age_bias"):
        assert (getattr(head, name) == 0).all(), name
    assert (head.q.weight == 0.123).all()  # its layers are the model's to initialise
    assert (lex.weight == 0).all() and (lex.scale == 1).all()
    assert torch.allclose(lex.doc, torch.tensor(0.7)) and torch.allclose(lex.words, torch.tensor(1.5))


def test_landmark_insertion_continues_a_stream():
    """insert_landmarks, the one layout of the batch forward (a whole sequence) and of the engine
    (each run, continuing from the real tokens it has): runs of any length laid out one after the
    other give the whole sequence's layout, a landmark after every 63rd real token."""
    from drt_core.base import insert_landmarks

    ids = rand_ids(1, 300)[0]
    whole, real = insert_landmarks(ids, 2, 64)
    assert whole.shape[0] == 300 + 300 // 63 and (whole[63::64] == 2).all() and int(real.sum()) == 300
    assert torch.equal(whole[real], ids)
    parts, start = [], 0
    for n in (1, 62, 1, 63, 100, 73):
        out, r = insert_landmarks(ids[start: start + n], 2, 64, start)
        assert torch.equal(out[r], ids[start: start + n])
        parts.append(out)
        start += n
    assert torch.equal(torch.cat(parts), whole)


def _expected_params(cfg: DRTConfig) -> int:
    """Parameter count of the architecture of spec §1.1, written out by hand."""
    D, F_, V_ = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    block = 4 * D * D + 3 * D * F_ + 2 * D  # qkv + o, SwiGLU, two RMSNorm gains
    if not cfg.uses_chunks:
        depth = cfg.baseline_layers or cfg.lower_layers + sum(cfg.upper_groups) + 2
        return V_ * D + depth * block + D
    encoder = D + cfg.encoder_layers * block + D + 2 * D * D  # prenorm, blocks, final norm, W_K, W_V
    upper = block + 2 * D * D + D  # + GCA Q/O and its pre-norm
    lmk_norms = cfg.num_groups * D
    return V_ * D + cfg.lower_layers * block + encoder + lmk_norms + sum(cfg.upper_groups) * upper + D


def _count(cfg: DRTConfig) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in DRTForCausalLM(cfg).parameters())


def test_every_config_field_is_the_papers_or_a_named_extension():
    """DRTConfig's fields are declared once, in one of four tables: the paper's architecture, the
    baselines' and implementation's choices, our extensions (PAPER_FLAVOUR, at their off values,
    their defaults), the special ids; a new extension joins PAPER_FLAVOUR with its comment in
    config.py and its row in docs/model.md."""
    from drt_core.config import ARCHITECTURE, FIELDS, IMPLEMENTATION, SPECIAL_IDS

    tables = [ARCHITECTURE, IMPLEMENTATION, PAPER_FLAVOUR, SPECIAL_IDS]
    assert sum(len(t) for t in tables) == len(FIELDS)  # disjoint
    assert tuple(PAPER_FLAVOUR) == EXTENSIONS
    # off by default: a checkpoint whose config.json predates an extension loads without it
    cfg = DRTConfig()
    assert {k: getattr(cfg, k) for k in EXTENSIONS} == PAPER_FLAVOUR
    assert {k: getattr(cfg, k) for k in ("arch", "hidden_size", "window", "gca_backend", "lmk_token_id")} == \
        {k: FIELDS[k] for k in ("arch", "hidden_size", "window", "gca_backend", "lmk_token_id")}
    assert DRTConfig.from_preset("paper").extensions_on() == {} and DRTConfig().extensions_on() == {}
    assert DRTConfig.from_preset("paper", copy_head=True).extensions_on() == {"copy_head": True}


def test_unknown_and_retired_config_keys():
    """A typo is refused, naming the valid keys (`copy_heads=true` trained without a copy head and
    said nothing); a retired extension loads at its off value (old config.json files) and is refused
    at any other; PretrainedConfig's own keys pass."""
    with pytest.raises(ValueError, match="unknown config key copy_heads; valid keys: arch, .*copy_head, "):
        DRTConfig(copy_heads=True)
    with pytest.raises(ValueError, match="unknown config keys bogus, copy_heads"):
        DRTConfig(copy_heads=True, bogus=1)
    old = DRTConfig(smear_keys=False, smear_init=0.0, detach_fusion_weights=False, query_key=False,
                    lexical_window=0.0, abstain_z=None, architectures=["DRTForCausalLM"], transformers_version="4")
    assert not hasattr(old, "smear_keys") and "abstain_z" not in old.to_dict()
    for key, on in [("smear_keys", True), ("abstain_z", 5.0), ("lexical_window", 0.5), ("query_key", True)]:
        with pytest.raises(ValueError, match=f"config {key}=.*retired"):
            DRTConfig(**{key: on})


def test_presets():
    tiny, small = DRTConfig.from_preset("tiny"), DRTConfig.from_preset("small")
    assert (tiny.hidden_size, tiny.num_heads, tiny.head_dim, tiny.chunk_size) == (192, 3, 64, 64)
    assert (small.hidden_size, small.num_heads, small.upper_groups) == (512, 8, [4])
    paper = DRTConfig.from_preset("paper", vocab_size=50265)
    assert (paper.hidden_size, paper.num_heads, paper.lower_layers, paper.encoder_layers) == (768, 12, 6, 2)
    assert (paper.upper_groups, paper.intermediate_size) == ([6], 2048)
    assert (paper.window, paper.chunk_topk) == (512, 8)
    assert paper.chunk_tokens == 63 and paper.tie_word_embeddings
    for cfg in (tiny, small, paper, DRTConfig.from_preset("paper", vocab_size=50265, upper_groups=[3, 3])):
        assert _count(cfg) == _expected_params(cfg)
    # the published "128M": 146.0M with the encoder and GCA projections; the 12-layer decoder alone
    # (the base LM the paper's size label refers to) is 123.6M
    n = _count(paper)
    assert n == 145_980_672 and abs(n - 128e6) / 128e6 < 0.15
    assert DRTConfig.from_preset("tiny", arch="sliding_window").arch == "sliding_window"


@pytest.mark.parametrize("bad", [
    dict(arch="transformer"), dict(hidden_size=100, num_heads=3), dict(chunk_size=1), dict(upper_groups=[]),
    dict(upper_groups=[2, 0]),
], ids=lambda d: ",".join(d))
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        DRTConfig(**bad)


def test_unknown_preset_raises():
    with pytest.raises(ValueError, match="unknown preset"):
        DRTConfig.from_preset("huge")


def test_baseline_sizes_match_tiny():
    """docs/baselines.md: every baseline within 15% of DRT tiny's parameter count."""
    counts = {a: _count(DRTConfig.from_preset("tiny", arch=a)) for a in ARCHS}
    assert counts["drt"] == 4_008_960
    assert counts["landmark"] == counts["sliding_window"]  # docs/baselines.md: the same parameters
    for arch, n in counts.items():
        assert abs(n - counts["drt"]) / counts["drt"] < 0.15, (arch, n)


@pytest.mark.parametrize("bad", [dict(chunk_topk=0), dict(window=0), dict(gca_backend="x"),
                                 dict(lower_layers=-1), dict(vocab_size=2), dict(copy_bigram=True),
                                 dict(copy_global=True), dict(copy_match=4),
                                 dict(copy_head=True, copy_match=63), dict(copy_recall=2)])
def test_config_rejects_values_that_fail_later(bad):
    """Regression: these were accepted and failed (or silently misbehaved) deep in the forward pass."""
    with pytest.raises(ValueError):
        DRTConfig.from_preset("tiny", **bad)


def lead_span(mem_k, ids, c, lead, span):
    """The memory keys and token ids the pointer reads for retrieved chunk c, cut from the raw
    sequence: the last `lead` slots of chunk c - 1 (zero keys and pad ids before chunk 0), chunk c,
    the first `span` slots of chunk c + 1."""
    mk = torch.cat([mem_k[c], mem_k[c + 1][:span]])
    chunk = ids[c * S1:(c + 1) * S1 + span]
    if lead:
        before = (mem_k[c - 1][S1 - lead:], ids[c * S1 - lead: c * S1]) if c else \
            (torch.zeros_like(mem_k[0][:lead]), torch.zeros_like(ids[:lead]))
        mk, chunk = torch.cat([before[0], mk]), torch.cat([before[1], chunk])
    return mk, chunk


@pytest.mark.parametrize("bigram,glob,match,recall,span,lead,ages,qk_cap", [
    (False, False, 0, 0, 0, 0, 0, 0.0), (True, False, 0, 0, 0, 0, 0, 0.0), (True, True, 0, 0, 0, 0, 0, 0.0),
    (True, True, 5, 0, 0, 0, 0, 0.0), (False, False, 3, 0, 0, 0, 0, 0.0), (True, True, 5, 4, 0, 0, 0, 0.0),
    (False, False, 0, 3, 0, 0, 0, 0.0), (True, True, 5, 4, 10, 0, 0, 0.0), (False, False, 0, 0, 7, 0, 0, 0.0),
    (True, True, 5, 4, 10, 6, 0, 0.0), (False, False, 0, 0, 0, 9, 0, 0.0), (False, False, 0, 3, 0, 0, 5, 0.0),
    (True, True, 5, 4, 10, 6, 3, 0.0), (True, True, 5, 4, 10, 6, 3, 2.5),
    (False, False, 0, 0, 0, 0, 0, 1.5)])
def test_copy_head_mixture_against_a_naive_reference(bigram, glob, match, recall, span, lead, ages, qk_cap):
    """The CopyHead output, recomputed by hand for a few positions: the LM's softmax scaled by
    1 - g*P plus g times the pointer's weight on each retrieved slot's token; chunks 0 and 1
    (nothing retrieved) get the plain LM; every row sums to 1. With copy_bigram the query also
    reads the token before, each key the token two slots back, and the gate the pointer-weighted
    embedding of the slots' tokens; with copy_global one softmax-one covers every retrieved slot,
    each chunk's score shifted by its log fusion weight; with copy_match each slot's score gets the
    bias of its exact suffix-match length, counted here token by token, and the gate the bias of
    the longest one; with copy_recall each slot's score gets, per offset o, the bias of the
    longest n-gram ending o + 1 slots before it that the query's chunk before and own chunk (up to
    the query) contain, searched here substring by substring, and the gate the largest such sum;
    with copy_recall_age that bias also per age bucket of the n-gram's latest occurrence there;
    with copy_qk_cap the learned scores (before those biases) go through cap * tanh(s / cap);
    with copy_span each retrieved chunk runs on into the first slots of the chunk after it; with
    copy_lead it starts with the last slots of the chunk before it (pads before chunk 0)."""
    model = make("drt", chunk_topk=2, copy_head=True, copy_bigram=bigram, copy_global=glob,
                 copy_match=match, copy_recall=recall, copy_span=span, copy_lead=lead, copy_recall_age=ages,
                 copy_qk_cap=qk_cap)
    ch = model.copy_head
    with torch.no_grad():
        ch.gate.bias.fill_(0.3)
        ch.q.weight.normal_(0, 0.3)
        ch.k.weight.normal_(0, 0.3)
        ch.k_prev.weight.normal_(0, 0.3)
        ch.q_tok.weight.normal_(0, 0.3)
        ch.k_tok.weight.normal_(0, 0.3)
        if bigram:
            ch.q_tok2.weight.normal_(0, 0.3)
            ch.k_tok2.weight.normal_(0, 0.3)
            ch.gate_tok.weight.normal_(0, 0.3)
        if match:
            ch.match_bias.copy_(torch.linspace(-0.2, 0.5, match + 1))
            ch.match_gate.copy_(torch.linspace(0.3, -0.3, match + 1))
        if recall:
            ch.recall_bias.copy_(torch.linspace(-0.2, 0.3, ch.recall_bias.numel()).view_as(ch.recall_bias))
            ch.recall_gate.fill_(0.05)
        if ages:
            ch.recall_age_bias.normal_(0, 0.1)
    # with copy_match / copy_recall a repeated block, so that long matches occur
    ids = rand_ids(1, 50).repeat(1, 6)[:, :4 * S1 + 10] if match or recall else rand_ids(1, 4 * S1 + 10)
    cap = {}
    model.encoder.register_forward_hook(lambda mod, i, o: cap.__setitem__("mem_k", o[1]))
    model.norm.register_forward_hook(lambda mod, i, o: cap.__setitem__("inp", i[0]))
    with torch.no_grad():
        out = model(ids, output_retrieval=True)
    lp = out.logits[0]
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(lp.shape[0]), atol=1e-4, rtol=0)
    h = cap["inp"][0]  # [L, D] final states of the real tokens (before the final norm)
    lm = torch.log_softmax(model.lm_head(model.norm(h)).float(), -1)
    # chunks 0 and 1 read nothing (row 0, chunk 0's landmark, has no earlier chunk to select)
    torch.testing.assert_close(lp[:2 * S1], lm[:2 * S1], atol=1e-5, rtol=1e-5)
    mem_k = cap["mem_k"].view(-1, S1, TINY["hidden_size"])  # [C, N, D]
    r = out.retrieval[0]
    seen_long = False
    for t in (2 * S1, 2 * S1 + 30, 3 * S1 + 5, 4 * S1 + 9):
        c = t // S1
        idx, w = r["idx"][0, c - 1], r["weights"][0, c - 1]
        q = ch.q(ch.norm(h[t])) + ch.q_tok(ch.tok_norm(model.embed(ids[0, t])))
        if bigram:
            q = q + ch.q_tok2(ch.tok_norm(model.embed(ids[0, t - 1])))
        expect = lm[t].exp() * 0
        total, what = 0.0, 0.0
        scores, longest, strongest = [], 0, 0.0
        for j in range(len(idx)):
            mk, chunk = lead_span(mem_k, ids[0], int(idx[j]), lead, span)
            before = torch.cat([torch.zeros_like(chunk[:1]), chunk[:-1]])  # pad id 0 before slot 0
            kk = (ch.k(mk) + ch.k_prev(torch.cat([torch.zeros_like(mk[:1]), mk[:-1]]))
                  + ch.k_tok(ch.tok_norm(model.embed(before))))
            if bigram:
                before2 = torch.cat([torch.zeros_like(chunk[:2]), chunk[:-2]])
                kk = kk + ch.k_tok2(ch.tok_norm(model.embed(before2)))
            s = kk @ q / math.sqrt(ch.d)
            if qk_cap:
                assert s.abs().max() > qk_cap  # the cap bites
                s = qk_cap * torch.tanh(s / qk_cap)
            if match:
                lens = []
                for slot in range(len(chunk)):
                    n = 0
                    while n < match and slot - 1 - n >= 0 and ids[0, t - n] == chunk[slot - 1 - n]:
                        n += 1
                    lens.append(n)
                s = s + 10.0 * ch.match_bias[torch.tensor(lens)]
                if w[j] > 0:
                    longest = max(longest, max(lens))
            if recall:
                ctx = ids[0, (c - 1) * S1: t + 1].tolist()
                ends = {}  # n-gram -> the last index of ctx where an occurrence ends
                for a in range(len(ctx)):
                    for b in range(a + 1, min(a + 6, len(ctx)) + 1):
                        ends[tuple(ctx[a:b])] = max(ends.get(tuple(ctx[a:b]), -1), b - 1)
                ngram = [max([n for n in range(1, 7) if a - n + 1 >= 0 and tuple(chunk[a - n + 1: a + 1].tolist())
                              in ends] or [0]) for a in range(len(chunk))]
                bucket = [min(ages - 1, int(math.log2(len(ctx) - 1 - ends[tuple(chunk[a - n + 1: a + 1].tolist())]
                                                      + 1))) if ages and n else 0 for a, n in enumerate(ngram)]

                def bias(o, a):  # offset o's bias for the n-gram ending at slot a (none before slot 0)
                    if a < 0:
                        return ch.recall_bias[o][0] + (ch.recall_age_bias[o][0][0] if ages else 0)
                    return ch.recall_bias[o][ngram[a]] + (ch.recall_age_bias[o][ngram[a]][bucket[a]] if ages else 0)
                rb = torch.stack([sum(bias(o, sl - 1 - o) for o in range(recall)) for sl in range(len(chunk))])
                s = s + 10.0 * rb
                if w[j] > 0:
                    strongest = max(strongest, float(rb.detach().max()))
                seen_long = seen_long or max(ngram) >= 3
            scores.append(s + torch.log(w[j]) if glob else s)
        norm = 1 + sum(s.exp().sum() for s in scores)  # global: one null slot for all chunks
        for j in range(len(idx)):
            chunk = lead_span(mem_k, ids[0], int(idx[j]), lead, span)[1]
            s = scores[j]
            p = s.exp() / norm if glob else s.exp() / (1 + s.exp().sum()) * w[j]
            total = total + p.sum()
            what = what + p @ ch.tok_norm(model.embed(chunk))
            expect = expect.index_add(0, chunk, p)
        g = torch.sigmoid(ch.gate(ch.norm(h[t])) + (ch.gate_tok(what) if bigram else 0)
                          + (10.0 * ch.match_gate[longest] if match else 0)
                          + (10.0 * ch.recall_gate * strongest if recall else 0))[0]
        seen_long = seen_long or longest >= 2
        expect = (1 - g * total) * lm[t].exp() + g * expect
        torch.testing.assert_close(lp[t].exp(), expect, atol=1e-5, rtol=1e-4)
        assert (lp[t] - lm[t]).abs().max() > 1e-2  # the pointer did change this row
    assert seen_long or not (match or recall)  # the matches were exercised


def test_recall_ages_are_those_of_the_latest_longest_occurrence():
    """copy_recall_age's feature by hand, as in a 2-hop answer: the question holds v0 = (1, 2, 3),
    the answer so far v1 = (4, 5, 6) then ","; the slot after v0 recalls it from long ago, the
    slot after v1 from one token ago. An earlier longer occurrence beats a later shorter one, and
    of two equal ones the later counts. Buckets floor(log2(age + 1)), capped at ages - 1."""
    from drt_core.copy_head import recall_lengths

    ctx = torch.tensor([[1, 2, 3, 8, 7, 2, 3, 8, 8, 4, 5, 6, 9]])  # "... v0 ... (2 3) ... v1 ,"
    slots = torch.tensor([[[1, 2, 3, 4, 5, 6, 7]]])  # [Z=1, k=1, N=7]
    upto = torch.tensor([12, 3])  # the ","; and a query that reads ctx[:4] only
    out = recall_lengths(slots, ctx, upto, pad_id=0, ages=4).long()  # [1, 2, 1, 7]
    lengths, age = out % 7, out // 7
    assert lengths[0, 0, 0].tolist() == [1, 2, 3, 1, 2, 3, 1]
    # slot 2 ends "1 2 3" at ctx 2 (age 10: bucket 3), slot 5 "4 5 6" at ctx 11 (age 1: bucket 1);
    # slot 1: "1 2" only at ctx 1 (age 11); slot 3: "4" at ctx 9 (age 3: bucket 2); slot 6: "7" at 4 (age 8)
    assert age[0, 0, 0].tolist() == [3, 3, 3, 2, 1, 1, 3]
    assert lengths[0, 1, 0].tolist() == [1, 2, 3, 0, 0, 0, 0]  # causal: ctx[:4] holds v0 and an 8
    assert age[0, 1, 0].tolist() == [2, 1, 1, 0, 0, 0, 0]  # ages 3, 2, 1; none (0) where nothing matches
    ctx2 = torch.tensor([[2, 3, 9, 9, 9, 9, 9, 9, 9, 9, 2, 3]])  # "2 3" twice: the later one counts
    out2 = recall_lengths(torch.tensor([[[2, 3]]]), ctx2, torch.tensor([11]), pad_id=0, ages=4).long()
    assert (out2 % 7)[0, 0, 0].tolist() == [1, 2] and (out2 // 7)[0, 0, 0].tolist() == [1, 0]
    assert torch.equal(recall_lengths(slots, ctx, upto, pad_id=0), lengths.to(torch.uint8))  # ages=0: lengths


def test_copy_recall_age_and_qk_cap_are_validated():
    with pytest.raises(ValueError, match="copy_recall > 0"):
        DRTConfig.from_preset("tiny", copy_head=True, copy_recall_age=3)
    with pytest.raises(ValueError, match="age buckets"):
        DRTConfig.from_preset("tiny", copy_head=True, copy_recall=2, copy_recall_age=9)
    with pytest.raises(ValueError, match="copy_head=true"):
        DRTConfig.from_preset("tiny", copy_qk_cap=5.0)
    with pytest.raises(ValueError, match="bound"):
        DRTConfig.from_preset("tiny", copy_head=True, copy_qk_cap=-1.0)


def test_copy_match_added_to_a_saved_model_starts_as_a_no_op(tmp_path):
    """`train --init M --set copy_match=n --set copy_recall=J` loads M's weights and adds zero match biases: the
    outputs are M's until they train (the nn.Parameters are created by _init_weights, not
    left as torch.empty garbage by from_pretrained)."""
    model = make("drt", chunk_topk=2, copy_head=True, copy_bigram=True)
    with torch.no_grad():
        model.copy_head.gate.bias.fill_(0.3)
        model.copy_head.q_tok.weight.normal_(0, 0.3)
        model.copy_head.k_tok.weight.normal_(0, 0.3)
    model.save_pretrained(tmp_path)
    grown = DRTForCausalLM.from_pretrained(tmp_path, copy_match=6, copy_recall=4, copy_recall_age=3).eval()
    assert grown.config.copy_match == 6 and grown.config.copy_recall == 4 and grown.config.copy_recall_age == 3
    assert torch.equal(grown.copy_head.recall_age_bias, torch.zeros(4, 7, 3))
    assert torch.equal(grown.copy_head.match_bias, torch.zeros(7))
    assert torch.equal(grown.copy_head.match_gate, torch.zeros(7))
    assert torch.equal(grown.copy_head.recall_bias, torch.zeros(4, 7))
    assert torch.equal(grown.copy_head.recall_gate, torch.zeros(1))
    ids = rand_ids(1, 50).repeat(1, 5)
    with torch.no_grad():
        torch.testing.assert_close(grown(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)


def test_landmarks_hold_no_segment_states(monkeypatch):
    """Regression (the 16M retrieval-only run peaked at ~17 GB): each segment's keys and queries
    kept are their own tensors, not views that keep the segment's [chunks, S, D] states alive until
    the end; memory is then the keys plus one segment's states, at any length."""
    model = make(lower_layers=1, window=64, upper_groups=[1, 1], key_encoder=1, key_context=20)
    held = []
    real_cat = torch.cat

    def cat(tensors, *args, **kw):
        held.extend(tensors)
        return real_cat(tensors, *args, **kw)

    monkeypatch.setattr(drt.torch, "cat", cat)
    with torch.no_grad():
        model.landmarks(rand_ids(1, 7 * S1, seed=1)[0], segment_chunks=2)
    monkeypatch.undo()
    kept = [t for t in held if t.dim() == 2 and t.shape[-1] == 64 and t.shape[0] <= 2]  # the per-segment pieces
    assert len(kept) >= 8
    for t in kept:
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


@pytest.mark.parametrize("lower,window,seg,qenc,kctx", [(1, 128, 3, 0, 0), (2, 64, 2, 1, 0), (2, 128, 1, 0, 0),
                                                        (2, 128, 1, 1, 20), (1, 64, 2, 0, 63)])
def test_landmarks_equal_the_forward_scores(lower, window, seg, qenc, kctx):
    """model.landmarks (lower layers and encoder only, in segments with the windows' context)
    gives the scores of the full forward's group 0, at any segment size, for a ragged length;
    with key_context too (the segment's context then also covers the tail of the chunk before)."""
    model = make(lower_layers=lower, window=window, upper_groups=[1, 1], query_encoder=qenc,
                 key_encoder=int(kctx > 0), key_context=kctx)
    with torch.no_grad():
        if qenc:
            model.query_projs[0].weight.normal_(0, 0.3)
        if kctx:
            model.key_enc.context.o.weight.normal_(0, 0.3)
    ids = rand_ids(1, 9 * S1 + 17, seed=3)
    keys, queries = model.landmarks(ids[0], segment_chunks=seg)
    C = 10
    assert keys.shape == queries.shape == (C, 64)
    c = torch.arange(C)
    got = drt.retrieval_scores(queries[None], keys[None], c, c)[0]
    with torch.no_grad():
        want = model(ids, output_retrieval=True).retrieval[0]["scores"][0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # segments too short for the window's context would differ: the context is what makes it exact
    if seg == 1 and lower == 2:
        x = model.embed(model.augment(ids)[0][:, 5 * 64: 6 * 64])
        for layer in model.lower:
            x = layer(x)
        alone = model.lmk_norms[0](x[0, -1])
        assert not torch.allclose(alone, queries[5], atol=1e-4)


@pytest.mark.parametrize("opt", [{"query_encoder": 1}])
def test_query_features_read_the_own_chunk_and_start_as_a_no_op(tmp_path, opt):
    """--set query_encoder=N on a saved model adds zero projections (outputs
    unchanged); trained, row c's query moves with the text of chunk c and not with that of chunk
    c + 1 (causal). init_retrieval_encoders makes the query encoder's state the chunk's landmark key."""
    model = make("drt", chunk_topk=2)
    model.save_pretrained(tmp_path)
    grown = DRTForCausalLM.from_pretrained(tmp_path, **opt).eval()
    assert all(torch.equal(p.weight, torch.zeros_like(p.weight)) for p in grown.query_projs)
    ids = rand_ids(1, 6 * S1)
    with torch.no_grad():
        torch.testing.assert_close(grown(ids).logits, model(ids).logits, atol=1e-6, rtol=1e-6)
        grown.query_projs[0].weight.normal_(0, 0.3)
    if "query_encoder" in opt:
        init_retrieval_encoders(grown)
        aug, C = grown.augment(ids)
        with torch.no_grad():
            x = grown.embed(aug)
            for layer in grown.lower:
                x = layer(x)
            h = x.view(C, 64, -1)
            torch.testing.assert_close(grown.own_chunk_features(h), grown.encoder(h)[0])
    _, q = grown.landmarks(ids[0])
    changed = ids.clone()
    changed[0, 2 * S1 + 3] = (changed[0, 2 * S1 + 3] + 1) % V  # a token of chunk 2 (far from chunk 3's landmark)
    _, q2 = grown.landmarks(changed[0])
    assert torch.equal(q[:2], q2[:2])  # earlier landmarks never see it
    assert not torch.allclose(q[2], q2[2])
    _, q_plain = model.landmarks(changed[0])
    _, q_plain0 = model.landmarks(ids[0])
    # without the projection, chunk 2's landmark sees the token only through the lower layers
    assert (q[2] - q2[2]).norm() > (q_plain0[2] - q_plain[2]).norm()


def test_key_context_reads_the_end_of_the_chunk_before_and_starts_as_a_no_op(tmp_path):
    """--set key_context=m on a key_encoder model adds a zero-projected attention (scores
    unchanged); trained, chunk c's key moves with the last m slots of chunk c - 1 (through that
    attention, beyond what the lower layers carry), never with a later chunk, and the first
    chunk's (zero context) not at all."""
    model = make("drt", chunk_topk=2, key_encoder=1, window=16)
    model.save_pretrained(tmp_path)
    grown = DRTForCausalLM.from_pretrained(tmp_path, key_context=8).eval()
    assert torch.equal(grown.key_enc.context.o.weight, torch.zeros_like(grown.key_enc.context.o.weight))
    ids = rand_ids(1, 6 * S1)
    with torch.no_grad():
        k0, _ = model.landmarks(ids[0])
        torch.testing.assert_close(grown.landmarks(ids[0])[0], k0, atol=1e-6, rtol=1e-6)
        grown.key_enc.context.o.weight.normal_(0, 0.3)
        k1, _ = grown.landmarks(ids[0])
    assert torch.allclose(k1[0], k0[0], atol=1e-6)  # chunk 0: nothing before it
    assert not torch.allclose(k1[1:], k0[1:], atol=1e-3)
    changed = ids.clone()
    changed[0, 2 * S1 - 3] = (changed[0, 2 * S1 - 3] + 1) % V  # in chunk 1's last 8 real slots
    k2, _ = grown.landmarks(changed[0])
    assert torch.equal(k2[:1], k1[:1])
    # window 16: chunk 2's lower states barely see it; its key sees it through the context
    base, _ = model.landmarks(changed[0])
    assert (k2[2] - k1[2]).norm() > 3 * (base[2] - k0[2]).norm()
    with pytest.raises(ValueError, match="key_encoder"):
        DRTConfig(key_context=4)
    with pytest.raises(ValueError, match="key_context"):
        DRTConfig(key_encoder=1, key_context=64)


def test_query_encoder_needs_landmark_scores():
    with pytest.raises(ValueError, match="arch 'drt'"):
        DRTConfig(arch="sliding_window", query_encoder=1)


def test_key_encoder_copied_from_the_chunk_encoder_changes_nothing_until_trained(tmp_path):
    """--set key_encoder=1 --set query_encoder=1 on a saved model, both encoders initialised as
    copies of the chunk encoder (init_retrieval_encoders): the same keys, scores and logits; a
    change of the key encoder then moves the scores but not the memory K/V."""
    model = make("drt", chunk_topk=2)
    model.save_pretrained(tmp_path)
    grown = DRTForCausalLM.from_pretrained(tmp_path, key_encoder=1, query_encoder=1).eval()
    init_retrieval_encoders(grown)
    ids = rand_ids(1, 7 * S1)
    with torch.no_grad():
        a, b = model(ids, output_retrieval=True), grown(ids, output_retrieval=True)
        torch.testing.assert_close(b.logits, a.logits, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(b.retrieval[0]["scores"], a.retrieval[0]["scores"])
        h = torch.randn(3, 64, 64)
        k0, mk0, mv0, _ = grown.encode_chunks(h)
        grown.key_enc.layers[0].qkv.weight.add_(0.05)
        k1, mk1, mv1, _ = grown.encode_chunks(h)
    assert torch.equal(mk0, mk1) and torch.equal(mv0, mv1) and not torch.allclose(k0, k1)


def test_encoder_layers_added_to_a_trained_encoder_start_as_the_identity(tmp_path):
    """--set key_encoder=2 --set query_encoder=2 on a model with one-layer encoders: the second
    layers start as the identity (init_added_encoder_layers), so keys, queries and logits are
    unchanged; trained, they move the keys. Without it the new layer is random and moves them."""
    model = make("drt", chunk_topk=2, key_encoder=1, query_encoder=1, key_context=8, window=16)
    with torch.no_grad():  # a trained query projection, so the query encoder's states count
        model.query_projs[0].weight.normal_(0, 0.05)
    model.save_pretrained(tmp_path)
    grown, info = DRTForCausalLM.from_pretrained(tmp_path, key_encoder=2, query_encoder=2,
                                                 output_loading_info=True)
    grown.eval()
    ids = rand_ids(1, 6 * S1)
    with torch.no_grad():
        k0, q0 = model.landmarks(ids[0])
        k_raw, _ = grown.landmarks(ids[0])
        assert not torch.allclose(k_raw, k0, atol=1e-3)  # the random second layer
        assert sorted(init_added_encoder_layers(grown, info["missing_keys"])) == ["key_enc.layers.1",
                                                                               "query_enc.layers.1"]
        k1, q1 = grown.landmarks(ids[0])
        torch.testing.assert_close(k1, k0, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(q1, q0, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(grown(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)
        grown.key_enc.layers[1].o.weight.normal_(0, 0.05)
        k2, _ = grown.landmarks(ids[0])
    assert not torch.allclose(k2, k0, atol=1e-3)
    # a checkpoint with every layer: nothing is zeroed
    assert init_added_encoder_layers(model, []) == []


def _random_lexical_scorer(vocab: int, seed: int, **kw):
    """A LexicalScorer with G = 2, random weights in [-1, 3), its generator (to draw chunks from) and
    the weights it should use: relu(w) with the special ids 0, 1, 2 at 0."""
    from drt_core.lexical import LexicalScorer

    cfg = DRTConfig.from_preset("tiny", vocab_size=vocab, hidden_size=32, num_heads=2, intermediate_size=64,
                                upper_groups=[1, 1], lexical=True, **kw)
    lex = LexicalScorer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        lex.weight.copy_(torch.rand(vocab, generator=g) * 4 - 1)
    w = torch.relu(lex.weight.detach()).clone()
    w[[0, 1, 2]] = 0.0
    return lex, g, w


def test_lexical_scores_are_weighted_shared_distinct_tokens():
    """LexicalScorer: scale_g * sum of relu(w_t) over the distinct tokens two chunks share (each
    counted once however often it repeats), 0 for special ids; the blocked gather equals one block."""
    lex, g, w = _random_lexical_scorer(50, seed=0)
    with torch.no_grad():
        lex.scale.copy_(torch.tensor([0.5, 2.0]))
    q = torch.randint(0, 50, (2, 3, 7), generator=g)
    k = torch.randint(0, 50, (2, 5, 7), generator=g)
    for grp in (0, 1):
        got = lex.scores(grp, q, k, block=2)
        assert torch.allclose(got, lex.scores(grp, q, k), atol=1e-6)
        for b in range(2):
            for c in range(3):
                for e in range(5):
                    shared = set(q[b, c].tolist()) & set(k[b, e].tolist())
                    want = lex.scale[grp].item() * sum(w[t].item() for t in shared)
                    assert abs(got[b, c, e].item() - want) < 1e-4
    # gradients reach the weights of shared tokens and the scale
    lex.scores(0, q, k).sum().backward()
    assert lex.scale.grad[0] != 0 and lex.weight.grad.abs().sum() > 0


def test_lexical_doc_df_adds_each_shared_tokens_idf_over_the_past_chunks():
    """config lexical_doc_df: a shared non-special token t adds doc_g * relu(log((n + 1) / (1 + df)))
    to relu(w_t), n = the key chunks e with e < c (chunk indices), df = those holding t; brute force
    over random chunks, with key chunks that are not all before the query, and gradients to doc_g."""
    from drt_core.lexical import distinct_tokens, doc_df

    lex, g, w = _random_lexical_scorer(40, seed=1, lexical_doc_df=0.7)
    assert torch.allclose(lex.doc.detach(), torch.full((2,), 0.7))
    with torch.no_grad():
        lex.doc.copy_(torch.tensor([0.7, 1.5]))
    q = torch.randint(0, 40, (2, 3, 6), generator=g)
    k = torch.randint(0, 40, (2, 7, 6), generator=g)
    q_chunk, k_chunk = torch.tensor([2, 5, 7]), torch.arange(7)
    df = doc_df(q, q_chunk, distinct_tokens(k, 0), k_chunk)
    # keys that are not chunks 0..Ck-1 take the general path: the same counts for the same order
    assert torch.equal(doc_df(q, q_chunk * 2, distinct_tokens(k, 0), k_chunk * 2), df)
    assert torch.equal(doc_df(q, torch.tensor([0, 3, 9]), distinct_tokens(k, 0), k_chunk)[:, 0], torch.zeros(2, 6))
    for grp in (0, 1):
        got = lex.scores(grp, q, k, q_chunk, k_chunk)
        a = float(lex.doc[grp].detach())
        for b in range(2):
            for c in range(3):
                n = int(q_chunk[c])
                for j in range(6):
                    t = int(q[b, c, j])
                    assert t < 3 or df[b, c, j].item() == sum(t in k[b, e].tolist() for e in range(n))
                for e in range(7):
                    shared = set(q[b, c].tolist()) & set(k[b, e].tolist())
                    idf = {t: 0.0 if t < 3 else max(0.0, math.log((n + 1)
                                                                  / (1 + sum(t in k[b, x].tolist() for x in range(n)))))
                           for t in shared}
                    want = sum(w[t].item() + a * idf[t] for t in shared)
                    assert abs(got[b, c, e].item() - want) < 1e-4
    lex.scores(1, q, k, q_chunk, k_chunk).sum().backward()
    assert lex.doc.grad[1] != 0 and lex.doc.grad[0] == 0
    with pytest.raises(ValueError, match="chunk indices"):
        lex.scores(0, q, k)
    with pytest.raises(ValueError, match="needs lexical"):
        DRTConfig.from_preset("tiny", lexical_doc_df=0.5)


@pytest.mark.parametrize("term", ["lexical_doc_df", "lexical_words", "lexical_word_carry", "lexical_gates"])
def test_lexical_doc_df_model_is_causal(term):
    """With lexical_doc_df (or lexical_words: the same counts over whole words; with this toy
    vocabulary every token is a word) the
    counts read only past chunks: changing later chunks changes no earlier row's scores; the weight
    starts at the configured value."""
    torch.manual_seed(0)
    kw = dict(vocab_size=60, hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2], window=64)
    terms = {term: 0.5} | ({"lexical_words": 0.5} if term in ("lexical_word_carry", "lexical_gates") else {})
    m = DRTForCausalLM(DRTConfig.from_preset("tiny", lexical=True, **terms, **kw)).eval()
    if term == "lexical_word_carry":  # words of 1-3 tokens (every third token starts one), cut by chunk ends
        m.lexical.set_word_tables(toy_word_tables(60))
        assert m.lexical.carry
    start = {"lexical_doc_df": m.lexical.doc, "lexical_gates": m.lexical.gates}.get(term, m.lexical.words)
    assert torch.allclose(start.detach(), torch.full((1,), 0.5))
    with torch.no_grad():
        m.lexical.weight.uniform_(0.5, 2.0)
        if term == "lexical_gates":  # gates that read the lower layers' states (each 0.5 at init)
            m.lexical.gate.weight.normal_(0, 0.5)
        ids = torch.randint(3, 60, (1, 63 * 6))
        s1 = m(ids, output_retrieval=True).retrieval[0]["scores"]
        changed = ids.clone()
        changed[0, 63 * 4:] = torch.randint(3, 60, (63 * 2,))
        s2 = m(changed, output_retrieval=True).retrieval[0]["scores"]
    fin = torch.isfinite(s1[0, :4])
    assert torch.equal(s1[0, :4][fin], s2[0, :4][fin])


def test_lexical_model_is_causal_and_inert_at_init():
    """A lexical model's retrieval is causal (changing a later chunk changes no earlier score) and,
    with its weights at their init (0), scores exactly as the same model without the term."""
    torch.manual_seed(0)
    kw = dict(vocab_size=120, hidden_size=32, num_heads=2, intermediate_size=64, upper_groups=[2], window=64)
    plain = DRTForCausalLM(DRTConfig.from_preset("tiny", **kw)).eval()
    lexm = DRTForCausalLM(DRTConfig.from_preset("tiny", lexical=True, **kw)).eval()
    lexm.load_state_dict(plain.state_dict(), strict=False)
    ids = torch.randint(3, 120, (1, 63 * 6))
    with torch.no_grad():
        a = plain(ids, output_retrieval=True).retrieval[0]["scores"]
        b = lexm(ids, output_retrieval=True).retrieval[0]["scores"]
        assert torch.equal(a, b)
        lexm.lexical.weight.uniform_(0.5, 2.0)
        s1 = lexm(ids, output_retrieval=True).retrieval[0]["scores"]
        assert not torch.equal(s1, a)
        changed = ids.clone()
        changed[0, 63 * 4:] = torch.randint(3, 120, (63 * 2,))
        s2 = lexm(changed, output_retrieval=True).retrieval[0]["scores"]
    fin = torch.isfinite(s1[0, :4])
    assert torch.equal(s1[0, :4][fin], s2[0, :4][fin])  # rows of chunks 0..3 see only chunks 0..3


def test_a_window_wider_than_the_sequence_is_full_attention():
    """`train --init SW --set window=65536` (the ALiBi full-attention baseline, RESULTS §5): the
    batch path pads by min(window, T), not by the window (65,536 positions of padding per block
    exhausted memory), and gives the numbers of a window just as wide as the sequence."""
    ids = rand_ids(2, 150)
    torch.manual_seed(0)
    wide = DRTForCausalLM(DRTConfig.from_preset("tiny", arch="sliding_window", vocab_size=V, window=1 << 20)).eval()
    torch.manual_seed(0)
    exact = DRTForCausalLM(DRTConfig.from_preset("tiny", arch="sliding_window", vocab_size=V, window=150)).eval()
    with torch.no_grad():
        torch.testing.assert_close(wide(ids).logits, exact(ids).logits)
