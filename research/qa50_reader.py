"""Issue 50 probe: the answer reader on cached questions (research/qa_scores.py), offline.

    python research/qa50_reader.py MODEL_DIR tmp/qa50/dev.pkl [...] [--w 1.0 --window 1]

For each answerable question: the fused ranking's top 8 (learned + w x BM25, the engine's
question-time selection), read with their neighbours; the share whose quote holds the gold answer
for (a) the trained reader, (b) the idf rule of ingest.ask (the sentence of the top chunk sharing
the most question idf), (c) an oracle picking the best sentence among the candidates. Validation
and development sets only.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from qa50_fusion import learned_scores  # noqa: E402

from drt_core.bm25 import BM25  # noqa: E402
from ingest.qa_eval import contains  # noqa: E402
from ingest.reader import DocStats, Passage, QuestionInfo, Reader, _terms_of, candidates, quote_bounds  # noqa: E402


def passages(texts, ranking, scores, boiler):
    starts = np.concatenate([[0], np.cumsum([len(t) for t in texts])])
    top = max(scores[ranking[0]], 1e-9) if ranking else 1.0
    out = []
    for r, c in enumerate(ranking):
        lo_c, hi_c = max(c - 1, 0), min(c + 1, len(texts) - 1)
        text = "".join(texts[lo_c: hi_c + 1])
        base = int(starts[lo_c])
        out.append(Passage(c, r, float(max(scores[c], 0) / top), text, base, int(starts[c] - base),
                           int(starts[c + 1] - base), c in boiler))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("pkls", nargs="+")
    ap.add_argument("--w", type=float, default=1.0)
    ap.add_argument("--window", type=int, default=1)
    a = ap.parse_args()
    reader = Reader.load(a.model)
    res = defaultdict(lambda: defaultdict(list))
    for path in a.pkls:
        data = pickle.load(open(path, "rb"))
        cache = {}
        for r in data["rows"]:
            if not r["answerable"]:
                continue
            d = data["docs"][r["doc"]]
            texts = d["texts"]
            if r["doc"] not in cache:
                cache[r["doc"]] = (DocStats(texts), BM25(texts, window=a.window))
            stats, bm = cache[r["doc"]]
            n = len(texts)
            learned = learned_scores(r, n)
            b = bm.scores(r["question"])
            fused = np.nan_to_num(learned, nan=-1e9) + a.w * b
            ranking = [int(i) for i in np.lexsort((np.arange(n), -fused))[:8]]
            ps = passages(texts, ranking, b, set(d["boiler"]))
            cands = candidates(ps)
            gold = r["answer"]
            keys = ("all", Path(path).stem, f"type:{r['type']}")
            def quote(c):
                x, y = quote_bounds(c.passage.text, c.a, c.b)
                return c.passage.text[x:y]
            oracle = float(any(contains(quote(c), gold) for c in cands))
            q = QuestionInfo(r["question"], stats)
            # the idf rule: in the top passage's own chunk, the sentence sharing the most question idf
            own = [c for c in cands if c.passage.rank == 0] or cands
            rule = max(own, key=lambda c: (q.cov(_terms_of(c.passage.text[c.a:c.b])), -c.a)) if own else None
            rd = reader.read(r["question"], ps, stats) if reader else None
            vals = {"oracle": oracle, "rule": float(bool(rule) and contains(quote(rule), gold)),
                    "reader": float(bool(rd) and contains(quote(rd.sentence), gold)),
                    "reader_sentence": float(bool(rd) and contains(rd.sentence.passage.text[rd.sentence.a:rd.sentence.b], gold)),
                    "span_f1>0": 0.0, "hit@4": float(bool(set(r["gold_chunks"]) & set(ranking[:4])))}
            if rd and rd.span:
                from ingest.qa_eval import token_f1
                vals["span_f1>0"] = float(token_f1(rd.sentence.passage.text[rd.span[0]:rd.span[1]], gold) > 0)
            for k in keys:
                for m, v in vals.items():
                    res[k][m].append(v)
    for k, by in res.items():
        print(k.ljust(20), " ".join(f"{m}={100 * np.mean(v):.1f}" for m, v in by.items()), f"n={len(by['oracle'])}")


if __name__ == "__main__":
    main()
