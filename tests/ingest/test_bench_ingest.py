"""`drt-reader bench ingest` on a one-page PDF with the shipped model: the JSON has every stage, both
new-process first-token measurements agree on the token, and the table renders (~15 s of CPU: two
worker processes import torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_ingest_smoke(tmp_path, assets, capsys, monkeypatch):
    if not (ROOT / "checkpoints" / "drt-tiny" / "config.json").exists():
        pytest.skip("no shipped checkpoint in checkpoints/drt-tiny")
    from bench import ingest as bench

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "res.json"
    pdf = assets / "026-latex-multicolumn__multicolumn.pdf"
    rc = bench.main(["--pdf", str(pdf), "--home", str(tmp_path / "home"), "--out", str(out), "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res == json.loads(out.read_text())
    assert set(res["stages"]) == {"hash", "parse", "tokenize", "store", "prefill"}
    assert res["document"]["pages"] == 3 and res["document"]["status"] == "done"
    for st in res["stages"].values():
        assert st["seconds"] >= 0 and st["cpu_s"] >= 0
    assert res["stages"]["prefill"]["per_s"] > 0 and res["stages"]["parse"]["per_s"] > 0
    ro, sc = res["reopen"], res["scratch"]
    assert ro["n_tokens"] == sc["n_tokens"] == res["document"]["tokens"]
    assert res["same_first_token"] and ro["first_token_id"] is not None
    assert 0 < ro["ttft_s"] and 0 < sc["ttft_s"] and sc["prefill_s"] > ro["open_s"]
    assert ro["peak_rss_mb"] and ro["peak_rss_mb"] < 4096
    table = bench.format_table(res)
    assert "| prefill |" in table and "ratio (scratch / reopen" in table
    # a library that already exists is refused (the bench must start from nothing)
    assert bench.main(["--pdf", str(pdf), "--home", str(tmp_path / "home")]) == 2
