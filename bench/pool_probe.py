"""Issue 58's pool probe: is a question's gold passage lost by the pool or by its order?

    python -m bench.pool_probe read --model CHECKPOINT --questions FILE --home DIR --out pools.pkl
    python -m bench.pool_probe report pools.pkl [pools2.pkl ...]

`read`: for each answerable question of FILE (documents already ingested in the library at DIR), a pool WIDE
times deeper than `ask`'s (the model's best POOL x WIDE chunks by its question-time scores s0, BM25's
best BM25_POOL x WIDE, "Who is X?"'s introducing chunks), every chunk read by the cross-encoder as
`ask` reads it (qa.rerank.windows, read_pool), with its s0, BM25 score, both ranks and the gold chunks.
`report`: for pools of several depths and orders s0 + W P, how often the gold is in the pool, first,
and among the first three (answerable questions whose gold was located).
docs/history/2026-12-07-pool-ordering-ce-v5.md has its figures.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

WIDE = 3
DEPTHS = (1, 1.5, 2, 3)  # pool depths reported, in multiples of ask's
WEIGHTS = (10, 20, 40, 80, 1000)


def read(model: str, questions: str, home: str, out: str) -> None:
    import numpy as np

    from bench.ce_probe import library_questions
    from ingest.parts import document_text
    from qa import ask as A
    from qa import rerank
    from qa.eval_qa import TextFinder, gold_chunks

    rows, (k0, kb) = [], (rerank.POOL, rerank.BM25_POOL)
    for q, lib, eng, scorer, did, state in library_questions(model, questions, home):
        s0 = np.nan_to_num(np.asarray(eng.question_scores(state, q["question"]), np.float64), nan=-1e30)
        bm = np.asarray(eng.bm25_index(state).scores(q["question"]), np.float64)
        first = A.introduction(lib, did, q["question"])
        chunks = rerank.pool(s0, bm, frozenset(), first, state.n_chunks, k0 * WIDE, kb * WIDE)
        wins = rerank.windows(lib, did, chunks, frozenset())
        rerank.read_pool(scorer, q["question"], wins)
        gold, _ = gold_chunks(TextFinder(document_text(lib, did)), lib.chunks(did), q["gold"])
        r0 = {int(c): i for i, c in enumerate(np.argsort(-s0, kind="stable")[: 20 * k0])}
        rb = {int(c): i for i, c in enumerate(np.argsort(-bm, kind="stable")[: 20 * kb])}
        rows.append({"id": q["id"], "answerable": q["answerable"], "gold": list(gold), "first": list(first),
                     "pool": (k0, kb), "win": [{"chunk": c, "s0": float(s0[c]), "bm": float(bm[c]),
                                                "r0": r0.get(c, 1 << 30), "rb": rb.get(c, 1 << 30), "p": w.p}
                                               for c, w in wins.items()]})
        print(len(rows), file=sys.stderr, flush=True)
    Path(out).write_bytes(pickle.dumps(rows))


def report(paths: list[str]) -> None:
    rows = [r for p in paths for r in pickle.loads(Path(p).read_bytes()) if r["answerable"] and r["gold"]]
    print(f"{len(rows)} answerable questions with their gold located")
    if not rows:
        return
    k0, kb = rows[0]["pool"]
    for depth in DEPTHS:
        for W in WEIGHTS:
            inpool = top1 = top3 = 0
            for r in rows:
                wins = [w for w in r["win"] if w["r0"] < depth * k0 or w["rb"] < depth * kb or w["chunk"] in r["first"]]
                order = [w["chunk"] for w in sorted(wins, key=lambda w: (-(w["s0"] + W * w["p"]), w["chunk"]))]
                g = set(r["gold"])
                inpool += bool(g & set(order))
                top1 += bool(g & set(order[:1]))
                top3 += bool(g & set(order[:3]))
            n = len(rows)
            print(f"pool {int(depth * k0):2d} + {int(depth * kb):2d}, s0 + {W:4d} P: "
                  f"gold in the pool {inpool / n:.3f}, first {top1 / n:.3f}, among the first three {top3 / n:.3f}")


def main(argv=None) -> int:
    from bench.ce_probe import probe_main

    return probe_main("python -m bench.pool_probe", __doc__, read, report, argv, model="checkpoints/drt-tiny",
                      many=True)


if __name__ == "__main__":
    raise SystemExit(main())
