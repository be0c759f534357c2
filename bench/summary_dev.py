"""Choose the narrative summary's weights on development chapters (never a sealed set still unread).

    python -m bench.summary_dev --set runs/sum/dev.jsonl --home runs/sumhome \\
        --set docs/eval/summaries/sealed_v2.jsonl --home runs/sumhome_v2

`--set`, `--home` and `--docs-root` repeat, one of each per set (`--docs-root` defaults to where
qa.eval_summary resolves the set: ../shared for sealed_v2, ../shared/corpora otherwise). Each book is
ingested and prefilled as `drt-reader eval summary` does (resumable); per chapter the candidate
sentences, their MiniLM embeddings and the model's centrality are computed once and cached in a
pickle under `--cache` (runs/sum; `--refresh` recomputes). Then the shipped setting (qa.narrate.WEIGHTS,
K sentences) and a small grid of weights (qa.narrate.Weights) and sentence counts are scored in
ROUGE-L F1, key-sentence recall and words against the written summaries, beside lead and centroid
(SENTENCES sentences each, as the eval gives them), per set and pooled over all chapters; the grid
is ranked by the pooled ROUGE-L + recall / 4, and with several sets each set is also scored with
the setting chosen on the others (leave one set out).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import pickle
from pathlib import Path

from qa import narrate
from qa.eval_summary import (SENTENCES, SET_ROOTS, SETS, book_chapters, centroid, key_recall, lead, load_set,
                             rouge_l, words)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DOCS_ROOT = ROOT.parent / "shared" / "corpora"
K = SENTENCES  # the sentences of a chapter's summary (qa.summary.per_part_budget for one part)
SEALED_UNREAD = ("sealed_v3",)  # sets not to be read for development: refused by name


def docs_root_for(set_path: str) -> str:
    """Where qa.eval_summary looks for a set's `doc` paths."""
    for name, path in SETS.items():
        if Path(set_path).resolve() == path.resolve():
            return str(SET_ROOTS.get(name, DEFAULT_DOCS_ROOT))
    return str(DEFAULT_DOCS_ROOT)


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
            mat = embed_texts(texts).detach().float().cpu().clone()  # one matrix: rows of a view pickle it whole
            out.append({"rec": rec, "doc_id": doc_id, "span": (a, b), "texts": texts,
                        "starts": [s.char_start for s in sents], "matrix": mat,
                        "centrality": [s.score for s in sents],
                        "lead": lead(text, a, b, K), "centroid": centroid(text, a, b, K)})
    return out


def embedder(row: dict):
    """The cached embeddings as `narrate.narrative`'s `embed` (texts -> rows of the chapter's matrix)."""
    if "_index" not in row:
        row["_index"] = {}
        for i, t in enumerate(row["texts"]):
            row["_index"].setdefault(t, i)
    return lambda ts: [row["matrix"][row["_index"][t]] for t in ts]


