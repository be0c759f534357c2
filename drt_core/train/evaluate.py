"""Evaluation: `drt-reader eval niah` and `eval ppl` (docs/design.md, Contract 2; docs/spec.md §6.3).

Both stream their inputs through the inference engine (drt_core.engine) exactly as the app reads a
document, so what is measured is what ships: flat memory, retrieval once per chunk, the carried
selection across blocks. Several checkpoints (the DRT and its baselines, config.arch) are evaluated
side by side on the SAME inputs.

Lengths: "4k", "64k", "1m", "16m" or plain integers, in tokens, with BINARY units: k = 1024 and
m = 1024 * 1024 (4k = 4096 tokens, 1m = 1,048,576 tokens), the convention of the paper's 4K/16K/64K
tables. Decimals are allowed ("1.5k" = 1536).

niah
----
For each length, `--samples N` seeded examples (drt_core.train.tasks.build: real haystack, needles at
depth d, the app's prompt layout from drt_core.prompts). Sample i uses depth i mod K of the K
`--depths` spread evenly over [0, 1] (K = 1: 0.5), and the seed string
"eval-niah:{seed}:{task}:{length}:{i}", so the same seed gives the same examples token for token,
for every model. Per example: the context (haystack + needles) is fed in blocks into a fresh state
(RAM tier up to --memmap-above tokens, else the memmap tier in a temporary directory, fp16 K/V, as
ingest stores documents, so RSS stays flat), then the prompt tail (pads + question) and:
  * the answer is generated greedily (Engine.generate, stop at newline) and scored with
    tasks.score_answer -> "accuracy";
  * on a fork, the reference answer is teacher-forced: "first_token_acc" is argmax at the prompt's
    last position == the answer's first token (the paper's protocol, spec §6.3), "teacher_forced_acc"
    requires every answer token to be the argmax.
Reported per model and length: those accuracies, per depth, seconds, prefill tokens/s, peak RSS of
this process during that length (sampled VmRSS), and per sample the answer and the generation.
A model that cannot run a length (full attention beyond Stream.full_attention_capacity) is
reported as "n/a: ..." for it. The fixed_retriever streams like the DRT (its chunk scores are the
frozen MiniLM's cosines of the stored chunks' texts, MemoryIndex.embeddings).

ppl
---
Real perplexity = exp(mean NLL over every predicted token), per evaluation length L: the file is cut
into non-overlapping windows of L tokens from its start (at most --windows of them), each window
streamed through a fresh state with Engine.nll (no memory across windows; the first token of a
window is not predicted). FILE is a uint16 token file (.bin, e.g. data/books/val.bin) or text,
tokenized with each model's tokenizer. Every architecture streams (the fixed_retriever too).
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import resource
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from cli_io import emit, table_head

from ..errors import DRTError

ROOT = Path(__file__).resolve().parents[1]
UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
LENGTH_UNIT_NOTE = "k = 1024, m = 1024^2 tokens"


# ----------------------------------------------------------------------------------------------
# lengths


def parse_length(s: str | int) -> int:
    """'4k' -> 4096, '1m' -> 1048576, '1.5k' -> 1536, '4000' -> 4000 (binary units, see the docstring)."""
    if isinstance(s, int):
        n = s
    else:
        t = str(s).strip().lower().replace("_", "")
        suf = t[-1] if t and t[-1] in "kmg" else ""
        num = t[: len(t) - len(suf)]
        try:
            x = float(num) * UNITS[suf]
        except ValueError:
            raise DRTError(f"bad length {s!r}: expected e.g. 4k, 64k, 1m, 16m or a number of tokens") from None
        if not math.isfinite(x) or x != int(x):
            raise DRTError(f"bad length {s!r}: not a whole number of tokens")
        n = int(x)
    if n < 1:
        raise DRTError(f"bad length {s!r}: must be at least 1 token")
    return n


def parse_lengths(s: str) -> list[int]:
    out = [parse_length(x) for x in str(s).split(",") if x.strip()]
    if not out:
        raise DRTError("no lengths given (e.g. --lengths 4k,64k,1m)")
    return out


def format_length(n: int) -> str:
    """4096 -> '4k', 1048576 -> '1m', 4000 -> '4000'."""
    for suf, u in (("m", 1024**2), ("k", 1024)):
        if n % u == 0:
            return f"{n // u}{suf}"
    return str(n)


# ----------------------------------------------------------------------------------------------
# memory


def rss_mb() -> float:
    """Current resident set size of this process (anonymous + file-backed pages), MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RssMonitor:
    """Peak RSS of this process while the block runs (VmRSS sampled every `dt` s in a thread)."""

    def __init__(self, dt: float = 0.05):
        self.dt = dt
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.wait(self.dt):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> "RssMonitor":
        self.peak = rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


