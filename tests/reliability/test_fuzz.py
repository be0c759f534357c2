"""Row 11 of the reliability plan: a fuzz smoke test of the parse harness (bench/fuzz.py), capped
at 20 s here; `drt-reader bench fuzz --seconds N` runs longer."""

from __future__ import annotations

from bench.fuzz import mutate, run, seeds


def test_mutations_are_seeded():
    import random

    pool = [b for _, b in seeds()]
    a = [mutate(pool[0], random.Random(7), pool) for _ in range(3)]
    b = [mutate(pool[0], random.Random(7), pool) for _ in range(3)]
    assert a == b


def test_fuzz_smoke_finds_nothing_in_20_seconds(tmp_path):
    stats = run(20.0, seed=11, out=tmp_path / "fuzz")
    assert stats["execs"] >= 50, stats
    assert stats["findings"] == [], (stats, [open(f + ".txt").read() for f in stats["findings"]])
    assert stats["outcomes"].get("ok", 0) > 0 and stats["outcomes"].get("error", 0) > 0  # both paths ran
