"""Choose the narrative summary's weights on development chapters (never the sealed set).

    python -m bench.summary_dev --set runs/sum/dev.jsonl --home runs/sumhome [--docs-root ../shared/corpora]

Each book is ingested and prefilled as `drt-reader eval summary` does (resumable); per chapter the
candidate sentences, their MiniLM embeddings and the model's centrality are computed once, then a
small grid of weights (qa.narrate.Weights) and sentence counts is scored in ROUGE-L F1 and
key-sentence recall (ranked by ROUGE-L + recall / 4) against the written summaries, beside lead and
centroid. Prints one line per setting, best first.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from qa import narrate
from qa.eval_summary import book_chapters, centroid, key_recall, lead, load_set, rouge_l


def chapters(set_path: str, home: str, docs_root: str, model: str) -> list[dict]:
    from drt_core.fixed_retriever import embed_texts
    from ingest import pipeline
    from ingest.boilerplate import chunk_matter
    from ingest.parts import Part
    from qa.summary import dependency_map, in_degree, part_sentences
    from store.library import Library

    engine = pipeline.load_engine(model)
    out = []
    with Library(home) as lib:
        book = None  # (doc_id, chunks, boilerplate, centrality): once per book
        for doc_id, text, rec, (a, b) in book_chapters(lib, engine, load_set(set_path), docs_root):
            if book is None or book[0] != doc_id:
                chunks = lib.chunks(doc_id)
                boiler = set(chunk_matter(lib, doc_id, chunks))
                book = (doc_id, chunks, boiler,
                        in_degree(dependency_map(lib, engine, doc_id), len(chunks), frozenset(boiler)))
            _, chunks, boiler, cent = book
            sents = part_sentences(text, Part(1, rec["chapter"], a, b, 0, 0, "given"), chunks, cent, boiler)
            texts = [s.text for s in sents]
            out.append({"rec": rec, "span": (a, b), "texts": texts, "starts": [s.char_start for s in sents],
                        "emb": dict(zip(texts, embed_texts(texts))), "centrality": [s.score for s in sents],
                        "lead": lead(text, a, b, 5), "centroid": centroid(text, a, b, 5)})
    return out


def score(rows: list[dict], pick_fn) -> tuple[float, float, float]:
    rl = kr = words = 0.0
    for r in rows:
        sents = pick_fn(r)
        rl += rouge_l(" ".join(sents), r["rec"]["summary"])["f"]
        kr += key_recall(sents, r["rec"]["key_sentences"])
        words += len(" ".join(sents).split())
    n = len(rows)
    return rl / n, kr / n, words / n


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", required=True)
    p.add_argument("--home", required=True)
    p.add_argument("--docs-root", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    rows = chapters(args.set, args.home, args.docs_root, args.model)
    print(f"{len(rows)} chapters")
    for name in ("lead", "centroid"):
        print(f"{name:60} RL {score(rows, lambda r: r[name])[0]:.4f} key {score(rows, lambda r: r[name])[1]:.3f}")
    results = []
    grid = itertools.product((0.0, 0.25, 0.5), (0.5, 1.0), (0.0, 1.0), (1.0, 3.0), (0.5, 1.0), (0.0, 0.25), (4, 5))
    for about, people, dialogue, opening, time, drt, k in grid:
        w = narrate.Weights(about, people, dialogue, opening, time, drt)

        def fn(r, w=w, k=k):
            idx = narrate.narrative(r["texts"], r["starts"], r["span"], k,
                                    embed=lambda ts, r=r: [r["emb"][t] for t in ts],
                                    centrality=r["centrality"], w=w)
            return [r["texts"][i] for i in idx]

        rl, kr, words = score(rows, fn)
        results.append((rl + kr / 4, rl, kr, words, w, k))
    results.sort(key=lambda x: -x[0])
    for _, rl, kr, words, w, k in results[: args.top]:
        print(f"{json.dumps(w.__dict__)} k={k}  RL {rl:.4f} key {kr:.3f} words {words:.0f}")


if __name__ == "__main__":
    main()
