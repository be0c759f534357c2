"""`drt-reader eval niah`: needle-in-a-haystack accuracy per model, length and depth (docs/design.md,
Contract 2; docs/spec.md §6.3).

For each length, `--samples N` seeded examples (drt_core.train.tasks.needles.build: real haystack,
needles at depth d, the app's prompt layout from drt_core.prompts). Sample i uses depth i mod K of
the K `--depths` spread evenly over [0, 1] (K = 1: 0.5), and the seed string
"eval-niah:{seed}:{task}:{length}:{i}", so the same seed gives the same examples token for token,
for every model. Per example: the context (haystack + needles) is fed in blocks into a fresh state
(harness.StateFactory: RAM up to --memmap-above tokens, else the memmap tier), then the prompt tail
(pads + question) and:
  * the answer is generated greedily (Engine.generate, stop at newline) and scored with
    needles.score_answer -> "accuracy";
  * on a fork, the reference answer is teacher-forced: "first_token_acc" is argmax at the prompt's
    last position == the answer's first token (the paper's protocol, spec §6.3), "teacher_forced_acc"
    requires every answer token to be the argmax.
Reported per model and length: those accuracies, per depth, seconds, prefill tokens/s, peak RSS of
this process during that length (sampled VmRSS), and per sample the answer and the generation.
A model that cannot run a length (full attention beyond Stream.full_attention_capacity) is
reported as "n/a: ..." for it. The fixed_retriever streams like the DRT (its chunk scores are the
frozen MiniLM's cosines of the stored chunks' texts, MemoryIndex.embeddings).
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from cli_io import emit, table_head

from ..errors import DRTError
from .harness import (ModelEntry, RssMonitor, StateFactory, default_haystack, feed_blocks, is_token_file,
                      load_token_source, models_from_args, tok_key, unsupported)
from .lengths import LENGTH_UNIT_NOTE, format_length, parse_length, parse_lengths


def niah_depths(k: int) -> list[float]:
    if k < 1:
        raise DRTError("--depths must be >= 1")
    return [0.5] if k == 1 else [round(i / (k - 1), 6) for i in range(k)]


def niah_example(task: str, haystack, length: int, i: int, seed: int, depths: Sequence[float], phrasings: str,
                 tokenizer_path: str | None):
    """Sample i of a length: deterministic in (task, length, i, seed, depths, phrasings, haystack)."""
    from ..train.tasks.needles import build

    rng = random.Random(f"eval-niah:{seed}:{task}:{length}:{i}")
    depth = depths[i % len(depths)]
    return build(task, haystack, length, rng, depth=depth, phrasings=phrasings, tokenizer_path=tokenizer_path)


def _niah_one(entry: ModelEntry, ex, memmap_above: int, tmp_dir: str | None, max_new_tokens: int | None,
              block_tokens: int) -> dict:
    import torch

    eng = entry.engine
    n_ctx = ex.n_context
    pe = ex.prompt_ends[0]
    a0, a1 = ex.answer_spans[0]
    ids = np.asarray(ex.ids)
    context, tail, answer = ids[:n_ctx], ids[n_ctx: pe + 1], ids[a0:a1]
    t0 = time.perf_counter()
    with StateFactory(eng, len(ids), memmap_above, tmp_dir) as state:
        feed_blocks(eng, state, context, block_tokens)
        t_prefill = time.perf_counter() - t0
        # teacher forcing on a fork: logits at the prompt's last token and along the reference answer
        fork = state.fork()
        lg = eng.feed(fork, tail.tolist() + answer.tolist(), want_logits=True)
        pred = lg[len(tail) - 1: len(tail) - 1 + len(answer)].argmax(-1)
        tgt = torch.as_tensor(answer, dtype=torch.long, device=pred.device)
        first_ok = bool(pred[0] == tgt[0])
        tf_ok = bool((pred == tgt).all())
        del fork, lg
        # greedy generation, the app's way (stops at a newline)
        budget = max_new_tokens or (len(answer) + 8)
        answer_text = ""
        for ev in eng.generate(state, prompt_ids=tail.tolist(), max_new_tokens=budget, temperature=0.0):
            if ev.done:
                answer_text = ev.answer or ""
    from ..train.tasks.needles import score_answer

    return {
        "correct": bool(score_answer(answer_text, ex.answer)),
        "first_token": first_ok,
        "teacher_forced": tf_ok,
        "generated": answer_text,
        "answer": ex.answer,
        "prefill_tokens": int(n_ctx),
        "prefill_seconds": t_prefill,
        "seconds": time.perf_counter() - t0,
    }


def run_niah(entries: Sequence[ModelEntry], lengths: Sequence[int], *, task: str = "single", haystack=None,
             samples: int = 10, depths: int = 5, phrasings: str = "train", seed: int = 0,
             memmap_above: int = 65536, tmp_dir: str | None = None, max_new_tokens: int | None = None,
             block_tokens: int = 16 * 63, progress=None) -> dict:
    """NIAH accuracy per model, length and depth (see the module docstring)."""
    from ..train.tasks.common import TooShort
    from ..train.tasks.phrasings import TASK_NAMES

    if task not in TASK_NAMES:
        raise DRTError(f"unknown task {task!r}; expected one of {', '.join(TASK_NAMES)}")
    if samples < 1:
        raise DRTError("--samples must be >= 1")
    if phrasings not in ("train", "heldout", "all"):
        raise DRTError("--phrasings must be train, heldout or all")
    dl = niah_depths(depths)
    models = []
    for entry in entries:
        rows = []
        for L in lengths:
            row: dict = {"length": L, "label": format_length(L)}
            why = unsupported(entry, L)
            if why:
                rows.append(row | {"status": why})
                continue
            per: list[dict] = []
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            with RssMonitor() as mon:
                try:
                    for i in range(samples):
                        ex = niah_example(task, haystack, L, i, seed, dl, phrasings, entry.tokenizer_path)
                        ex.labels = ex.weights = None  # training-only arrays: 12 bytes/token less held
                        depth = ex.meta["depth"]
                        r = _niah_one(entry, ex, memmap_above, tmp_dir, max_new_tokens, block_tokens)
                        del ex
                        per.append({"i": i, "depth": depth} | r)
                        if progress:
                            progress(entry, L, i, per[-1])
                except TooShort as e:
                    rows.append(row | {"status": f"n/a: {e}"})
                    continue
            secs = time.perf_counter() - t0
            n = len(per)
            by_depth = []
            for d in dl:
                sub = [p for p in per if p["depth"] == d]
                if sub:
                    by_depth.append({"depth": d, "n": len(sub),
                                     "accuracy": sum(p["correct"] for p in sub) / len(sub),
                                     "first_token_acc": sum(p["first_token"] for p in sub) / len(sub)})
            pre_tok = sum(p["prefill_tokens"] for p in per)
            pre_s = sum(p["prefill_seconds"] for p in per)
            row |= {
                "status": "ok",
                "n": n,
                "accuracy": sum(p["correct"] for p in per) / n,
                "first_token_acc": sum(p["first_token"] for p in per) / n,
                "teacher_forced_acc": sum(p["teacher_forced"] for p in per) / n,
                "per_depth": by_depth,
                "seconds": secs,
                "cpu_seconds": time.process_time() - cpu0,
                "prefill_tokens_per_s": pre_tok / pre_s if pre_s > 0 else None,
                "tokens_per_s": sum(L for _ in per) / secs if secs > 0 else None,
                "peak_rss_mb": mon.peak,
                "tier": StateFactory(entry.engine, L, memmap_above, tmp_dir).tier,
                "samples": per,
            }
            rows.append(row)
        models.append(entry.describe() | {"results": rows})
    return {"task": task, "lengths": list(lengths), "length_units": LENGTH_UNIT_NOTE, "samples": samples,
            "depths": dl, "phrasings": phrasings, "seed": seed, "models": models}


# ----------------------------------------------------------------------------------------------
# text output and the command (its parser is drt_core.evals.cli's)


def _pct(x) -> str:
    return f"{100 * x:.1f}%"


def niah_text(res: dict) -> str:
    names = [m["name"] + f" ({m['arch']})" for m in res["models"]]
    head = (f"NIAH {res['task']} — {res.get('haystack', '')}; {res['samples']} samples/length over depths "
            f"{res['depths']}; phrasings {res['phrasings']}; seed {res['seed']}; {res['length_units']}")
    lines = [head, "accuracy (generated) / first answer token (teacher-forced)", ""]
    lines += table_head(["length", *names])
    for i, L in enumerate(res["lengths"]):
        cells = []
        for m in res["models"]:
            r = m["results"][i]
            if r["status"] != "ok":
                cells.append(r["status"])
            else:
                tps = r["prefill_tokens_per_s"]
                cells.append(f"{_pct(r['accuracy'])} / {_pct(r['first_token_acc'])} "
                             f"({r['seconds']:.0f} s, {tps or 0:,.0f} tok/s, {r['peak_rss_mb']:,.0f} MB)")
        lines.append(f"| {format_length(L)} | " + " | ".join(cells) + " |")
    lines.append("")
    for m in res["models"]:
        for r in m["results"]:
            if r["status"] == "ok":
                pd = ", ".join(f"{d['depth']:g}: {_pct(d['accuracy'])}" for d in r["per_depth"])
                lines.append(f"{m['name']} {r['label']} per depth: {pd}")
    return "\n".join(lines)


def cmd_niah(args) -> int:

    lengths = parse_lengths(args.lengths)
    memmap_above = parse_length(args.memmap_above)
    entries = models_from_args(args)
    hay_path = Path(args.haystack) if args.haystack else default_haystack(getattr(args, "home", None))
    if hay_path is None:
        raise DRTError("no haystack: data/books/val.bin not found; "
                       "pass --haystack FILE (.bin tokens or text)")
    # one haystack per tokenizer (a .bin file is already tokens)
    hay, desc = load_token_source(hay_path, entries[0].tokenizer_path)
    if not is_token_file(hay_path) and len({tok_key(e.tokenizer_path) for e in entries}) > 1:
        raise DRTError("models with different tokenizers: "
                       "pass a .bin haystack tokenized for them, or one model")
    res = run_niah(entries, lengths, task=args.task, haystack=hay, samples=args.samples, depths=args.depths,
                   phrasings=args.phrasings, seed=args.seed, memmap_above=memmap_above, tmp_dir=args.tmp_dir,
                   max_new_tokens=args.max_new_tokens)
    res["haystack"] = desc
    emit(args, res, niah_text(res))
    return 0
