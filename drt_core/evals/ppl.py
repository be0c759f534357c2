"""`drt-reader eval ppl`: real perplexity = exp(mean NLL over every predicted token), per model and
evaluation length L (docs/design.md, Contract 2). The file is cut into non-overlapping windows of L
tokens from its start (at most --windows of them), each window streamed through a fresh state
(harness.StateFactory) with Engine.nll (no memory across windows; the first token of a window is not
predicted). FILE is a uint16 token file (.bin, e.g. data/books/val.bin) or text, tokenized with each
model's tokenizer. Every architecture streams (the fixed_retriever too); full attention up to its
capacity."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from cli_io import emit, table_head

from ..errors import DRTError
from .harness import (ModelEntry, RssMonitor, StateFactory, is_token_file, load_token_source,
                      models_from_args, tok_key, unsupported)
from .lengths import LENGTH_UNIT_NOTE, format_length, parse_length, parse_lengths


def run_ppl(entries: Sequence[ModelEntry], lengths: Sequence[int], *, file: str, windows: int = 4,
            memmap_above: int = 65536, tmp_dir: str | None = None, block_chunks: int = 16) -> dict:
    """Perplexity per model and evaluation length (see the module docstring)."""
    if windows < 1:
        raise DRTError("--windows must be >= 1")
    sources: dict[str, tuple[np.ndarray, str]] = {}
    models = []
    for entry in entries:
        key = "bin" if is_token_file(Path(file)) else tok_key(entry.tokenizer_path)
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
                    with StateFactory(entry.engine, L, memmap_above, tmp_dir) as state:
                        nll = entry.engine.nll(win.tolist(), state=state, block_chunks=block_chunks)
                    tot += float(nll.sum())
                    cnt += nll.size
                    per.append(float(np.exp(nll.mean())))
            secs = time.perf_counter() - t0
            mean = tot / cnt
            row |= {"status": "ok", "ppl": math.exp(mean), "mean_nll": mean,
                    "bits_per_token": mean / math.log(2),
                    "windows": nw, "predicted_tokens": cnt, "window_ppl": per, "seconds": secs,
                    "tokens_per_s": nw * L / secs if secs > 0 else None, "peak_rss_mb": mon.peak,
                    "tier": StateFactory(entry.engine, L, memmap_above, tmp_dir).tier}
            rows.append(row)
        models.append(entry.describe() | {"source": desc, "results": rows})
    return {"file": str(file), "lengths": list(lengths), "length_units": LENGTH_UNIT_NOTE,
            "max_windows": windows,
            "models": models}


# ----------------------------------------------------------------------------------------------
# text output and the command (its parser is drt_core.evals.cli's)


def ppl_text(res: dict) -> str:
    names = [m["name"] + f" ({m['arch']})" for m in res["models"]]
    lines = [f"perplexity = exp(mean NLL) on {res['file']}, "
             f"up to {res['max_windows']} non-overlapping windows "
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


def cmd_ppl(args) -> int:

    lengths = parse_lengths(args.lengths)
    memmap_above = parse_length(args.memmap_above)
    if not Path(args.file).is_file():
        raise DRTError(f"file not found: {args.file}")
    entries = models_from_args(args)
    res = run_ppl(entries, lengths, file=args.file, windows=args.windows, memmap_above=memmap_above,
                  tmp_dir=args.tmp_dir)
    emit(args, res, ppl_text(res))
    return 0
