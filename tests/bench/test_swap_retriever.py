"""bench.swap_retriever: a DRT checkpoint turned into the fixed_retriever baseline streams, and its
selections are the frozen MiniLM's top-k over earlier chunks (bench.lemma_retrieval's semantic
selection), not the DRT's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from drt_core import DRTConfig, DRTForCausalLM
from drt_core.engine import Engine
from drt_core.tokenizer import encode

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_swapped_checkpoint_selects_by_minilm(tmp_path):
    from bench.lemma_retrieval import semantic_selection
    from bench.swap_retriever import swap
    from drt_core.train.checkpoint import copy_tokenizer

    torch.manual_seed(0)
    cfg = DRTConfig.from_preset("tiny", hidden_size=64, num_heads=2, intermediate_size=128, chunk_topk=3,
                                copy_head=True, key_encoder=1, key_context=4, query_encoder=1, lexical=True)
    src = tmp_path / "drt"
    DRTForCausalLM(cfg).save_pretrained(src)
    copy_tokenizer(src, ASSETS.parents[1] / "checkpoints" / "drt-tiny")
    eng = Engine.from_pretrained(swap(str(src), str(tmp_path / "fixed")))
    assert eng.cfg.arch == "fixed_retriever" and eng.cfg.copy_head and not eng.cfg.lexical
    ids = encode((ASSETS / "frankenstein_excerpt.txt").read_text(encoding="utf-8"))[: 12 * 63]
    st = eng.new_state()
    eng.feed(st, ids)
    sel = st.memory.selections()[0][:, 0]  # [C, k] group 0's selection of every landmark row
    want = semantic_selection(ids, eng.cfg, 3)
    for row in range(3, 12):  # rows with k eligible chunks
        assert set(sel[row].tolist()) == set(want[row].tolist())
    drt = Engine.from_pretrained(src)
    st2 = drt.new_state()
    drt.feed(st2, ids)
    assert not np.array_equal(st2.memory.selections()[0][:, 0][3:], sel[3:])  # not the DRT's own choice
