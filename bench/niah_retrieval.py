"""Does the model RETRIEVE the needle? `python -m bench.niah_retrieval --model DIR --lengths 4k,16k`.

For single-needle NIAH examples (drt_core.train.tasks.needles, the app's prompt layout), streams the haystack
and the question through the engine and looks at the selection that serves the answer chunk (made by
the landmark just before it, after the question was read):
    hit@k        the chunk holding the answer value is among the top-k selected (weight > 0), group 0
    readable@k   the copy head can read the whole value from the selection: from its chunk, or from
                 the chunk before it when the value lies in the copy_span slots it reads on into
    chance       k / number of eligible chunks (what a random retriever would get)
    first_tok    teacher-forced accuracy of the first answer token
    answer       greedy answer scored with needles.score_answer
    sem hit@k    with --semantic: the same question served by the frozen MiniLM retriever of the
                 fixed_retriever baseline instead (cosine of the serving row's chunk text against every
                 earlier chunk's, top-k; drt_core.fixed_retriever), on the same example
This separates the two skills the paper's NIAH accuracy needs: finding the chunk, and copying from it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


from drt_core.evals.lengths import parse_length as parse_len  # noqa: E402  (one length syntax: 4k, 1m)


def semantic_hit(prompt: list[int], row: int, target: int, cfg) -> bool:
    """Is chunk `target` in the top-k of the frozen MiniLM retriever for retrieval row `row`?

    Row r is chunk r's text; its candidates are chunks 0..r-1 (as `fixed_retriever.batch_scores`),
    ranked by `bench.lemma_retrieval.semantic_selection`, the semantic retriever of the case study."""
    from bench.lemma_retrieval import semantic_selection

    if row < 1:
        return False
    sel = semantic_selection(prompt[: (row + 1) * cfg.chunk_tokens], cfg, cfg.chunk_topk)  # [row+1, k]
    return target in sel[row].tolist()


def landmark_scores(eng, prompt: list[int], row: int, parts: bool = False):
    """Landmark `row`'s scores [row] of its eligible chunks (< row), from model.landmarks; the keys
    are rounded to the engine's memory dtype first, so the ranking is the engine's. `parts`: return
    (total, dense) instead, the dense part being the landmark keys' alone (total - dense: lexical)."""
    import torch

    with torch.no_grad():  # the lexical weights are parameters: no graph for a measurement
        ids = torch.tensor(prompt[: (row + 1) * eng.cfg.chunk_tokens], device=eng.device)
        keys, queries, lower = eng.model.landmarks(ids, lower=True)
        # as the store holds them
        keys = torch.from_numpy(keys[:row].float().cpu().numpy().astype(eng.memory_dtype)).float()
        s = dense = keys @ queries[row].float().cpu() / keys.shape[-1] ** 0.5  # retrieval_scores' scale
        if eng.model.lexical is not None:  # config lexical: the scores add the tokens shared with each chunk
            toks = eng.model.chunk_token_ids(ids)[0].cpu()
            gq, gk = eng.model.word_gates(lower.cpu())  # config lexical_gates (None, None without)
            s = s + eng.model.lexical.scores(0, toks[row: row + 1][None], toks[:row][None], torch.tensor([row]),
                                             torch.arange(row), q_gates=None if gq is None else gq[row: row + 1][None],
                                             k_gates=None if gk is None else gk[:row][None])[0, 0].float()
    return (s, dense) if parts else s


