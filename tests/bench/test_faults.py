"""Issue 30, item 3, the suite's short version of `drt-reader bench faults`: ingests of a small PDF
SIGKILLed at seeded random moments of their prefill and inside a checkpoint's fsync resume to a library
and states bit-identical to an uninterrupted ingest, and the library is whole right after each kill
(the bench runs 50 trials on a held-out book, uniform and aimed at every stage; RESULTS §7)."""

from __future__ import annotations

from pathlib import Path

from bench.faults import cut_pdf, phase_at, run_trials, stage_windows

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def test_killed_ingests_resume_bit_identical(tmp_path):
    pdf = cut_pdf(ASSETS / "emma-pp2-21.pdf", 3, tmp_path)
    res = run_trials(pdf, trials=2, seed=6, work=tmp_path / "work", uniform_share=0.0,
                     targets=("prefill", "checkpoint"), log=lambda s: None)
    ref = res["reference"]
    assert ref["integrity"] == "ok" and "state.0" in ref and "library.traces" in ref
    assert set(res["stage_s"]) >= {"parse", "tokenize", "store", "prefill", "checkpoint", "final commit"}
    assert [r["aim"] for r in res["rows"]] == ["prefill", "checkpoint"]
    assert res["identical"] == 2, res["rows"]
    assert res["library_whole_after_kill"] == 2, res["rows"]
    # seed 6 aims the first kill at 49% of the prefill (the second at a checkpoint after 26%): a real
    # resume of a partial state
    assert res["rows"][0]["phase"] in ("prefill", "commit (during prefill)"), res["rows"]
    assert res["rows"][0]["document_stored_before_kill"], res["rows"]


def test_phases_are_read_from_the_progress_lines():
    events = [(1.0, "hash", 0.0, "reading x.pdf"), (1.1, "parse", 0.0, "parsing x.pdf"),
              (1.5, "parse", 100.0, "3 pages"), (4.0, "tokenize", 0.0, "tokenizing"),
              (4.1, "store", 0.0, "storing 9 chunks"), (4.2, "store", 100.0, "stored"),
              (4.3, "prefill", 0.0, "prefilling"), (5.0, "prefill", 100.0, "prefilling"), (5.1, "done", 100.0, "done")]
    got = [phase_at(events, t) for t in (0.5, 1.05, 1.2, 2.0, 4.05, 4.15, 4.25, 4.5, 5.05, 5.2)]
    assert got == ["start-up", "hash", "parse", "load model", "tokenize", "store", "prefill", "prefill",
                   "final commit", "exit"]
    assert phase_at(events, 4.5, "fsync states/.../k.bin") == "commit (during prefill)"
    w = stage_windows(events, 5.3)
    assert {k: round(d, 3) for k, (_, d) in w.items()} == {"parse": 0.4, "tokenize": 0.1, "store": 0.1,
                                                          "prefill": 0.7, "checkpoint": 0.7, "final commit": 0.1}
