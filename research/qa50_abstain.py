"""Issue 50 probe: abstention from the reader's and the retriever's confidence, on cached questions.

    python research/qa50_abstain.py MODEL_DIR --fit tmp/qa50/valw.pkl tmp/qa50/minedval.pkl --test tmp/qa50/dev.pkl

Features per question: ingest.abstain_model.FEATURES (the reader's and BM25's confidence).
A logistic regression is fitted on --fit (validation); its threshold lets at most 10% of the
answerable --fit questions abstain. The rare-word test (ingest.abstain) abstains as well. Reported
on --fit (in-sample) and --test.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from qa50_fusion import learned_scores  # noqa: E402
from qa50_reader import passages  # noqa: E402

from drt_core.bm25 import BM25  # noqa: E402
from ingest import abstain as ab  # noqa: E402
from ingest.abstain_model import FEATURES, features, fit_abstention  # noqa: E402
from ingest.reader import DocStats, Reader  # noqa: E402


def rows_of(path, reader, common, w=2.0, window=1):
    data = pickle.load(open(path, "rb"))
    out, cache = [], {}
    for r in data["rows"]:
        d = data["docs"][r["doc"]]
        texts = d["texts"]
        if r["doc"] not in cache:
            cache[r["doc"]] = (DocStats(texts), BM25(texts, window=window), ab.DocVocabulary(texts))
        stats, bm, vocab = cache[r["doc"]]
        n = len(texts)
        learned = learned_scores(r, n)
        b = bm.scores(r["question"])
        fused = np.nan_to_num(learned, nan=-1e9) + w * b
        ranking = [int(i) for i in np.lexsort((np.arange(n), -fused))[:8]]
        reading = reader.read(r["question"], passages(texts, ranking, b, set(d["boiler"])), stats)
        x = features(r["question"], reading, stats, b)
        missing = bool(ab.missing_words(r["question"], vocab, common)) if common else False
        out.append({"x": x, "answerable": r["answerable"], "missing": missing, "set": Path(path).stem})
    return out


def report(name, rows, model):
    from ingest.abstain_model import abstains

    a = [r for r in rows if r["answerable"]]
    u = [r for r in rows if not r["answerable"]]
    ab_a = np.mean([r["missing"] or abstains(model, r["x"]) for r in a]) if a else float("nan")
    ab_u = np.mean([r["missing"] or abstains(model, r["x"]) for r in u]) if u else float("nan")
    rw_u = np.mean([r["missing"] for r in u]) if u else float("nan")
    rw_a = np.mean([r["missing"] for r in a]) if a else float("nan")
    print(f"{name:12s} answerable abstain {100 * ab_a:5.1f}% (rare-word alone {100 * rw_a:.1f}%) of {len(a)}; "
          f"unanswerable abstain {100 * ab_u:5.1f}% (rare-word alone {100 * rw_u:.1f}%) of {len(u)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--fit", nargs="+", required=True)
    ap.add_argument("--test", nargs="*", default=[])
    ap.add_argument("--threshold-on", nargs="*", default=None, help="sets whose answerable questions set the threshold")
    a = ap.parse_args()
    reader = Reader.load(a.model)
    common = ab.load_common_words(a.model) or ab.load_common_words("checkpoints/drt-tiny")
    fit_rows = [r for p in a.fit for r in rows_of(p, reader, common)]
    th = None
    if a.threshold_on:
        th = [r["x"] for p in a.threshold_on for r in rows_of(p, reader, common) if r["answerable"] and not r["missing"]]
    model = fit_abstention([r["x"] for r in fit_rows if not r["missing"]],
                           [r["answerable"] for r in fit_rows if not r["missing"]], threshold_on=th)
    print("weights", dict(zip(FEATURES, np.round(model["w"], 3))), "threshold", round(model["threshold"], 3))
    for p in a.fit:
        report(Path(p).stem + " (fit)", [r for r in fit_rows if r["set"] == Path(p).stem], model)
    for p in a.test:
        report(Path(p).stem, rows_of(p, reader, common), model)


if __name__ == "__main__":
    main()