def peak_rss_gb() -> float:
    """This process's peak resident memory so far, in GB (Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)


def score_rank(scores, chunk: int) -> int:
    """1 + the number of chunks scored above `chunk` (1 = the best)."""
    return int((scores > scores[chunk]).sum()) + 1


def score_trace(record: list[dict], row: int, chunk: int, k: int) -> dict:
    """Landmark `row`'s group-0 scores (as Engine.feed records them) seen from chunk `chunk`: its rank,
    its score and the top-k scores with their chunks (`record` may hold other landmarks: ignored)."""
    for r in record:
        if r["group"] == 0 and r["lmk_chunk"] == row:
            sc = np.array([-np.inf if v is None else v for v in r["scores"]], dtype=np.float64)
            top = np.argsort(-sc, kind="stable")[:k]
            return {"rank": score_rank(sc, chunk), "score": round(float(sc[chunk]), 3),
                    "top_chunks": top.tolist(), "top_scores": [round(float(sc[t]), 3) for t in top]}
    return {}


def readable(selected: set[int], v0: int, v1: int, S1: int, span: int, lead: int = 0) -> bool:
    """Can the copy head read the whole value [v0, v1) from these retrieved chunks? It reads each
    retrieved chunk s, the first `span` slots of the chunk after it (config copy_span) and the last
    `lead` slots of the chunk before it (config copy_lead): tokens [s*S1 - lead, (s+1)*S1 + span)."""
    return any(s * S1 - lead <= v0 and v1 <= (s + 1) * S1 + span for s in selected)


def prefix_share(answer: str, expected: str) -> float:
    """How much of the expected answer the generated one gets right before its first mistake:
    len(common prefix) / len(expected), after stripping spaces (partial credit beside exact match)."""
    a, e = answer.strip(), str(expected).strip()
    n = 0
    while n < min(len(a), len(e)) and a[n] == e[n]:
        n += 1
    return n / max(1, len(e))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench.niah_retrieval", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="checkpoints/drt-tiny")
    p.add_argument("--lengths", default="4k,16k")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--haystack", default="data/books/val.bin")
    p.add_argument("--task", default="single", choices=["single", "multikey"])
    p.add_argument("--phrasings", default="train", choices=["train", "heldout"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--semantic", action="store_true",
                   help="also score the frozen MiniLM retriever (fixed_retriever baseline) on each example")
    p.add_argument("--state-dir", default=None,
                   help="keep each sample's chunk memory on disk here (fp16 memmaps, removed after the "
                        "sample) instead of in RAM: needed at 16M tokens, whose fp32 memory is ~26 GB")
    p.add_argument("--retrieval-only", action="store_true",
                   help="score retrieval alone (hit@k and the needle chunk's rank) from the landmarks "
                        "(model.landmarks: lower layers and chunk encoder, no upper layers, no answer): "
                        "the same selection as the engine's, several times faster at 1M-16M tokens")
    p.add_argument("--full-groups", action="store_true",
                   help="run the retrieval groups at every haystack position instead of deferring them to "
                        "the last positions (Engine.feed upper=False: the same answer, ~2x slower prefill)")
    p.add_argument("--select-all", action="store_true",
                   help="select at every haystack landmark; by default (deferred groups only) the haystack "
                        "before its last chunks is fed with Engine.feed select=False: nothing reads those "
                        "selections, and at 16M scoring every past chunk at every landmark is most of the time")
    p.add_argument("--only", default=None,
                   help="comma-separated sample indices to run (of --samples: same depths and seeds), e.g. 0,2,3")
    p.add_argument("--split", action="store_true",
                   help="write every needle across a chunk boundary at its value (the words in the chunk "
                        "before; needles.build split_frac=1), the case that defeated retrieval at 1M")
    p.add_argument("--json", action="store_true")
    return p


def _sample(eng, a, hay, L: int, i: int, t0: float) -> dict:
    """One needle at length L: its retrieval (and, unless --retrieval-only, its answer)."""
    from drt_core.train.tasks.needles import build, score_answer, value_span

    S1 = eng.cfg.chunk_size - 1
    depth = (i + 0.5) / a.samples
    ex = build(a.task, hay, L, a.seed * 100003 + i, depth=depth, phrasings=a.phrasings,
               tokenizer_path=a.model, split_frac=1.0 if a.split else 0.0)
    prompt = ex.prompt_ids(0).tolist()
    chunk = ex.prompt_ends[0] // S1  # the answer chunk, served by row chunk - 1
    v0, v1 = value_span(ex, 0, a.model)
    value_chunk = v0 // S1  # the chunk holding the answer's first token (retrieval_targets' target)
    straddle = value_chunk != (v1 - 1) // S1  # the value runs on into the next chunk
    eligible = chunk - 1
    row = {"depth": round(depth, 3), "chance": min(1.0, eng.cfg.chunk_topk / max(1, eligible)),
           "straddle": straddle, "expected": ex.answer}
    span = eng.cfg.copy_span
    if a.retrieval_only:
        sc = landmark_scores(eng, prompt, chunk - 1)
        rank = score_rank(sc, value_chunk)
        top = set(sc.topk(min(eng.cfg.chunk_topk, len(sc))).indices.tolist())
        reach = readable(top, v0, v1, S1, span, eng.cfg.copy_lead)
        print(f"{L} sample {i}: depth {depth:.3f} rank {rank} readable {reach} ({time.time() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        return {**row, "hit": rank <= eng.cfg.chunk_topk, "rank": rank, "readable": reach}
    sdir = None
    if a.state_dir:
        sdir = Path(tempfile.mkdtemp(prefix=f"niah-{L}-", dir=a.state_dir))
    st = eng.new_state(sdir)
    # ends with the landmark that serves the answer chunk; its scores are recorded (the trace of
    # a miss: the needle's rank and its score against the winners'), no other landmark's
    cut = max(0, len(prompt) - 1 - S1)
    # deferred groups: caught up by the next feed, exactly; the haystack before the catch-up span
    # (and a margin) selects nothing, which nothing reads (feed select=False)
    lazy = 0 if a.full_groups or a.select_all or not eng.stream.can_defer else \
        max(0, cut - eng.stream.catch_up_span - 4 * S1)
    if lazy:
        eng.feed(st, prompt[:lazy], upper=False, select=False)
    eng.feed(st, prompt[lazy:cut], upper=a.full_groups)
    rec: list[dict] = []
    eng.feed(st, prompt[cut:-1], record=rec)
    trace = score_trace(rec, chunk - 1, value_chunk, eng.cfg.chunk_topk)
    idx, w = st.carry.sel_idx[0].tolist(), st.carry.sel_w[0].tolist()
    selected = {c for c, x in zip(idx, w) if x > 0}
    hit = value_chunk in selected  # the chunk holding the answer's first token
    reach = readable(selected, v0, v1, S1, span, eng.cfg.copy_lead)
    sem_hit = semantic_hit(prompt, chunk - 1, value_chunk, eng.cfg) if a.semantic else None
    a0, a1 = ex.answer_spans[0]
    gen = list(eng.generate(st, prompt_ids=prompt[-1:], max_new_tokens=(a1 - a0) + 4))
    first_ok = gen[0].token_id == int(ex.ids[a0])
    answer = gen[-1].answer or ""
    if sdir is not None:
        st = None
        shutil.rmtree(sdir, ignore_errors=True)
    print(f"{L} sample {i}: depth {depth:.3f} hit {hit} rank {trace.get('rank')} score {trace.get('score')}"
          f" (top-k {trace.get('top_scores')}) answer {answer!r} ({time.time() - t0:.0f} s)",
          file=sys.stderr, flush=True)
    return {**row, **trace, "hit": hit, "readable": reach, "sem_hit": sem_hit, "first_tok": first_ok,
            "answer_ok": score_answer(answer, ex.answer), "prefix": prefix_share(answer, ex.answer),
            "answer": answer}


def _summary(rows: list[dict], a, t0: float) -> dict:
    """The figures of one length."""
    n = len(rows)
    answered = not a.retrieval_only

    def mean(key):
        return sum(r[key] for r in rows) / n if answered else None

    return {
        "samples": n,
        "hit@k": sum(r["hit"] for r in rows) / n,
        "readable@k": sum(r["readable"] for r in rows) / n,
        "chance@k": sum(r["chance"] for r in rows) / n,
        "semantic_hit@k": mean("sem_hit") if a.semantic and answered else None,
        "first_token_acc": mean("first_tok"),
        "answer_acc": mean("answer_ok"),
        "prefix_share": mean("prefix"),
        "median_rank": sorted(r["rank"] for r in rows)[n // 2] if all("rank" in r for r in rows) else None,
        "straddle": sum(r["straddle"] for r in rows),
        "straddle_answered": sum(r["straddle"] and r["answer_ok"] for r in rows) if answered else None,
        "seconds": round(time.time() - t0, 1),
        "peak_rss_gb": peak_rss_gb(),  # the process's peak so far (this length and those before it)
        "rows": rows,
    }


def _report(results: dict, a, eng) -> None:
    """The figures as JSON or a table."""
    if a.json:
        print(json.dumps({"model": a.model, "task": a.task, "phrasings": a.phrasings, "split": a.split,
                          "retrieval_only": a.retrieval_only, "results": results}))
    else:
        print(f"model {a.model}  task {a.task}  phrasings {a.phrasings}  top-k {eng.cfg.chunk_topk}"
              + ("  needles split at the value" if a.split else ""))
        print(f"{'length':>8} {'n':>4} {'hit@k':>7} {'read@k':>7} {'sem hit':>8} {'chance':>7} {'1st tok':>8}"
              f" {'answer':>7} {'prefix':>7} {'across':>7} {'s':>7}")

        def f(x):
            return "-" if x is None else f"{x:.2f}"

        for L, r in results.items():
            across = "-" if r["straddle_answered"] is None else f"{r['straddle_answered']}/{r['straddle']}"
            print(f"{L:>8} {r['samples']:>4} {r['hit@k']:>7.2f} {r['readable@k']:>7.2f}"
                  f" {f(r['semantic_hit@k']):>8} {r['chance@k']:>7.2f}"
                  f" {f(r['first_token_acc']):>8} {f(r['answer_acc']):>7} {f(r['prefix_share']):>7}"
                  f" {across:>7} {r['seconds']:>7}  peak {r['peak_rss_gb']} GB")
            if r["median_rank"] is not None:
                print(f"{'':>8} ranks of the needle's chunk: {[r_['rank'] for r_ in r['rows']]}")
        print("across: answered / samples whose value is written across a chunk boundary")


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.state_dir:  # made up front, once (a missing one used to fail at the first sample, after the haystack loaded)
        Path(a.state_dir).mkdir(parents=True, exist_ok=True)

    from drt_core.engine import Engine

    eng = Engine.from_pretrained(a.model)
    hay = np.fromfile(a.haystack, dtype=np.uint16).astype(np.int64)
    only = None if a.only is None else {int(x) for x in a.only.split(",")}
    results = {}
    for L in [parse_len(x) for x in a.lengths.split(",")]:
        t0 = time.time()
        rows = [_sample(eng, a, hay, L, i, t0) for i in range(a.samples) if only is None or i in only]
        results[L] = _summary(rows, a, t0)
    _report(results, a, eng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
