"""Issue 50 probe: cache, per question of a question file, what every retrieval choice needs.

    python research/qa50_cache.py QUESTIONS.jsonl --docs-root ../shared --out tmp/qa50/NAME.pkl
        [--model checkpoints/drt-tiny] [--home tmp/qa50-home]

For each document (ingested into --home as `eval qa` does): the chunk texts, pages and the
boilerplate chunks. For each question: its gold chunks and the model's own learned selection
scores of the question's landmark over the document's chunks (the engine, bm25 off), so that BM25,
fusions and readers can be compared offline on exactly the app's chunks. Not part of the product.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest import pipeline  # noqa: E402
from ingest.qa_eval import TextFinder, boilerplate_chunks, document_text, gold_chunks, load_questions  # noqa: E402
from store.library import Library  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("questions")
    ap.add_argument("--docs-root", default="../shared")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="checkpoints/drt-tiny")
    ap.add_argument("--home", default="tmp/qa50-home")
    a = ap.parse_args(argv)
    qs = load_questions(a.questions)
    eng = pipeline.load_engine(a.model)
    eng.cfg.bm25_weight = 0.0  # the learned scores alone
    docs, rows = {}, []
    with Library(a.home) as lib:
        for doc in dict.fromkeys(q["doc"] for q in qs):
            t0 = time.time()
            res = pipeline.ingest(Path(a.docs_root) / doc, library=lib, engine=eng)
            chunks = lib.chunks(res.doc_id)
            finder = TextFinder(document_text(lib, res.doc_id))
            docs[doc] = {"doc_id": res.doc_id, "texts": [c["text"] for c in chunks],
                         "pages": [(c["page_first"], c["page_last"]) for c in chunks],
                         "boiler": sorted(boilerplate_chunks(lib, res.doc_id, chunks))}
            state = pipeline.ready_state(lib, eng, res.doc_id)
            n = state.n_chunks
            for q in [q for q in qs if q["doc"] == doc]:
                gold, found = gold_chunks(finder, chunks, q["gold"]) if q["answerable"] else ([], None)
                ev = None
                for ev in eng.generate(state, q["question"], max_new_tokens=1, temperature=0.0):
                    pass
                tr = ev.trace.to_json()
                sc = tr["chunks"][0]["scores"][:n] if tr["chunks"] else []
                rows.append(q | {"gold_chunks": gold, "gold_found": found,
                                 "learned": np.array([np.nan if v is None else v for v in sc], dtype=np.float64)})
            print(f"{doc}: {len(chunks)} chunks, {time.time() - t0:.1f} s", flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "wb") as f:
        pickle.dump({"docs": docs, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
