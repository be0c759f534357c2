"""Issue 30, item 3, the suite's short version of `drt-reader bench faults`: ingests SIGKILLed at
seeded random moments resume to a library and states bit-identical to an uninterrupted ingest
(the bench runs 50 trials on a book PDF; RESULTS §7)."""

from __future__ import annotations

from pathlib import Path

from bench.faults import run_trials

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_killed_ingests_resume_bit_identical(tmp_path):
    res = run_trials(ASSETS / "frankenstein_excerpt.txt", trials=2, seed=5, work=tmp_path, log=lambda s: None)
    assert res["reference"]["integrity"] == "ok" and any(k.startswith("state.") for k in res["reference"])
    assert res["identical"] == 2, res["rows"]
    # seed 5 kills at 62% and 74% of a warm ingest's wall time: inside the prefill, a real resume
    assert any(r["phase"] != "finished before the kill" for r in res["rows"]), res["rows"]
