"""Several retrieval groups (G = 2, the paper's 2-hop model) and what our extensions give them:
the copy head reading every group's selection (config copy_groups="all"), per-group retrieval
targets (`train --group-targets`), and bench.regroup with per-group query projections.
Streaming = batch with copy_groups="all" is in test_engine.py (variant "allgroups")."""

from __future__ import annotations

import argparse

import pytest
import torch

from drt_core import DRTConfig, DRTForCausalLM
from drt_core.train import objective
from drt_core.train.objective import training_forward

V = 300
S1 = 63


def make(**kw) -> DRTForCausalLM:
    torch.manual_seed(0)
    base = dict(vocab_size=V, hidden_size=64, num_heads=2, intermediate_size=128, window=128, chunk_topk=2,
                upper_groups=[1, 1])
    m = DRTForCausalLM(DRTConfig.from_preset("tiny", **{**base, **kw})).eval()
    with torch.no_grad():  # distinct query norms: the two groups select differently
        for i, n in enumerate(m.lmk_norms):
            n.weight.uniform_(0.2 + i, 3.0 + i)
    return m


def ids_of(L, seed=1):
    return torch.randint(3, V, (1, L), generator=torch.Generator().manual_seed(seed))


def test_copy_groups_is_validated():
    with pytest.raises(ValueError, match="copy_groups"):
        DRTConfig.from_preset("tiny", copy_head=True, copy_groups="first")
    with pytest.raises(ValueError, match="copy_head"):
        DRTConfig.from_preset("tiny", copy_groups="all")
    assert DRTConfig.from_preset("tiny").copy_groups == "last"  # old checkpoints: the last group, as before


@pytest.mark.parametrize("mode", ["last", "all"])
def test_copy_head_reads_the_selections_copy_groups_names(monkeypatch, mode):
    """The batch forward hands the copy head the last group's (idx, w), or with "all" both groups'
    side by side, each weight halved; the groups do select different chunks here."""
    from drt_core import drt

    m = make(copy_head=True, copy_groups=mode)
    seen = {}
    orig = drt.batch_copy

    def spy(head, embed, x, emb, aug, flat_k, idx, w, *rest):
        seen["idx"], seen["w"] = idx, w
        return orig(head, embed, x, emb, aug, flat_k, idx, w, *rest)

    monkeypatch.setattr(drt, "batch_copy", spy)
    with torch.no_grad():
        r = m(ids_of(12 * S1), output_retrieval=True).retrieval
    assert not torch.equal(r[0]["idx"], r[1]["idx"])
    if mode == "last":
        assert torch.equal(seen["idx"], r[1]["idx"]) and torch.equal(seen["w"], r[1]["weights"])
    else:
        assert torch.equal(seen["idx"], torch.cat([r[0]["idx"], r[1]["idx"]], -1))
        torch.testing.assert_close(seen["w"], torch.cat([r[0]["weights"], r[1]["weights"]], -1) / 2)
        assert float(seen["w"].sum(-1).max()) <= 1.0 + 1e-5


def test_a_chunk_two_groups_select_weighs_as_one_read_under_copy_global():
    """copy_selection's promise: with copy_global, one chunk read twice at w1/2 and w2/2 gives the
    pointer the mass of one read at (w1 + w2)/2, slot by slot."""
    m = make(copy_head=True, copy_global=True, copy_groups="all")
    head = m.copy_head
    torch.manual_seed(3)
    Z, M, N, D = 2, 5, 7, 64
    h, emb = torch.randn(Z, M, D), torch.randn(Z, M, D)
    k_a, k_b = torch.randn(Z, 1, N, D), torch.randn(Z, 1, N, D)
    prev_a, prev_b = torch.randn(Z, 1, N, D), torch.randn(Z, 1, N, D)
    w1, w2, wb = 0.6, 0.3, 0.4
    with torch.no_grad():
        head.q.weight.normal_(0, 0.3)
        head.k.weight.normal_(0, 0.3)
        _, twice = head(h, emb, torch.cat([k_a, k_b, k_a], 1), torch.cat([prev_a, prev_b, prev_a], 1),
                        torch.tensor([[w1 / 2, wb / 2, w2 / 2]] * Z))
        _, once = head(h, emb, torch.cat([k_a, k_b], 1), torch.cat([prev_a, prev_b], 1),
                       torch.tensor([[(w1 + w2) / 2, wb / 2]] * Z))
    torch.testing.assert_close(twice[:, :, 0] + twice[:, :, 2], once[:, :, 0])
    torch.testing.assert_close(twice[:, :, 1], once[:, :, 1])


def test_group_targets_give_group_g_column_g():
    """training_forward(group_targets=True): group g's retrieval loss reads target column g alone, and
    force_selection forces only that column into group g's selection."""
    m = make()
    ids = ids_of(10 * S1)
    C = 10
    targets = torch.full((1, C, 2), -1)
    targets[0, 7] = torch.tensor([2, 5])  # row 7: hop 1 in chunk 2, hop 2 in chunk 5
    targets[0, 8, 0] = 3  # a row with one column: group 1 has nothing to learn there
    with torch.no_grad():
        out = training_forward(m, ids, output_retrieval=True, retrieval_targets=targets, forced_chunks=targets,
                              group_targets=True)
        both = training_forward(m, ids, retrieval_targets=targets, forced_chunks=targets).retrieval_loss
    s0, s1 = out.retrieval[0]["scores"], out.retrieval[1]["scores"]
    want = (objective.forced_retrieval_loss(s0, targets[..., :1])
            + objective.forced_retrieval_loss(s1, targets[..., 1:])) / 2
    torch.testing.assert_close(out.retrieval_loss, want)
    assert not torch.allclose(both, want)
    assert 2 in out.retrieval[0]["idx"][0, 7].tolist() and 5 in out.retrieval[1]["idx"][0, 7].tolist()
    assert objective._group_column(targets, 2, True).eq(-1).all()
    assert objective._group_column(targets, 1, False) is targets


def test_train_refuses_group_targets_with_alternative_columns():
    from drt_core.train.flags import add_args, config_from_args

    p = argparse.ArgumentParser()
    add_args(p)
    assert config_from_args(p.parse_args(["--group-targets", "--task", "2hop"])).objective.group_targets
    for extra in (["--task", "2hop,cite"], ["--task", "single", "--target-needle-start"]):
        with pytest.raises(SystemExit, match="group-targets"):
            config_from_args(p.parse_args(["--group-targets", *extra]))


def test_regroup_copies_the_query_projection(tmp_path):
    """A query_encoder model split into G = 2: each new group starts with the old group's query
    projection, so group 0 retrieves exactly as the G = 1 model did."""
    from bench.regroup import regroup

    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", vocab_size=V, hidden_size=64, num_heads=2, intermediate_size=128,
                                upper_groups=[2], window=64, chunk_topk=2, query_encoder=1, key_encoder=1)
    g1 = DRTForCausalLM(cfg).eval()
    with torch.no_grad():
        g1.query_projs[0].weight.normal_(0, 0.3)
    g1.save_pretrained(tmp_path / "g1")
    g2 = DRTForCausalLM.from_pretrained(regroup(str(tmp_path / "g1"), [1, 1], str(tmp_path / "g2"))).eval()
    for g in range(2):
        torch.testing.assert_close(g2.query_projs[g].weight, g1.query_projs[0].weight)
    ids = ids_of(8 * S1)
    with torch.no_grad():
        a = g1(ids, output_retrieval=True).retrieval[0]
        b = g2(ids, output_retrieval=True).retrieval[0]
    torch.testing.assert_close(b["scores"], a["scores"])
