"""Long work off the event loop, and its progress.

- `run_threaded` runs a job's work (ingest, resume, ask) in a worker thread; the handler is a
  generator that yields UI updates as the worker reports progress, at most a few per second.
  Cancel sets the job's `threading.Event` (`UIContext.cancel`, `cancel_job`): prefill stops after
  the current batch and keeps what it checkpointed, the document stays "partial" and Resume (or
  uploading the same file again) continues it.
- `StageBoard` draws an ingest's staged progress (reading, parsing, tokenizing, storing,
  prefilling with chunks done/total, tokens/s and ETA) as Markdown.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from typing import Any, Callable, Iterator

from ingest import pipeline
from ingest.tokenize import CHUNK_TOKENS

from .context import Job, UIContext
from .render import md_escape

UPDATE_INTERVAL_S = 0.25  # at most this many UI updates per second from a running job

_DONE = object()


def run_threaded(
    work: Callable[[Callable[[Any], None]], Any], job: Job, min_interval: float = UPDATE_INTERVAL_S
) -> Iterator[tuple[str, Any]]:
    """Run `work(emit)` in a thread; yield ("events", [emitted...]) batches (at most one per
    min_interval), then ("result", return value); re-raise the worker's exception.

    If the consumer stops early (the generator is closed: the browser went away or Gradio
    cancelled the event), the job's cancel event is set and the worker is given a minute to
    checkpoint and stop."""
    q: queue.Queue = queue.Queue()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = work(q.put)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            box["error"] = e
        finally:
            q.put(_DONE)

    t = threading.Thread(target=target, name="drt-ui-worker", daemon=True)
    t.start()
    finished = False
    try:
        last = 0.0
        done = False
        while not done:
            wait = min_interval - (time.monotonic() - last)
            if wait > 0:
                time.sleep(wait)
            batch = [q.get()]
            while True:
                try:
                    batch.append(q.get_nowait())
                except queue.Empty:
                    break
            if any(b is _DONE for b in batch):
                done = True
                batch = [b for b in batch if b is not _DONE]
            if batch:
                yield ("events", batch)
                last = time.monotonic()
        finished = True
    finally:
        if not finished:
            job.cancel.set()
        t.join(timeout=None if finished else 60.0)
    if "error" in box:
        raise box["error"]
    yield ("result", box.get("result"))


def cancel_job(ctx: UIContext, session: str, kind: str = "ingest") -> str:
    if ctx.cancel(session, kind):
        if kind == "ingest":
            return "Cancelling: prefill stops after the current batch and keeps what it did."
        return "Stopping the answer…"
    return "Nothing to cancel."


_STAGES = [
    ("hash", "reading"),
    ("parse", "parsing"),
    ("tokenize", "tokenizing"),
    ("store", "storing"),
    ("prefill", "prefilling"),
]


def _bar(frac: float, width: int = 20) -> str:
    k = max(0, min(width, round(frac * width)))
    return "▰" * k + "▱" * (width - k)


def _eta(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return ""
    s = max(0, int(round(s)))
    return f"{s} s" if s < 90 else f"{s // 60} min {s % 60:02d} s"


class StageBoard:
    """Staged progress (reading, parsing, tokenizing, storing, prefilling) as Markdown."""

    def __init__(self, name: str):
        self.name = name
        self.state: dict[str, str] = {}  # stage -> "active" | "done" | "skipped" | "failed"
        self.detail: dict[str, str] = {}
        self.current: str | None = None

    def update(self, p: pipeline.Progress) -> None:
        order = [s for s, _ in _STAGES]
        if p.stage == "done":
            for s in order:
                if self.state.get(s) == "active":
                    self.state[s] = "done"
            self.current = None
            return
        if p.stage not in order:
            return
        if p.stage == "store" and "already in the library" in p.message:
            for s in ("parse", "tokenize"):
                self.state.setdefault(s, "skipped")
                self.detail.setdefault(s, "already stored")
        i = order.index(p.stage)
        for s in order[:i]:
            if self.state.get(s) == "active":
                self.state[s] = "done"
        self.state[p.stage] = "done" if (p.total and p.done >= p.total and p.stage != "prefill") else "active"
        self.current = p.stage
        if p.stage == "prefill":
            total_chunks = math.ceil(p.total / CHUNK_TOKENS) if p.total else 0
            done_chunks = total_chunks if p.done >= p.total else p.done // CHUNK_TOKENS
            frac = p.done / p.total if p.total else 1.0
            parts = [f"{done_chunks:,} / {total_chunks:,} chunks ({100 * frac:.0f}%) {_bar(frac)}"]
            if p.tokens_per_s:
                parts.append(f"{p.tokens_per_s:,.0f} tokens/s")
            if p.eta_s is not None and p.done < p.total:
                parts.append(f"ETA {_eta(p.eta_s)}")
            if p.message and p.message not in ("prefilling",):
                parts.append(md_escape(p.message))
            self.detail["prefill"] = " · ".join(parts)
            if p.total and p.done >= p.total:
                self.state["prefill"] = "done"
        elif p.stage == "tokenize" and p.total:
            self.detail["tokenize"] = f"{100 * p.done / p.total:.0f}%"
        elif p.message:
            self.detail[p.stage] = md_escape(p.message)

    def fail(self) -> None:
        """The stage that was running stopped on an error: it is marked ✗, never left at ▶."""
        for s, st in self.state.items():
            if st == "active":
                self.state[s] = "failed"

    def markdown(self, final: str | None = None) -> str:
        icon = {"active": "▶", "done": "✓", "skipped": "–", "failed": "✗"}
        lines = [f"**{md_escape(self.name)}**", ""]
        for s, label in _STAGES:
            st = self.state.get(s)
            d = self.detail.get(s, "")
            mark = icon.get(st or "", "·")
            text = f"**{label}**" if st == "active" else label
            lines.append(f"{mark} {text}" + (f" — {d}" if d else "") + "  ")
        if final:
            lines += ["", final]
        return "\n".join(lines)
