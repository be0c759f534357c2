"""Issue 58's validation probe: which order of the cross-encoder's pool, and which reader, answers best.

    python -m bench.ce_probe read --model CHECKPOINT --questions FILE --home DIR --out reads.pkl
    python -m bench.ce_probe report reads.pkl

`read`: for each answerable question of FILE (documents already ingested in the library at DIR, e.g.
by `drt-reader eval qa`), the cross-encoder's reads of the question's pool (qa.ask.cross_read), the
model's question-time scores s0 (Engine.question_scores, learned + BM25) of each pool chunk, the gold
chunks, and the trained feature reader's quote from the pool's best 8 under several orders
(cross-encoder P; s0 + W P for W in WEIGHTS). `report`: top 1, the right passage among the first
three and "the quote holds the answer" for each rule, written and mined questions apart (ids
`val-...` are mined). docs/history/2026-12-06-issue58-answers.md has its figures.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

WEIGHTS = (0, 10, 20, 50, 100, 200)


def library_questions(model: str, questions: str, home: str):
    """Each answerable question of FILE whose document the library at DIR holds: yields (question,
    library, engine, the checkpoint's cross-encoder, doc id, state)."""
    from drt_core.engine import Engine
    from qa import ask as A
    from qa.eval_qa import load_questions
    from store.library import Library

    eng = Engine.from_pretrained(model, device="cpu")
    scorer = A.cross_encoder(eng)
    if scorer is None:
        raise SystemExit(f"{model} ships no cross-encoder")
    lib = Library(home)
    for q in load_questions(questions):
        if not q["answerable"]:
            continue
        did = next((d["id"] for d in lib.documents() if d.get("source_name") == Path(q["doc"]).name), None)
        if did is None:
            print(f"not ingested: {q['doc']}", file=sys.stderr)
            continue
        yield q, lib, eng, scorer, did, A.ready_state(lib, eng, did)


def pool_reads(model: str, questions: str, home: str):
    """Each answerable question of FILE whose document the library at DIR holds, its pool read as
    `ask` reads it (qa.ask.cross_read): yields (question, library, engine, doc id, state, the
    reading, the checkpoint's trained reader or None)."""
    from qa import ask as A

    reader = None
    for q, lib, eng, scorer, did, state in library_questions(model, questions, home):
        reader = reader or A._reader(eng)
        yield q, lib, eng, did, state, A.cross_read(lib, eng, state, did, q["question"], [], scorer), reader


def read(model: str, questions: str, home: str, out: str) -> None:
    from ingest.parts import document_text
    from qa import ask as A
    from qa import rerank
    from qa.eval_qa import TextFinder, gold_chunks
    from qa.reader import quote_bounds

    rows_out = []
    for q, lib, eng, did, state, ce, reader in pool_reads(model, questions, home):
        s0 = eng.question_scores(state, q["question"])
        gold, _ = gold_chunks(TextFinder(document_text(lib, did)), lib.chunks(did), q["gold"])
        wins = ce["windows"]
        rows = [{"chunk": c, "p": w.p, "rel": w.read.relevance, "span_score": w.read.span_score,
                 "quote": rerank.quote_of(w), "s0": float(s0[c])} for c, w in wins.items()]
        olds = {}
        for W in ("ce", *WEIGHTS):
            key = (lambda cw: -cw[1].p) if W == "ce" else (lambda cw, W=W: -(float(s0[cw[0]]) + W * cw[1].p))
            ps, _ = A.pool_passages(lib, did, [c for c, _ in sorted(wins.items(), key=key)])
            rd = reader.read(q["question"], ps, A._doc_stats(lib, did)) if reader is not None and ps else None
            if rd is not None:
                p0 = rd.sentence.passage
                a, b = quote_bounds(p0.text, rd.sentence.a, rd.sentence.b)
                olds[W] = " ".join(p0.text[a:b].split())
            else:
                olds[W] = None
        rows_out.append({"id": q["id"], "q": q["question"], "answer": q["answer"], "gold": gold, "rows": rows,
                         "old_quotes": olds})
        print(len(rows_out), file=sys.stderr, flush=True)
    Path(out).write_bytes(pickle.dumps(rows_out))


def report(path: str) -> None:
    import numpy as np

    from qa.eval_qa import contains

    data = pickle.loads(Path(path).read_bytes())
    for name, keep in (("all", lambda d: True), ("written", lambda d: not d["id"].startswith("val-")),
                       ("mined", lambda d: d["id"].startswith("val-"))):
        ds = [d for d in data if keep(d)]
        print(f"## {name} ({len(ds)} answerable questions)")
        rules = {"cross-encoder P": lambda r: r["p"], **{f"s0 + {w} P": (lambda w: lambda r: r["s0"] + w * r["p"])(w)
                                                        for w in WEIGHTS}}
        for rule, key in rules.items():
            c, t1, s3 = [], [], []
            for d in ds:
                rows = sorted([r for r in d["rows"] if r["quote"]], key=lambda r: -key(r))
                g = set(d["gold"])
                c.append(contains(rows[0]["quote"]["text"], d["answer"]) if rows else 0.0)
                t1.append(float(bool(g & {r["chunk"] for r in rows[:1]})))
                s3.append(float(bool(g & {r["chunk"] for r in rows[:3]})))
            print(f"{rule:16s} top1 {np.mean(t1):.3f}  right passage among 3 {np.mean(s3):.3f}  "
                  f"cross-encoder span quote {np.mean(c):.3f}")
        for W in ("ce", *WEIGHTS):
            if not all(W in d["old_quotes"] for d in ds):
                continue
            got = np.mean([contains(d["old_quotes"][W] or "", d["answer"]) for d in ds])
            print(f"feature reader on the best 8 by {'P' if W == 'ce' else f's0 + {W} P'}: {got:.3f}")
        print("gold in the pool", np.mean([float(bool(set(d["gold"]) & {r["chunk"] for r in d["rows"]})) for d in ds]))


def probe_main(prog: str, doc: str, read, report, argv=None, *, model: str | None = None, many: bool = False) -> int:
    """A probe's command line: `read --model M --questions F --home DIR --out X.pkl` (`model`: the
    default checkpoint, else --model is required), then `report` of one pickle (or several: `many`)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read")
    r.add_argument("--model", required=model is None, default=model)
    r.add_argument("--questions", required=True)
    r.add_argument("--home", required=True)
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("reads", nargs="+" if many else None)
    a = ap.parse_args(argv)
    if a.cmd == "read":
        read(a.model, a.questions, a.home, a.out)
    else:
        report(a.reads)
    return 0


def main(argv=None) -> int:
    return probe_main("python -m bench.ce_probe", __doc__, read, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
