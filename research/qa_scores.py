"""Dump, per question, the question landmark's retrieval score components over every document chunk.

    python research/qa_scores.py --home tmp/h18 --questions docs/eval/qa_handwritten.jsonl \
        --docs-root ../shared/corpora --out tmp/scores_hw.pkl

For each question of a qa_eval question file (documents ingested into --home like `eval qa` does),
the prompt is fed as `ask` feeds it and the landmark closing the question's chunk is scored:
dense (<q, l> / sqrt(D)), the lexical term's learned part (w_t) and its in-document idf part, each
[n_doc_chunks]. With the gold chunks, the chunk texts and the question, that is everything an
offline ranking or abstention experiment needs (research, not product: see docs/history).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest import pipeline  # noqa: E402
from ingest.parts import document_text  # noqa: E402
from ingest.qa_eval import TextFinder, boilerplate_chunks, gold_chunks, load_questions  # noqa: E402
from store.library import Library  # noqa: E402


def components(engine, state, question: str) -> dict:
    """Feed the question's prompt on a fork of `state`; capture group 0's scores at the last landmark."""
    model = engine.model
    lex = model.lexical
    got: list[dict] = []
    orig = model.chunk_scores

    def hook(g, q, keys, q_chunk, k_chunk, q_toks=None, k_toks=None, stats=None):
        s = orig(g, q, keys, q_chunk, k_chunk, q_toks, k_toks, stats=stats)
        if g == 0:
            rec = {"q_chunk": q_chunk.tolist(), "total": s[0].detach().float().cpu()}
            if lex is not None:
                full = lex.scores(g, q_toks, k_toks, q_chunk, k_chunk)[0]
                doc, words, lex.doc, lex.words = lex.doc, lex.words, None, None
                try:
                    w = lex.scores(g, q_toks, k_toks, q_chunk, k_chunk)[0]
                    lex.doc = doc
                    tok = lex.scores(g, q_toks, k_toks, q_chunk, k_chunk)[0]
                finally:
                    lex.doc, lex.words = doc, words
                rec |= {"lex": full.float().cpu(), "lexw": w.float().cpu(), "lextok": tok.float().cpu(),
                        "q_toks": q_toks[0].cpu()}
            got.append(rec)
        return s

    model.chunk_scores = hook
    try:
        with torch.no_grad(), state.lock:
            fork = state.fork()
        ids = engine.prompt_ids(fork, question)
        with torch.no_grad():
            engine.feed(fork, list(ids), want_logits=False)
    finally:
        del model.chunk_scores
    rec = got[-1]
    n = state.n_chunks
    j = len(rec["q_chunk"]) - 1
    out = {"n": n, "total": rec["total"][j, :n].numpy()}
    if "lex" in rec:
        out |= {"lex": rec["lex"][j, :n].numpy(), "lexw": rec["lexw"][j, :n].numpy(),
                "lextok": rec["lextok"][j, :n].numpy(),
                "q_toks": rec["q_toks"][j].numpy()}
        out["dense"] = out["total"] - out["lex"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--model", default="checkpoints/drt-tiny")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--docs-root", default="../shared/corpora")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    engine = pipeline.load_engine(a.model)
    qs = load_questions(a.questions)
    docs, rows = {}, []
    with Library(a.home) as lib:
        for doc in dict.fromkeys(q["doc"] for q in qs):
            res = pipeline.ingest(Path(a.docs_root) / doc, library=lib, engine=engine)
            chunks = lib.chunks(res.doc_id)
            finder = TextFinder(document_text(lib, res.doc_id))
            state = pipeline.ready_state(lib, engine, res.doc_id)
            docs[doc] = {"doc_id": res.doc_id, "texts": [c["text"] for c in chunks],
                         "pages": [(c["page_first"], c["page_last"]) for c in chunks],
                         "chunk_toks": engine._memory_tokens(state.memory).cpu().numpy(),
                         "boiler": sorted(boilerplate_chunks(lib, res.doc_id, chunks))}
            for q in [q for q in qs if q["doc"] == doc]:
                gold, found = gold_chunks(finder, chunks, q["gold"]) if q["answerable"] else ([], None)
                rows.append({k: q[k] for k in ("id", "doc", "type", "question", "answer", "answerable")}
                            | {"gold_chunks": gold, "gold_found": found} | components(engine, state, q["question"]))
            print(f"{doc}: {len(rows)} questions", flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "wb") as f:
        pickle.dump({"docs": docs, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
