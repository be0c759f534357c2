"""bench.gpu_ckpt: a checkpoint cut into bf16 shards under the device's file limit and joined back
loads and predicts as the bf16-rounded original; the data cut ends on a document boundary."""

from __future__ import annotations

import json

import numpy as np
import torch

from bench.gpu_ckpt import cut_data, join, split
from drt_core import DRTConfig, DRTForCausalLM


def test_split_and_join_round_trip_through_bf16(tmp_path):
    torch.manual_seed(0)
    m = DRTForCausalLM(DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128))
    m.save_pretrained(tmp_path / "model")
    names = split(tmp_path / "model", tmp_path / "shards", max_mb=1.5)
    assert len(names) > 1
    assert all((tmp_path / "shards" / n).stat().st_size <= 1.5 * 2**20 for n in names)
    back = DRTForCausalLM.from_pretrained(join(tmp_path / "shards", tmp_path / "joined"))
    for k, v in m.state_dict().items():
        assert torch.equal(back.state_dict()[k], v.to(torch.bfloat16).float()), k
    assert (tmp_path / "joined" / "tokenizer.json").exists()


def test_data_cut_keeps_whole_documents(tmp_path):
    data, eot, rng = tmp_path / "data", 1, np.random.default_rng(0)
    full = {}
    for c, n_docs in (("books", 6), ("stacks", 3)):
        (data / c).mkdir(parents=True)
        docs = [np.append(rng.integers(3, 8000, rng.integers(500, 3000)), eot) for _ in range(n_docs)]
        np.concatenate(docs).astype(np.uint16).tofile(data / c / "train.bin")
        docs[0].astype(np.uint16).tofile(data / c / "val.bin")
        full[c] = sum(map(len, docs))
    (data / "meta.json").write_text(json.dumps({"eot_id": eot, "tokens": {c: {"train": n} for c, n in full.items()}}))
    kept = cut_data(data, tmp_path / "cut", mb=sum(full.values()) * 2 / 2**20 / 2)
    meta = json.loads((tmp_path / "cut" / "meta.json").read_text())
    for c, n in kept.items():
        toks = np.fromfile(tmp_path / "cut" / c / "train.bin", dtype=np.uint16)
        assert len(toks) == n == meta["tokens"][c]["train"] and 0 < n < full[c]
        assert toks[-1] == eot