# ----------------------------------------------------------------------------------------------
# models


@dataclass
class ModelEntry:
    name: str
    path: str | None
    engine: object  # drt_core.engine.Engine
    tokenizer_path: str | None  # directory with tokenizer.json (for the NIAH builders / text files)

    @property
    def arch(self) -> str:
        return self.engine.cfg.arch

    def describe(self) -> dict:
        m = self.engine.model
        return {"name": self.name, "path": self.path, "arch": self.arch, "fingerprint": self.engine.fingerprint,
                "params": int(sum(p.numel() for p in m.parameters()))}


def default_device() -> str:
    return os.environ.get("DRT_DEVICE", "cpu")


def load_models(paths: Sequence[str], device: str | None = None, use_faiss: bool = False) -> list[ModelEntry]:
    """Engine.from_pretrained for each checkpoint; names are the directory names (made unique)."""
    from ..engine import Engine

    out: list[ModelEntry] = []
    seen: dict[str, int] = {}
    for p in paths:
        eng = Engine.from_pretrained(p, device=device or default_device(), use_faiss=use_faiss)
        name = Path(p).resolve().name
        if name in seen:
            seen[name] += 1
            name = f"{name}#{seen[name]}"
        else:
            seen[name] = 1
        tok = str(Path(p)) if (Path(p) / "tokenizer.json").exists() else None
        out.append(ModelEntry(name, str(p), eng, tok))
    return out


def unsupported(entry: ModelEntry, length: int, kind: str = "niah") -> str | None:
    """Why a model cannot run `length` tokens for `kind` ("niah" or "ppl"), or None.

    Every architecture streams; full attention only up to Stream.full_attention_capacity."""
    eng = entry.engine
    if entry.arch == "full_attention" and length > eng.stream.full_attention_capacity:
        return f"n/a: exceeds capacity ({length} > {eng.stream.full_attention_capacity} positions)"
    return None


