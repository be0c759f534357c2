"""bench/gpu.sh's pieces that run anywhere: the model-FLOPs count behind MFU (bench.train) and the
report that checks issue 32's GPU targets (bench.gpu_report)."""

from __future__ import annotations

import json

import pytest

from bench.gpu_report import main as report
from bench.train import train_flops_per_token
from drt_core import DRTConfig, DRTForCausalLM


def test_flops_per_token_counts_every_matrix_and_the_retrieved_keys():
    cfg = DRTConfig.from_preset("tiny")
    m = DRTForCausalLM(cfg)
    D, V, S, K = cfg.hidden_size, cfg.vocab_size, cfg.chunk_size, cfg.chunk_topk
    # every 2-D weight but the embedding table, plus the tied LM head
    matrix = sum(p.numel() for n, p in m.named_parameters() if p.dim() == 2 and not n.startswith("embed")) + D * V
    L = 4032
    f = train_flops_per_token(cfg, L)
    assert f > 3 * 2 * matrix  # attention on top of the matmuls
    # each retrieved chunk adds 4 * D * (S - 1) per upper layer, x3 for training
    more = train_flops_per_token(DRTConfig.from_preset("tiny", chunk_topk=K + 1), L)
    assert more - f == pytest.approx(3 * 4 * D * (S - 1) * sum(cfg.upper_groups))
    # a causal window's mean keys per query: (L + 1) / 2 within the window, towards the window beyond it
    w = cfg.window
    short, long_ = train_flops_per_token(cfg, w), train_flops_per_token(cfg, 100 * w)
    n_self = cfg.lower_layers + sum(cfg.upper_groups)
    assert long_ - short == pytest.approx(3 * 4 * D * n_self * (w * (1 - 1 / 200) - w / 2), rel=1e-9)


def _write(out, name, obj):
    (out / name).write_text(json.dumps(obj) + "\n")


def test_report_checks_the_gpu_targets(tmp_path, capsys):
    res = lambda impl, p, ms: {"impl": impl, "pass": p, "ms": ms, "dtype": "bfloat16"}  # noqa: E731
    _write(tmp_path, "gca.json", {"machine": "H200", "shapes": {}, "results": [
        res("triton", "fwd", 1.0), res("triton", "bwd", 2.0), res("triton", "decode M=1", 0.1),
        res("reference", "fwd", 10.0), res("reference", "bwd", 20.0), res("reference", "decode M=1", 0.2),
        res("sdpa", "fwd", 0.5), res("sdpa", "bwd", 1.0)]})
    _write(tmp_path, "train.json", {"bf16": True, "args": {"preset": "paper", "seq_len": 4032, "batch": 8},
                                    "train": {"steps": 50, "tok_per_s": 1e5, "tflops": 300.0, "mfu": 0.31}})
    (tmp_path / "pytest.txt").write_text("12 passed\n")
    report([str(tmp_path)])
    md = capsys.readouterr().out
    assert "fwd+bwd speed-up over the reference: 10.00 (met, target 5)" in md
    assert "fraction of SDPA's at equal FLOPs: 0.50 (met, target 0.5)" in md
    assert "decode speed-up over the reference: 2.00 (NOT met, target 3)" in md
    assert "MFU 0.31 (met, target 0.3)" in md
    assert "CUDA tests (`pytest -m gpu`): 12 passed" in md
    assert "Prefill: no figures" in md
