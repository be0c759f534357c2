"""Lemma retrieval case study: `python -m bench.lemma_retrieval --model checkpoints/drt-tiny`.

In the paper's spirit (its arXiv-math case studies): when a Stacks Project chunk cites a result
(`\\ref{lemma-foo}`), does the model's causal retrieval fetch the chunk where that result is stated
(`\\label{lemma-foo}`)? For every held-out chapter (raw LaTeX, the data split's test chapters by
default) the chapter is tokenised with the shipped tokenizer and run through the model once; then,
for every `\\ref{X}` whose `\\label{X}` sits in an EARLIER chunk of the same chapter:

    query row   the chunk c holding the \\ref: its landmark has read the citation, and the
                selection it makes (top-k of the relevance scores over chunks e < c) serves c + 1
    target      the chunk holding the \\label
    hit@k       target among the k chunks selected (DRT: the model's own top-k of group 0)

against two references on the same (query, target) pairs:
    semantic    top-k of cosine similarity between frozen MiniLM embeddings of chunk c's text and of
                each earlier chunk's text (the RPT-style retriever of the fixed_retriever baseline)
    chance      k / (number of eligible chunks c), the expected hit rate of a random retriever

Pairs are reported all together and for targets beyond the self-attention window (c - target >
window chunks), where only retrieval can bring the statement back. Only labels of statements
(lemma, proposition, theorem, definition, remark, example, ...) count; section labels are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

def chapter_pairs(text: str, offsets: list[tuple[int, int]], chunk_tokens: int = 63):
    """(query chunk, target chunk, label) for every \\ref{X} after its \\label{X} (earlier chunk)."""
    from drt_core.train.tasks.cite import citation_pairs

    return citation_pairs(text, [s for s, _ in offsets], chunk_tokens)


def drt_selection(model, ids: list[int]) -> torch.Tensor:
    """Group 0's top-k selection [C, k] of every landmark row over the whole chapter (one pass of
    the layers group 0's scores depend on: model.landmarks, the forward's scores without the upper
    layers)."""
    from drt_core.drt import retrieval_scores, select_topk

    keys, queries = model.landmarks(torch.tensor(ids))
    c = torch.arange(keys.shape[0])
    idx, w = select_topk(retrieval_scores(queries[None], keys[None], c, c), model.config.chunk_topk, gumbel=False)
    idx = idx[0].clone()
    idx[w[0] <= 0] = -1  # unfilled slots (rows with fewer than k eligible chunks)
    return idx


def semantic_selection(ids: list[int], cfg, k: int) -> torch.Tensor:
    """MiniLM cosine top-k over earlier chunks for every chunk [C, k] (-1 = empty slot)."""
    from drt_core.fixed_retriever import embed_chunks

    e = embed_chunks(torch.tensor([ids]), cfg)[0]  # [C, 384]
    C = e.shape[0]
    s = e @ e.T
    s = s.masked_fill(~(torch.arange(C)[None, :] < torch.arange(C)[:, None]), float("-inf"))
    top = s.topk(min(k, C), dim=-1)
    return top.indices.masked_fill(~torch.isfinite(top.values), -1)


def run(model_dirs: list[str], chapters: list[Path], window_chunks: int | None = None) -> dict:
    """Hit rates of each model in `model_dirs` (DRT checkpoints with the same chunking and k), of
    the semantic retriever and of chance, on the same citation pairs."""
    from drt_core.modeling import DRTForCausalLM
    from drt_core.tokenizer import encode_with_offsets

    models = {d: DRTForCausalLM.from_pretrained(d).eval() for d in model_dirs}
    cfg = next(iter(models.values())).config
    k = cfg.chunk_topk
    W = window_chunks if window_chunks is not None else cfg.window // cfg.chunk_size
    rows = []
    for path in chapters:
        text = path.read_text(encoding="utf-8", errors="replace")
        ids, offsets = encode_with_offsets(text)
        pairs = chapter_pairs(text, offsets, cfg.chunk_tokens)
        if not pairs:
            continue
        t0 = time.time()
        sels = {d: drt_selection(m, ids) for d, m in models.items()}
        sem = semantic_selection(ids, cfg, k)
        for c, t, name in pairs:
            rows.append({
                "chapter": path.stem, "label": name, "query_chunk": c, "target_chunk": t,
                "distance": c - t, "eligible": c,
                **{f"drt:{d}": bool((sel[c] == t).any()) for d, sel in sels.items()},
                "semantic": bool((sem[c] == t).any()),
                "chance": min(1.0, k / c),
            })
        print(f"{path.stem}: {len(ids)} tokens, {len(pairs)} citation pairs, {time.time() - t0:.1f}s",
              file=sys.stderr, flush=True)

    def summary(sel):
        n = len(sel)
        if not n:
            return {"pairs": 0}
        return {"pairs": n, **{f"hit:{d}": sum(r[f"drt:{d}"] for r in sel) / n for d in model_dirs},
                "semantic_hit": sum(r["semantic"] for r in sel) / n,
                "chance": sum(r["chance"] for r in sel) / n}

    far = [r for r in rows if r["distance"] > W]
    return {"models": model_dirs, "k": k, "window_chunks": W, "all": summary(rows),
            "beyond_window": summary(far),
            "by_chapter": {ch: summary([r for r in rows if r["chapter"] == ch])
                           for ch in sorted({r["chapter"] for r in rows})},
            "pairs": rows}


def default_chapters(split: str = "test", corpora: str = "../shared/corpora",
                     splits: str = "data/splits.json") -> list[Path]:
    names = json.loads(Path(splits).read_text())[split]["stacks"]
    return [Path(corpora) / n for n in names]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.lemma_retrieval", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="checkpoints/drt-tiny", help="DRT checkpoints, comma-separated")
    p.add_argument("--chapters", nargs="*", default=None,
                   help="LaTeX files (default: the test split's Stacks chapters)")
    p.add_argument("--split", default="test", choices=["val", "test"])
    p.add_argument("--corpora", default="../shared/corpora")
    p.add_argument("--json", action="store_true", help="print the whole result (pairs included) as JSON")
    a = p.parse_args(argv)
    chapters = [Path(c) for c in a.chapters] if a.chapters else default_chapters(a.split, a.corpora)
    models = [m for m in a.models.split(",") if m]
    res = run(models, chapters)
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"k = {res['k']}, window = {res['window_chunks']} chunks")
    print("| pairs | n | " + " | ".join(f"DRT `{m}` hit@k" for m in models) + " | semantic (MiniLM) hit@k | chance |")
    print("|---|---|" + "---|" * len(models) + "---|---|")
    for name, s in [("all", res["all"]), ("beyond the window", res["beyond_window"])] + \
            [(f"`{ch}`", s) for ch, s in res["by_chapter"].items()]:
        if s["pairs"]:
            hits = " | ".join(f"{s[f'hit:{m}']:.3f}" for m in models)
            print(f"| {name} | {s['pairs']} | {hits} | {s['semantic_hit']:.3f} | {s['chance']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
