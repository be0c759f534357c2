"""Issue 58's sentence probe: which sentence of the read passages should be quoted.

    python -m bench.sentence_probe read --model CHECKPOINT --questions FILE --home DIR --out X.pkl
    python -m bench.sentence_probe report X.pkl [X2.pkl ...]

`read`: for each answerable question of FILE (documents already ingested in the library at DIR, e.g.
by `drt-reader eval qa`), the path `ask` takes up to the quote (qa.ask.cross_read, then the pool's
best READ_POOL chunks in the fused order, each with its neighbours, qa.reader.candidates), and for
every candidate sentence: the feature reader's score, the cross-encoder's relevance of the sentence
read alone and with the sentence before it, the best span score of the cross-encoder's span head
inside the sentence (its chunk's window read once), its chunk's P and rank, and whether the quote
grown around it (qa.reader.quote_bounds) holds the gold answer. `report`: "the quote holds the
answer" for each picking rule, written and mined questions apart (ids `val-...` are mined).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

from qa.reader import standardise as _z  # z-scores over a question's candidates, as Reader.read mixes them


def _sentence_span_scores(scorer, question: str, text: str, sents: list[tuple[int, int]]) -> list[float]:
    """The span head's best start + end logit with both ends inside each sentence [a, b) of `text`
    (qa.cross_encoder.best_span over the sentence's tokens; -20 for a sentence with none)."""
    import torch

    from qa.cross_encoder import best_span, encode_pairs

    ids, mask, types, offsets = encode_pairs(scorer.tok, question, [text])
    with torch.inference_mode():
        _, st, en = scorer.model(ids, mask, types)
    st, en = st[0].float(), en[0].float()
    inside = ([o for o in offsets[0] if o[1] >= a and o[2] <= b] for a, b in sents)
    return [best_span(st, en, toks)[1] if toks else -20.0 for toks in inside]


def read(model: str, questions: str, home: str, out: str) -> None:
    from bench.ce_probe import pool_reads
    from qa import ask as A
    from qa.eval_qa import contains
    from qa.reader import QuestionInfo, answer_candidates, quote_bounds, sentence_features, sentence_unit

    rows_out = []
    for q, lib, _, did, _, ce, reader in pool_reads(model, questions, home):
        scorer = ce["scorer"]
        wins = ce["windows"]
        ps, _ = A.pool_passages(lib, did, ce["order"])
        qi = QuestionInfo(q["question"], A._doc_stats(lib, did))
        cands = answer_candidates(qi, ps)
        if not cands:
            continue
        s_reader = reader.sentence(sentence_features(qi, cands))
        sents, quotes, labels, sent_labels = [], [], [], []
        for c in cands:
            text = c.passage.text
            a, b = quote_bounds(text, c.a, c.b)
            sents.append(" ".join(text[c.a:c.b].split()))
            quotes.append(" ".join(text[a:b].split()))
            labels.append(contains(quotes[-1], q["answer"]))
            sent_labels.append(contains(sents[-1], q["answer"]))
        rel_alone = [r.relevance for r in scorer.read(q["question"], sents, spans=False)]
        rel_prev = [r.relevance for r in scorer.read(q["question"], [sentence_unit(c) for c in cands], spans=False)]
        # the span head over each passage's chunk window (as the pool read it), per sentence
        span_sc = np.full(len(cands), -20.0)
        for p in {id(c.passage): c.passage for c in cands}.values():
            w = wins.get(p.chunk)
            if w is None:
                continue
            idx = [k for k, c in enumerate(cands) if c.passage is p]
            rel = []
            for k in idx:  # the sentence in the window's coordinates
                da, db = p.base + cands[k].a - w.base, p.base + cands[k].b - w.base
                rel.append((max(0, da), min(len(w.text), db)))
            for k, v in zip(idx, _sentence_span_scores(scorer, q["question"], w.text, rel)):
                span_sc[k] = v
        rows_out.append({
            "id": q["id"], "q": q["question"], "answer": q["answer"],
            "reader": np.asarray(s_reader, float), "rel_alone": np.asarray(rel_alone),
            "rel_prev": np.asarray(rel_prev), "span": span_sc,
            "p": np.asarray([wins[c.passage.chunk].p if c.passage.chunk in wins else 0.0 for c in cands]),
            "rank": np.asarray([c.passage.rank for c in cands]), "in_chunk": np.asarray(
                [float(c.a < c.passage.hi and c.b > c.passage.lo) for c in cands]),
            "label": np.asarray(labels), "sent_label": np.asarray(sent_labels), "sents": sents, "quotes": quotes})
        print(len(rows_out), file=sys.stderr, flush=True)
    Path(out).write_bytes(pickle.dumps(rows_out))


RULES = {
    "feature reader (shipped)": lambda d, a: d["reader"],
    "cross-encoder, sentence alone": lambda d, a: d["rel_alone"],
    "cross-encoder, sentence after the one before (sentence_unit)": lambda d, a: d["rel_prev"],
    "span head inside the sentence": lambda d, a: d["span"],
}


def combos():
    for a in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0):
        yield f"z(reader) + {a} z(rel alone)", lambda d, a=a: _z(d["reader"]) + a * _z(d["rel_alone"])
        yield f"z(reader) + {a} z(rel prev)", lambda d, a=a: _z(d["reader"]) + a * _z(d["rel_prev"])
        yield f"z(reader) + {a} z(span)", lambda d, a=a: _z(d["reader"]) + a * _z(d["span"])
        yield (f"z(reader) + {a} z(rel prev) + {a} z(span)",
               lambda d, a=a: _z(d["reader"]) + a * _z(d["rel_prev"]) + a * _z(d["span"]))
        yield f"z(rel prev) + {a} z(span)", lambda d, a=a: _z(d["rel_prev"]) + a * _z(d["span"])


def report(paths: list[str]) -> None:
    data = [d for p in paths for d in pickle.loads(Path(p).read_bytes())]
    groups = (("all", lambda d: True), ("written", lambda d: not d["id"].startswith("val-")),
              ("mined", lambda d: d["id"].startswith("val-")))
    rules = [(k, (lambda f: lambda d: f(d, None))(f)) for k, f in RULES.items()] + list(combos())
    head = "  ".join(f"{n} ({sum(map(k, data))})" for n, k in groups)
    print(f"{'rule':58s} {head}")
    print(f"{'a sentence holds it (ceiling)':58s} " + "  ".join(
        f"{np.mean([float(d['label'].max()) for d in data if k(d)] or [0]):.3f}" for _, k in groups))
    for name, f in rules:
        cells = []
        for _, k in groups:
            ds = [d for d in data if k(d)]
            cells.append(f"{np.mean([float(d['label'][int(np.argmax(f(d)))]) for d in ds]) if ds else 0:.3f}")
        print(f"{name:58s} " + "  ".join(cells))


def main(argv=None) -> int:
    from bench.ce_probe import probe_main

    return probe_main("python -m bench.sentence_probe", __doc__, read, report, argv, many=True)


if __name__ == "__main__":
    raise SystemExit(main())
