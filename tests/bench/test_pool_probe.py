"""bench.pool_probe's report: a deeper pool can hold the gold that ask's pool misses, and the
order s0 + W P decides what comes first."""

from __future__ import annotations

import pickle

from bench.pool_probe import report


def test_report_counts_the_gold_in_the_pool_first_and_among_three(tmp_path, capsys):
    def win(c, s0, p, r0, rb=99):
        return {"chunk": c, "s0": s0, "bm": 0.0, "r0": r0, "rb": rb, "p": p}

    rows = [  # ask's pool is the model's best 2 and BM25's best 1
        {"id": "a", "answerable": True, "gold": [7], "first": [], "pool": (2, 1),
         "win": [win(1, 5.0, 0.1, 0), win(7, 4.0, 0.9, 1), win(9, 1.0, 0.0, 5)]},  # P lifts the gold first
        {"id": "b", "answerable": True, "gold": [9], "first": [], "pool": (2, 1),
         "win": [win(1, 5.0, 0.1, 0), win(2, 4.0, 0.2, 1), win(9, 1.0, 0.8, 4)]},  # only a deeper pool holds it
        {"id": "u", "answerable": False, "gold": [], "first": [], "pool": (2, 1), "win": []},
    ]
    path = tmp_path / "pools.pkl"
    path.write_bytes(pickle.dumps(rows))
    report([str(path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 answerable")
    line = next(x for x in out if x.startswith("pool  2 +  1, s0 +   10 P"))
    assert "gold in the pool 0.500, first 0.500, among the first three 0.500" in line
    line = next(x for x in out if x.startswith("pool  6 +  3, s0 +   10 P"))
    assert "gold in the pool 1.000, first 1.000, among the first three 1.000" in line  # P lifts it there too