def load_rows(set_path: str, home: str, docs_root: str, model: str, cache_dir: str, refresh: bool) -> list[dict]:
    """The set's chapter rows, from the cache when it was made from the same set file, home, root and model."""
    if any(s in Path(set_path).name for s in SEALED_UNREAD):
        raise SystemExit(f"{set_path}: a sealed set still unread is not for development")
    key = {"set": str(Path(set_path).resolve()), "set_sha": hashlib.sha256(Path(set_path).read_bytes()).hexdigest(),
           "home": str(Path(home).resolve()), "docs_root": str(Path(docs_root).resolve()), "model": model,
           "version": 2}
    path = Path(cache_dir) / f"rows_{Path(set_path).stem}.pkl"
    if path.is_file() and not refresh:
        with path.open("rb") as f:
            cached = pickle.load(f)
        if cached.get("key") == key:
            return cached["rows"]
    rows = chapters(set_path, home, docs_root, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump({"key": key, "rows": rows}, f)
    return rows


def per_chapter(rows: list[dict], pick_fn) -> list[tuple[float, float, int]]:
    """(ROUGE-L F1, key recall, words) of each chapter's summary."""
    out = []
    for r in rows:
        sents = pick_fn(r)
        out.append((rouge_l(" ".join(sents), r["rec"]["summary"])["f"], key_recall(sents, r["rec"]["key_sentences"]),
                    len(words(" ".join(sents)))))
    return out


def mean(xs: list[tuple[float, float, int]]) -> tuple[float, float, float]:
    n = max(1, len(xs))
    return sum(x[0] for x in xs) / n, sum(x[1] for x in xs) / n, sum(x[2] for x in xs) / n


def score(rows: list[dict], pick_fn) -> tuple[float, float, float]:
    return mean(per_chapter(rows, pick_fn))


def objective(m: tuple[float, float, float]) -> float:
    return m[0] + m[1] / 4


def narrative_fn(w: narrate.Weights, k: int):
    def fn(r):
        idx = narrate.narrative(r["texts"], r["starts"], r["span"], k, embed=embedder(r),
                                centrality=r["centrality"], w=w)
        return [r["texts"][i] for i in idx]
    return fn


def fmt(m: tuple[float, float, float]) -> str:
    return f"RL {m[0]:.4f} key {m[1]:.3f} w {m[2]:3.0f}"


def report(sets: dict[str, list[dict]], label: str, pick_fn) -> dict[str, list]:
    """Per set and pooled figures of one system, printed on one line; returns the per-chapter scores by set."""
    got = {name: per_chapter(rows, pick_fn) for name, rows in sets.items()}
    pooled = [x for xs in got.values() for x in xs]
    parts = [f"{name}: {fmt(mean(xs))}" for name, xs in got.items()]
    if len(sets) > 1:
        parts.append(f"pooled: {fmt(mean(pooled))}")
    print(f"{label:44} " + " | ".join(parts))
    return got


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", action="append", required=True, help="a development set (repeat for several)")
    p.add_argument("--home", action="append", required=True, help="its library (one per --set)")
    p.add_argument("--docs-root", action="append", default=None,
                   help="its docs root (one per --set; default: as qa.eval_summary resolves the set)")
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--cache", default=str(ROOT / "runs" / "sum"), help="where the per-set rows are pickled")
    p.add_argument("--refresh", action="store_true", help="recompute the cached rows")
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    if len(args.home) != len(args.set) or (args.docs_root is not None and len(args.docs_root) != len(args.set)):
        p.error("give one --home (and one --docs-root, if any) per --set")
    roots = args.docs_root or [docs_root_for(s) for s in args.set]
    sets = {}
    for s, home, root in zip(args.set, args.home, roots):
        name = Path(s).stem
        sets[name] = load_rows(s, home, root, args.model, args.cache, args.refresh)
    print(", ".join(f"{name}: {len(rows)} chapters" for name, rows in sets.items()))
    for name in ("lead", "centroid"):
        report(sets, name, lambda r, name=name: r[name])
    report(sets, f"shipped {narrate.WEIGHTS} k={K}", narrative_fn(narrate.WEIGHTS, K))
    results = []
    grid = itertools.product((0.0, 0.25, 0.5), (0.5, 1.0), (0.0, 0.5, 1.0), (1.0, 3.0), (0.5, 1.0), (0.0, 0.1, 0.25),
                             (4, 5))
    for about, people, dialogue, opening, time, drt, k in grid:
        w = narrate.Weights(about, people, dialogue, opening, time, drt)
        fn = narrative_fn(w, k)
        got = {name: per_chapter(rows, fn) for name, rows in sets.items()}
        results.append((w, k, got))

    def pooled(got, names):
        return mean([x for n in names for x in got[n]])

    results.sort(key=lambda x: -objective(pooled(x[2], sets)))
    print(f"grid: {len(results)} settings, best {args.top} by pooled ROUGE-L + key / 4")
    for w, k, got in results[: args.top]:
        parts = [f"{name}: {fmt(mean(xs))}" for name, xs in got.items()]
        if len(sets) > 1:
            parts.append(f"pooled: {fmt(pooled(got, sets))}")
        print(f"{str(tuple(w.__dict__.values())):30} k={k}  " + " | ".join(parts))
    if len(sets) > 1:
        print("leave one set out: the setting best on the other sets, scored on the set left out")
        for held in sets:
            rest = [n for n in sets if n != held]
            w, k, got = max(results, key=lambda x: objective(pooled(x[2], rest)))
            print(f"{held}: chosen on {'+'.join(rest)} {tuple(w.__dict__.values())} k={k}: {fmt(mean(got[held]))}")


if __name__ == "__main__":
    main()
