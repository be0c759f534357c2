"""bench.regroup: a G = 1 model split into G = 2 keeps every weight in place."""

from __future__ import annotations

import torch

from bench.regroup import regroup
from drt_core import DRTConfig, DRTForCausalLM


def test_regroup_keeps_weights_and_changes_only_the_retrieval_groups(tmp_path):
    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", vocab_size=300, hidden_size=64, num_heads=2, intermediate_size=128,
                                upper_groups=[2], window=64, chunk_topk=2, copy_head=True)
    m = DRTForCausalLM(cfg).eval()
    with torch.no_grad():
        m.lmk_norms[0].weight.uniform_(0.5, 2.0)
    m.save_pretrained(tmp_path / "g1")
    out = regroup(str(tmp_path / "g1"), [1, 1], str(tmp_path / "g2"))
    g2 = DRTForCausalLM.from_pretrained(out).eval()
    assert g2.config.upper_groups == [1, 1] and g2.config.num_groups == 2
    sd1, sd2 = m.state_dict(), g2.state_dict()
    torch.testing.assert_close(sd2["groups.1.0.mlp.up.weight"], sd1["groups.0.1.mlp.up.weight"])
    torch.testing.assert_close(sd2["groups.0.0.gca.q.weight"], sd1["groups.0.0.gca.q.weight"])
    torch.testing.assert_close(sd2["lmk_norms.1.weight"], sd1["lmk_norms.0.weight"])
    torch.testing.assert_close(sd2["copy_head.q.weight"], sd1["copy_head.q.weight"])
    ids = torch.randint(3, 300, (1, 63 * 5))
    with torch.no_grad():
        r1 = m(ids, output_retrieval=True).retrieval
        r2 = g2(ids, output_retrieval=True).retrieval
    assert len(r1) == 1 and len(r2) == 2
    torch.testing.assert_close(r2[0]["idx"], r1[0]["idx"])  # group 0 retrieves as before