class _StateFactory:
    """A fresh stream state: RAM for short inputs, the memmap tier in a temporary directory above
    `memmap_above` tokens (for models with chunk memory). Use as a context manager."""

    def __init__(self, engine, n_tokens: int, memmap_above: int, tmp_dir: str | None):
        self.engine, self.n, self.memmap_above, self.tmp_dir = engine, n_tokens, memmap_above, tmp_dir
        self.dir: str | None = None

    @property
    def tier(self) -> str:
        if self.engine.cfg.uses_chunks and self.n > self.memmap_above:
            return f"memmap-{self.engine.memory_dtype.name}"
        return "ram"

    def __enter__(self):
        if self.tier.startswith("memmap"):
            self.dir = tempfile.mkdtemp(prefix="drt-eval-", dir=self.tmp_dir)
            return self.engine.new_state(self.dir)
        return self.engine.new_state(None)

    def __exit__(self, *exc):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _feed_blocks(engine, state, ids: np.ndarray, block_tokens: int) -> None:
    """Feed ids the way ingest does: Engine.prefill (blocks aligned to chunks; a state with a
    directory is committed every few blocks, which is where the store releases written pages)."""
    block_chunks = max(1, block_tokens // engine.cfg.chunk_tokens) if engine.cfg.uses_chunks else \
        max(1, block_tokens // 64)
    for _ in engine.prefill(state, ids, block_chunks=block_chunks):
        pass


# ----------------------------------------------------------------------------------------------
# haystacks and token files


def _is_token_file(path: Path) -> bool:
    return path.suffix.lower() == ".bin"


def load_token_source(path: str | os.PathLike, tokenizer_path: str | None) -> tuple[np.ndarray, str]:
    """(token ids, description): a uint16 .bin token file (memory-mapped) or a text file tokenized
    with the tokenizer in `tokenizer_path`."""
    p = Path(path)
    if not p.is_file():
        raise DRTError(f"file not found: {p}")
    if _is_token_file(p):
        if p.stat().st_size < 2:
            raise DRTError(f"empty token file: {p}")
        arr = np.memmap(p, dtype=np.uint16, mode="r")
        return arr, f"{p} ({arr.size:,} tokens, uint16)"
    from .data import read_text
    from ..tokenizer import encode

    text = read_text(p)
    if not text.strip():
        raise DRTError(f"no text in {p}")
    ids = np.asarray(encode(text, tokenizer_path), dtype=np.int64)
    return ids, f"{p} ({ids.size:,} tokens, text tokenized)"


def default_haystack(home: str | None = None) -> Path | None:
    """The validation split of the book corpus: data/books/val.bin (repository, then DRT_HOME)."""
    cands = [ROOT / "data" / "books" / "val.bin"]
    if home:
        cands.append(Path(home) / "data" / "books" / "val.bin")
    for c in cands:
        if c.is_file():
            return c
    return None


def _tok_key(tokenizer_path: str | None) -> str:
    if tokenizer_path is None:
        return "default"
    p = Path(tokenizer_path) / "tokenizer.json"
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else str(tokenizer_path)


# ----------------------------------------------------------------------------------------------
# NIAH


def niah_depths(k: int) -> list[float]:
    if k < 1:
        raise DRTError("--depths must be >= 1")
    return [0.5] if k == 1 else [round(i / (k - 1), 6) for i in range(k)]


def niah_example(task: str, haystack, length: int, i: int, seed: int, depths: Sequence[float], phrasings: str,
                 tokenizer_path: str | None):
    """Sample i of a length: deterministic in (task, length, i, seed, depths, phrasings, haystack)."""
    from .tasks import build

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
    with _StateFactory(eng, len(ids), memmap_above, tmp_dir) as state:
        _feed_blocks(eng, state, context, block_tokens)
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
    from .tasks import score_answer

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
    from .tasks import TASK_NAMES, TooShort

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
                "tier": _StateFactory(entry.engine, L, memmap_above, tmp_dir).tier,
                "samples": per,
            }
            rows.append(row)
        models.append(entry.describe() | {"results": rows})
    return {"task": task, "lengths": list(lengths), "length_units": LENGTH_UNIT_NOTE, "samples": samples,
            "depths": dl, "phrasings": phrasings, "seed": seed, "models": models}


# ----------------------------------------------------------------------------------------------
# perplexity


def run_ppl(entries: Sequence[ModelEntry], lengths: Sequence[int], *, file: str, windows: int = 4,
            memmap_above: int = 65536, tmp_dir: str | None = None, block_chunks: int = 16) -> dict:
    """Perplexity per model and evaluation length (see the module docstring)."""
    if windows < 1:
        raise DRTError("--windows must be >= 1")
    sources: dict[str, tuple[np.ndarray, str]] = {}
    models = []
    for entry in entries:
        key = "bin" if _is_token_file(Path(file)) else _tok_key(entry.tokenizer_path)
        if key not in sources:
            sources[key] = load_token_source(file, entry.tokenizer_path)
        ids, desc = sources[key]
        rows = []
        for L in lengths:
            row: dict = {"length": L, "label": format_length(L)}
            why = unsupported(entry, L, "ppl")
            if why:
                rows.append(row | {"status": why, "ppl": why})
                continue
            nw = min(windows, len(ids) // L)
            if nw == 0:
                why = f"n/a: the file has {len(ids):,} tokens, fewer than {L:,}"
                rows.append(row | {"status": why, "ppl": why})
                continue
            tot, cnt, per = 0.0, 0, []
            t0 = time.perf_counter()
            with RssMonitor() as mon:
                for w in range(nw):
                    win = np.asarray(ids[w * L: (w + 1) * L], dtype=np.int64)
                    with _StateFactory(entry.engine, L, memmap_above, tmp_dir) as state:
                        nll = entry.engine.nll(win.tolist(), state=state, block_chunks=block_chunks)
                    tot += float(nll.sum())
                    cnt += nll.size
                    per.append(float(np.exp(nll.mean())))
            secs = time.perf_counter() - t0
            mean = tot / cnt
            row |= {"status": "ok", "ppl": math.exp(mean), "mean_nll": mean, "bits_per_token": mean / math.log(2),
                    "windows": nw, "predicted_tokens": cnt, "window_ppl": per, "seconds": secs,
                    "tokens_per_s": nw * L / secs if secs > 0 else None, "peak_rss_mb": mon.peak,
                    "tier": _StateFactory(entry.engine, L, memmap_above, tmp_dir).tier}
            rows.append(row)
        models.append(entry.describe() | {"source": desc, "results": rows})
    return {"file": str(file), "lengths": list(lengths), "length_units": LENGTH_UNIT_NOTE, "max_windows": windows,
            "models": models}


# ----------------------------------------------------------------------------------------------
# text output


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


def ppl_text(res: dict) -> str:
    names = [m["name"] + f" ({m['arch']})" for m in res["models"]]
    lines = [f"perplexity = exp(mean NLL) on {res['file']}, up to {res['max_windows']} non-overlapping windows "
             f"per length; {res['length_units']}", ""]
    lines += table_head(["length", *names])
    for i, L in enumerate(res["lengths"]):
        cells = []
        for m in res["models"]:
            r = m["results"][i]
            cells.append(r["status"] if r["status"] != "ok" else
                         f"{r['ppl']:.3f} ({r['windows']} win, {r['tokens_per_s'] or 0:,.0f} tok/s)")
        lines.append(f"| {format_length(L)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# command line (the parsers are drt_core.train.cli's, which call cmd_niah and cmd_ppl)


def _entries(args) -> list[ModelEntry]:
    paths = [x.strip() for x in args.models.split(",") if x.strip()] if args.models else [args.model]
    return load_models(paths, device=args.device, use_faiss=args.faiss)


def cmd_niah(args) -> int:

    lengths = parse_lengths(args.lengths)
    memmap_above = parse_length(args.memmap_above)
    entries = _entries(args)
    hay_path = Path(args.haystack) if args.haystack else default_haystack(getattr(args, "home", None))
    if hay_path is None:
        raise DRTError("no haystack: data/books/val.bin not found; pass --haystack FILE (.bin tokens or text)")
    # one haystack per tokenizer (a .bin file is already tokens)
    hay, desc = load_token_source(hay_path, entries[0].tokenizer_path)
    if not _is_token_file(hay_path) and len({_tok_key(e.tokenizer_path) for e in entries}) > 1:
        raise DRTError("models with different tokenizers: pass a .bin haystack tokenized for them, or one model")
    res = run_niah(entries, lengths, task=args.task, haystack=hay, samples=args.samples, depths=args.depths,
                   phrasings=args.phrasings, seed=args.seed, memmap_above=memmap_above, tmp_dir=args.tmp_dir,
                   max_new_tokens=args.max_new_tokens)
    res["haystack"] = desc
    emit(args, res, niah_text(res))
    return 0


def cmd_ppl(args) -> int:

    lengths = parse_lengths(args.lengths)
    memmap_above = parse_length(args.memmap_above)
    if not Path(args.file).is_file():
        raise DRTError(f"file not found: {args.file}")
    entries = _entries(args)
    res = run_ppl(entries, lengths, file=args.file, windows=args.windows, memmap_above=memmap_above,
                  tmp_dir=args.tmp_dir)
    emit(args, res, ppl_text(res))
    return 0
