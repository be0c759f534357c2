"""The functions behind the web UI: plain Python, callable and testable without a browser.

`ui.blocks` only lays out components and wires events to these functions. Everything that touches
the library or the model goes through the same code as the command line (`ingest.pipeline`,
`qa.ask`, `qa.summary`, `store.library`): one code path for the app, the CLI and the UI.

- Long work (ingest, resume, ask) runs in a worker thread; the handler is a generator that yields
  UI updates as the worker reports progress (`_run_threaded`). Cancel sets the pipeline's
  `threading.Event`: prefill stops after the current batch and keeps what it checkpointed, the
  document stays "partial" and Resume (or uploading the same file again) continues it.
- Jobs are keyed by (session, kind) so the Cancel/Stop buttons of one browser tab stop that tab's
  job only. `arm()` registers a job before it enters the queue, so Cancel works while it waits.
- Errors meant for people (`user_error = True` in ingest/store/drt_core) become `gr.Error` with an
  HTML-escaped one-line message; anything else is logged with its traceback and shown as a short
  generic message.
"""

from __future__ import annotations

import functools
import html
import inspect
import logging
import math
import os
import queue
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Iterator

import gradio as gr

from ingest import pipeline
from qa.ask import abstain_reason, quote_origin, snippet
from ingest.boilerplate import matter_label
from ingest.errors import Cancelled, IngestError, NotPrefilled, TooLarge
from ingest.tokenize import CHUNK_TOKENS
from store.library import Library

from . import plots

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE = "50mb"
# what the upload widget offers; the pipeline decides by the content, never by the name
ACCEPTED_SUFFIXES = [".pdf", ".epub", ".txt", ".text", ".md", ".markdown", ".tex", ".ltx"]
MAX_NEW_TOKENS = 512
UPDATE_INTERVAL_S = 0.25  # at most this many UI updates per second from a running job

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


class UIError(IngestError):
    """A problem with what the user did in the UI (no file, no document picked, ...)."""


def parse_size(text: str | int) -> int:
    """'50mb' -> bytes (1024-based, like Gradio's FileSize); an int is returned as is."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise UIError(f"bad size {text!r}: use a number with b, kb, mb or gb (e.g. 50mb)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise UIError(f"bad size {text!r}: must be positive")
    return n


def human_size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return str(n)  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------


def error_text(e: BaseException) -> str:
    """The one-line message a person sees in place of a failed action (no traceback, no badge):
    a project error's own message, else "internal error (...)" (logged with its traceback)."""
    if isinstance(e, gr.Error):
        return " ".join(str(e.message).split())
    if getattr(e, "user_error", False):
        return " ".join(str(e).split())
    logger.exception("internal error in the UI", exc_info=e)
    return f"internal error ({type(e).__name__}); the server log has the details"


def in_place(message: str) -> str:
    """A failed action's message as Markdown, for the status line beside the control."""
    return f"**✗** {md_escape(message)}"


def to_gr_error(e: BaseException) -> gr.Error:
    """A project error -> gr.Error with its one-line message (escaped: gr.Error renders HTML)."""
    if isinstance(e, gr.Error):
        return e
    if getattr(e, "user_error", False):
        return gr.Error(html.escape(" ".join(str(e).split())), print_exception=False)
    logger.exception("internal error in the UI", exc_info=e)
    return gr.Error(
        html.escape(f"internal error ({type(e).__name__}); the server log has the details"),
        print_exception=False,
    )


def user_facing(fn: Callable) -> Callable:
    """Decorator: raise project errors as gr.Error (functions and generator functions)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(*a: Any, **k: Any) -> Iterator:
            try:
                yield from fn(*a, **k)
            except Exception as e:
                raise to_gr_error(e) from e

        return gen

    @functools.wraps(fn)
    def call(*a: Any, **k: Any) -> Any:
        try:
            return fn(*a, **k)
        except Exception as e:
            raise to_gr_error(e) from e

    return call


# ---------------------------------------------------------------------------------------------
# context: the library, the engine, the running jobs
# ---------------------------------------------------------------------------------------------


@dataclass
class Job:
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False


class UIContext:
    """What every handler needs: the library, the (lazily loaded) engine and the running jobs.

    One per served app. `home` and `model` are app.py's `--home` / `--model`."""

    def __init__(
        self,
        home: str | Path,
        model: str | Path,
        *,
        max_file_bytes: int | str = DEFAULT_MAX_FILE_SIZE,
        upload_root: str | Path | None = None,
    ):
        self.home = Path(home).expanduser()
        self.model = str(model)
        self.max_file_bytes = parse_size(max_file_bytes)
        root = upload_root or os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio"
        self.upload_root = Path(root).expanduser()
        self._lock = threading.RLock()
        self._engine_lock = threading.Lock()
        self._library: Library | None = None
        self._jobs: dict[tuple[str, str], Job] = {}
        self._layouts: dict[str, tuple[list[int], dict[int, str]]] = {}
        self.prefilling: set[str] = set()  # documents a job is prefilling now (listed as such)
        self.ingested: dict[str, str] = {}  # upload path -> document id, once an upload is stored
        self.last_added: dict[str, str] = {}  # session -> the document its last upload stored

    # -- resources -------------------------------------------------------------------------

    @property
    def library(self) -> Library:
        with self._lock:
            if self._library is None:
                self._library = Library(self.home)
            return self._library

    def engine(self) -> Any:
        """The engine for `model` (loaded once; pipeline.load_engine caches it per process)."""
        with self._engine_lock:
            return pipeline.load_engine(self.model)

    def fingerprint(self) -> str | None:
        """The model fingerprint, or None when the model cannot be loaded."""
        try:
            return str(self.engine().fingerprint)
        except Exception as e:  # the library must stay browsable without a model
            logger.warning("cannot load the model %s: %s", self.model, e)
            return None

    def close(self) -> None:
        with self._lock:
            if self._library is not None:
                self._library.close()
                self._library = None

    def layout(self, doc_id: str) -> tuple[list[int], dict[int, str]]:
        """(first page of every chunk, {page number: printed label}) of a document (cached)."""
        with self._lock:
            hit = self._layouts.get(doc_id)
        if hit is not None:
            return hit
        lib = self.library
        chunk_pages = [int(c["page_first"]) for c in lib.chunks(doc_id)]
        labels = {int(p["number"]): str(p["label"] or p["number"]) for p in lib.pages(doc_id)}
        with self._lock:
            if len(self._layouts) > 16:
                self._layouts.clear()
            self._layouts[doc_id] = (chunk_pages, labels)
        return chunk_pages, labels

    # -- jobs ------------------------------------------------------------------------------

    def arm(self, session: str, kind: str) -> Job:
        """Register a job before it is queued, so Cancel can reach it while it waits."""
        with self._lock:
            job = self._jobs.get((session, kind))
            if job is None or job.started:
                job = Job()
                if (session, kind) not in self._jobs:
                    self._jobs[(session, kind)] = job
            return job

    def begin(self, session: str, kind: str) -> Job:
        """The job a handler runs under: the armed one if any (it may be cancelled already)."""
        with self._lock:
            job = self._jobs.get((session, kind))
            if job is None or job.started:
                job = Job()
                self._jobs[(session, kind)] = job
            job.started = True
            return job

    def end(self, session: str, kind: str, job: Job) -> None:
        with self._lock:
            if self._jobs.get((session, kind)) is job:
                del self._jobs[(session, kind)]

    def cancel(self, session: str, kind: str) -> bool:
        """Ask the session's job of this kind to stop; False when there is none."""
        with self._lock:
            job = self._jobs.get((session, kind))
        if job is None:
            return False
        job.cancel.set()
        return True

    def running(self, kind: str | None = None) -> int:
        with self._lock:
            return sum(1 for (s, k), j in self._jobs.items() if j.started and (kind is None or k == kind))


_DONE = object()


def _run_threaded(
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


# ---------------------------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>$-])")


def md_escape(text: str) -> str:
    """Text shown verbatim inside Markdown: HTML-escaped, Markdown (and $math$) characters quoted."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(str(text), quote=False))


def pages_text(first: int, last: int, labels: dict[int, str] | None = None) -> str:
    a, b = plots.page_label(first, labels), plots.page_label(last, labels)
    return f"p. {a}" if first == last else f"pp. {a}–{b}"


def _quote(text: str, limit: int | None = None) -> str:
    """A chunk's text as a quote block, cut at word boundaries (qa.ask.snippet)."""
    return "> " + md_escape(snippet(text, limit))


def _quote_marked(text: str, sentence: str | None) -> str:
    """A quote block with `sentence` in bold: the reader's short answer, or the sentence that answers."""
    t = " ".join(str(text).split())
    i = t.find(sentence) if sentence else -1
    if i < 0:
        return _quote(t)
    return ("> " + md_escape(t[:i]) + "**" + md_escape(sentence) + "**" + md_escape(t[i + len(sentence):])).rstrip()


def matter_text(e: dict, sep: str = " ·") -> str:
    """" · *licence page*" (contents page, index page; after `sep`) for a passage on such a page, else ""."""
    label = matter_label(e)
    return f"{sep} *{label}*" if label else ""


def effect_text(e: dict) -> str:
    """" · causal effect +1.234" for an evidence row that has one (ask's rows), else ""."""
    if "causal_effect" not in e:
        return ""
    v = e["causal_effect"]
    return " · causal effect n/a" if v is None else f" · causal effect {float(v):+.3f}"


EFFECT_NOTE = ("causal effect: how much less likely (in nats) the model finds the answer shown above (its short "
               "answer, else the quoted sentence) when that chunk alone is hidden from retrieval; + means the "
               "chunk supports that answer, − that the answer is likelier without it, 0 that the model never used it")


def evidence_md(evidence: list[dict], labels: dict[int, str] | None = None, *, title: str = "Evidence") -> str:
    """The evidence list (heaviest first): chunk, pages, fusion weight, causal effect (ask), the passage."""
    if not evidence:
        return f"**{title}:** none (no document chunk was retrieved)."
    note = f" ({EFFECT_NOTE})" if any("causal_effect" in e for e in evidence) else ""
    out = [f"**{title}** — the document chunks the model retrieved, by fusion weight (normalised over the answer){note}:"]
    for e in evidence:
        pages = e.get("pages") or [0]
        out.append(
            f"**{pages_text(pages[0], pages[-1], labels)}**{matter_text(e)} · chunk {int(e['chunk'])} · "
            f"weight {float(e['weight']):.3f}{effect_text(e)}\n\n{_quote(e['text'], 600)}"
        )
    return "\n\n".join(out)


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


# ---------------------------------------------------------------------------------------------
# library
# ---------------------------------------------------------------------------------------------


def _state_of(doc: dict, fp: str | None) -> tuple[str, int, int]:
    """(state, tokens done, tokens total) of a document for the model fingerprint fp."""
    rows = doc.get("prefill") or []
    row = next((r for r in rows if r["model_fp"] == fp), None) if fp else (rows[-1] if rows else None)
    if row is None:
        return "not prefilled", 0, int(doc["n_tokens"])
    status = "ready" if row["status"] == "done" else ("partial" if row["n_tokens_done"] else "pending")
    return status, int(row["n_tokens_done"]), int(row["n_tokens_total"])


def list_documents(ctx: UIContext) -> list[dict]:
    """Every document: doc_id, title, pages, tokens, chunks, kind, state (for this model)."""
    fp = ctx.fingerprint()
    out = []
    for d in ctx.library.documents():
        state, done, total = _state_of(d, fp)
        if state != "ready" and d["id"] in ctx.prefilling:
            state = "prefilling"
        out.append(
            {
                "doc_id": d["id"],
                "title": d["title"],
                "pages": int(d["n_pages"]),
                "tokens": int(d["n_tokens"]),
                "chunks": int(d["n_chunks"]),
                "kind": d["kind"],
                "source_name": d["source_name"],
                "state": state,
                "tokens_done": done,
                "tokens_total": total,
                "created_at": d["created_at"],
            }
        )
    return out


def _state_text(d: dict) -> str:
    if d["state"] == "ready":
        return "ready"
    if d["state"] == "prefilling":
        pct = 100 * d["tokens_done"] / d["tokens_total"] if d["tokens_total"] else 0
        return f"prefilling now: {d['tokens_done']:,} / {d['tokens_total']:,} tokens ({pct:.0f}%) at the last checkpoint"
    if d["state"] in ("partial", "pending"):
        pct = 100 * d["tokens_done"] / d["tokens_total"] if d["tokens_total"] else 0
        return f"partial: {d['tokens_done']:,} / {d['tokens_total']:,} tokens ({pct:.0f}%), resumable"
    return "not prefilled"


DOC_HEADERS = ["Title", "Pages", "Tokens", "Chunks", "State", "ID"]


EMPTY_LIBRARY = ("**The library is empty.** Drop a PDF, EPUB, TXT, Markdown or TeX file on the box above: "
                 "it is read once (parsed, tokenized, prefilled) and then reopens instantly.")


def library_note(docs: list[dict]) -> str:
    """The line under the documents table: what to do when it is empty, else what is in it."""
    if not docs:
        return EMPTY_LIBRARY
    busy = [d for d in docs if d["state"] != "ready"]
    note = f"{len(docs)} document(s)"
    if busy:
        note += ", " + ", ".join(f"{md_escape(d['title'])}: {_state_text(d)}" for d in busy[:3])
    return note + "."


def newest_ready(docs: list[dict]) -> str | None:
    """The most recently added ready document (the default choice in the Ask, Summary, Outline and
    Map tabs), or None."""
    ready = [d for d in docs if d["state"] == "ready"]
    return max(ready, key=lambda d: d["created_at"])["doc_id"] if ready else None


def documents_table(ctx: UIContext, docs: list[dict] | None = None) -> list[list]:
    docs = list_documents(ctx) if docs is None else docs
    return [[d["title"], d["pages"], d["tokens"], d["chunks"], _state_text(d), d["doc_id"][:12]] for d in docs]


def doc_choices(ctx: UIContext, *, ready_only: bool = False, docs: list[dict] | None = None) -> list[tuple[str, str]]:
    """Dropdown choices (label, doc_id); ready_only: only fully prefilled documents."""
    docs = list_documents(ctx) if docs is None else docs
    out = []
    for d in docs:
        if ready_only and d["state"] != "ready":
            continue
        suffix = "" if d["state"] == "ready" else f" [{d['state']}]"
        out.append((f"{d['title']} — {d['pages']} pp, {d['tokens']:,} tokens{suffix}", d["doc_id"]))
    return out


def check_upload(ctx: UIContext, path: str | Path | None) -> Path:
    """The uploaded file, after the checks the pipeline does not do (presence, size)."""
    if not path:
        raise UIError("choose a file first (PDF, EPUB, TXT, Markdown or TeX)")
    p = Path(path)
    if not p.is_file():
        raise UIError("the uploaded file is gone (uploads are cleaned up after an hour); upload it again")
    size = p.stat().st_size
    if size > ctx.max_file_bytes:
        raise TooLarge(
            f"{p.name} is {human_size(size)}; the limit of this server is {human_size(ctx.max_file_bytes)}"
        )
    return p


def discard_upload(ctx: UIContext, path: str | Path) -> bool:
    """Delete an uploaded file once it is stored, but only inside Gradio's upload cache."""
    try:
        p = Path(path).resolve()
        root = ctx.upload_root.resolve()
        if not p.is_relative_to(root) or p == root:
            return False
        p.unlink(missing_ok=True)
        parent = p.parent
        if parent != root and parent.is_relative_to(root) and not any(parent.iterdir()):
            parent.rmdir()
        return True
    except OSError as e:
        logger.warning("could not remove the upload %s: %s", path, e)
        return False


@dataclass
class IngestUpdate:
    status: str  # Markdown
    finished: bool = False
    doc_id: str | None = None
    result: dict | None = None  # the final result (Contract 2 ingest object + status)


def _board_updates(work: Callable, job: Job, board: StageBoard) -> Generator[IngestUpdate, None, Any]:
    """Run an ingest `work(emit)` in a thread, feeding its stage events to `board` and yielding the
    board as it changes; return the work's result. A user error is shown on the board ("Failed: ...")
    and re-raised; Cancelled is re-raised untouched for the caller to word."""
    result = None
    try:
        for kind, payload in _run_threaded(work, job):
            if kind == "events":
                for ev in payload:
                    board.update(ev)
                yield IngestUpdate(board.markdown())
            else:
                result = payload
    except Cancelled:
        raise
    except Exception as e:
        board.fail()
        yield IngestUpdate(board.markdown(f"**Failed:** {md_escape(error_text(e))}"), finished=True)
        raise
    return result


# what _ingest_job returns when Cancel came before the job started
_NOT_STARTED = object()


def _ingest_job(
    ctx: UIContext, session: str, board: StageBoard, starting: str, work: Callable
) -> Generator[IngestUpdate, None, Any]:
    """The job protocol ingest and resume share: register the session's "ingest" job, stop at once
    (board: "Cancelled before it started.", return _NOT_STARTED) if Cancel came first, else show
    `starting` and run `work(emit, cancel)` through _board_updates; the job ends however it stops."""
    job = ctx.begin(session, "ingest")
    try:
        if job.cancel.is_set():
            yield IngestUpdate(board.markdown("Cancelled before it started."), finished=True)
            return _NOT_STARTED
        yield IngestUpdate(board.markdown(starting))
        return (yield from _board_updates(lambda emit: work(emit, job.cancel), job, board))
    finally:
        ctx.end(session, "ingest", job)


def ingest_upload(
    ctx: UIContext,
    path: str | Path | None,
    *,
    title: str | None = None,
    password: str | None = None,
    session: str = "",
) -> Iterator[IngestUpdate]:
    """Ingest an uploaded file (parse, tokenize, store, prefill), yielding staged progress.

    The same file again (same sha256) resumes its prefill. Raises project errors (IngestError,
    StoreError...) after a last update that shows where it stopped."""
    done_id = ctx.ingested.get(str(path)) if path and not Path(path).exists() else None
    if not path and ctx.last_added.get(session) and ctx.library.has_document(ctx.last_added[session]):
        # "Add to library" after the upload was already added (the upload field is empty again): say so,
        # rather than "choose a file first" over the "Ready" it had shown
        doc = ctx.library.document(ctx.last_added[session])
        yield IngestUpdate(f"**Already added:** {md_escape(doc['title'])}. Ask about it in the **Ask** tab, or "
                           "choose another file to add it.", finished=True, doc_id=doc["id"])
        return
    if done_id is not None and ctx.library.has_document(done_id):  # the upload event already added (and removed) it
        doc = ctx.library.document(done_id)
        yield IngestUpdate(f"**Already added:** {md_escape(doc['title'])}. Ask about it in the **Ask** tab.",
                           finished=True, doc_id=done_id)
        return
    p = check_upload(ctx, path)
    board = StageBoard(p.name)

    def work(emit: Callable, cancel: threading.Event) -> pipeline.IngestResult:
        doc_id = None

        def progress(ev: pipeline.Progress) -> None:
            nonlocal doc_id
            if ev.stage == "prefill" and doc_id is None:  # stored: list it as being prefilled
                doc_id = pipeline.sha256_file(p)
                ctx.prefilling.add(doc_id)
            emit(ev)

        try:
            return pipeline.ingest(
                p,
                library=ctx.library,
                engine=ctx.engine,  # a factory: the model loads once the file has parsed
                title=(title or "").strip() or None,
                password=password or None,
                progress=progress,
                cancel=cancel,
            )
        finally:
            ctx.prefilling.discard(doc_id)

    try:
        result = yield from _ingest_job(ctx, session, board, "Starting…", work)
    except Cancelled:
        yield IngestUpdate(
            board.markdown("**Cancelled** before anything was stored; upload the file again to start over."),
            finished=True,
        )
        return
    if result is _NOT_STARTED:
        return
    ctx.ingested[str(path)] = result.doc_id
    ctx.last_added[session] = result.doc_id
    while len(ctx.ingested) > 64:  # only the last uploads can be pressed again
        ctx.ingested.pop(next(iter(ctx.ingested)))
    discard_upload(ctx, p)  # stored: the token ids are in the library, resume does not need the file
    with ctx._lock:
        ctx._layouts.pop(result.doc_id, None)
    obj = {**result.to_json(), "status": result.status, "tokens_prefilled": result.tokens_prefilled,
           "warnings": result.warnings}  # fmt: skip
    warn = "".join(f"\n\n⚠ {md_escape(w)}" for w in result.warnings)
    if result.status == "done":
        again = "" if result.created else " (it was already in the library)"
        final = (
            f"**Ready:** {md_escape(result.title)} — {result.pages} pages, {result.tokens:,} tokens, "
            f"{result.chunks:,} chunks, {result.seconds:.1f} s{again}. Ask about it in the **Ask** tab."
        )
    else:
        final = (
            f"**Stopped:** {result.tokens_prefilled:,} of {result.tokens:,} tokens prefilled and kept. "
            "Press **Resume** (or upload the same file again) to continue."
        )
    yield IngestUpdate(board.markdown(final + warn), finished=True, doc_id=result.doc_id, result=obj)


def resume_prefill(ctx: UIContext, doc_id: str | None, *, session: str = "") -> Iterator[IngestUpdate]:
    """Continue the prefill of a stored document from its last checkpoint (no file needed)."""
    if not doc_id:
        raise UIError("pick a document in the list first")
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    doc = lib.document(doc_id)
    board = StageBoard(doc["title"])
    for s in ("hash", "parse", "tokenize", "store"):
        board.state[s] = "skipped"
    board.detail["store"] = "stored earlier"

    def work(emit: Callable, cancel: threading.Event) -> dict:
        ctx.prefilling.add(doc_id)
        try:
            return pipeline.prefill_document(lib, ctx.engine(), doc_id, progress=emit, cancel=cancel)
        finally:
            ctx.prefilling.discard(doc_id)

    row = yield from _ingest_job(ctx, session, board, "Loading the model…", work)
    if row is _NOT_STARTED:
        return
    row = row or {}
    done, total = int(row.get("n_tokens_done", 0)), int(row.get("n_tokens_total", 0))
    if row.get("status") == "done":
        final = f"**Ready:** {md_escape(doc['title'])} — {total:,} tokens prefilled."
    else:
        final = f"**Stopped:** {done:,} of {total:,} tokens prefilled and kept; press **Resume** to continue."
    result = {"doc_id": doc_id, "status": "done" if row.get("status") == "done" else "partial",
              "tokens_prefilled": done, "tokens": total}  # fmt: skip
    yield IngestUpdate(board.markdown(final), finished=True, doc_id=doc_id, result=result)


def cancel_job(ctx: UIContext, session: str, kind: str = "ingest") -> str:
    if ctx.cancel(session, kind):
        if kind == "ingest":
            return "Cancelling: prefill stops after the current batch and keeps what it did."
        return "Stopping the answer…"
    return "Nothing to cancel."


def delete_document(ctx: UIContext, doc_id: str | None) -> str:
    """Remove a document, its chunks, traces, answers and prefilled states."""
    if not doc_id:
        return "Nothing deleted."
    doc_id, title = pipeline.remove_document(ctx.library, doc_id)
    with ctx._lock:
        ctx._layouts.pop(doc_id, None)
    return f"Deleted **{md_escape(title)}** ({doc_id[:12]})."


def passage_md(ctx: UIContext, doc_id: str | None, chunk: int | float | None, heading: str = "Chunk") -> str:
    """One document chunk with its pages, as Markdown."""
    if not doc_id or chunk is None:
        return "Pick a document and a chunk."
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    c = int(chunk)
    rows = lib.chunks(doc_id, [c])
    if not rows:
        n = lib.document(doc_id)["n_chunks"]
        return f"No chunk {c} in this document (it has chunks 0–{n - 1})."
    r = rows[0]
    _, labels = ctx.layout(doc_id)
    return f"**{heading} {c}** · {pages_text(r['page_first'], r['page_last'], labels)}\n\n{_quote(r['text'])}"


def passage(ctx: UIContext, doc_id: str, chunk: int) -> dict:
    """API: {"doc_id", "chunk", "pages", "text"} of one chunk."""
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    rows = lib.chunks(doc_id, [int(chunk)])
    if not rows:
        raise UIError(f"no chunk {int(chunk)} in document {doc_id[:12]}")
    r = rows[0]
    return {"doc_id": doc_id, "chunk": int(chunk), "pages": list(range(r["page_first"], r["page_last"] + 1)),
            "text": r["text"]}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# ask
# ---------------------------------------------------------------------------------------------


def _ready(ctx: UIContext, doc_id: str | None) -> str:
    if not doc_id:
        if not ctx.library.documents():
            raise UIError("the library is empty: add a document in the Library tab first")
        raise UIError("pick a document first (only fully prefilled documents are listed)")
    return ctx.library.resolve(doc_id)


def _not_prefilled_message(ctx: UIContext, doc_id: str) -> str:
    title = ctx.library.document(doc_id)["title"]
    return f"“{title}” is not fully prefilled yet: open the Library tab, pick it and press Resume."


ALL_DOCS = "*"  # the Ask tab's "All documents" choice


def before_page_of(value: Any) -> int | None:
    """The Ask tab's "before page" field: None when empty or 0."""
    if value in (None, "") or int(value) <= 0:
        return None
    return int(value)


def ask_stream(
    ctx: UIContext, doc_id: str | None, question: str, *, max_new_tokens: int = 64, session: str = "",
    before_page: int | None = None,
) -> Iterator[dict]:
    """Answer a question about a document, streaming: {"answer": text so far, "done": False} ...
    then {"answer", "evidence", "trace", "done": True, "stopped", "doc_id", "question"}.
    `before_page`: spoiler-safe reading (qa.ask.BeforePage)."""
    doc_id = _ready(ctx, doc_id)
    question = " ".join(str(question or "").split())
    if not question:
        raise UIError("type a question first")
    n_new = max(1, min(int(max_new_tokens or 64), MAX_NEW_TOKENS))
    from qa.ask import ask

    job = ctx.begin(session, "ask")
    text = ""
    result: dict | None = None
    try:
        if job.cancel.is_set():
            yield {"answer": "", "evidence": [], "trace": {"chunks": []}, "done": True, "stopped": True,
                   "doc_id": doc_id, "question": question}  # fmt: skip
            return
        engine = ctx.engine()

        def work(emit: Callable) -> dict:
            return ask(ctx.library, engine, doc_id, question, max_new_tokens=n_new, on_delta=emit, cancel=job.cancel,
                       before_page=before_page, on_answer=lambda r: emit(("answer", r)))

        try:
            for kind, payload in _run_threaded(work, job, min_interval=0.1):
                if kind == "events":
                    text += "".join(p for p in payload if isinstance(p, str))
                    early = [p[1] for p in payload if isinstance(p, tuple)]
                    yield {"answer": text, "done": False, **({"early": early[-1]} if early else {})}
                else:
                    result = payload
        except NotPrefilled as e:
            raise UIError(_not_prefilled_message(ctx, doc_id)) from e
        except Cancelled:
            yield {"answer": text.strip(), "evidence": [], "trace": {"chunks": []}, "done": True,
                   "stopped": True, "doc_id": doc_id, "question": question}  # fmt: skip
            return
    finally:
        ctx.end(session, "ask", job)
    assert result is not None
    yield {**result, "done": True, "stopped": False, "doc_id": doc_id, "question": question}


def answer_heatmap(ctx: UIContext, record: dict | None) -> str:
    """The retrieval heatmap of one answer record (an ask result with its doc_id)."""
    if not record:
        return plots.note("Ask a question: the retrieval heatmap of the answer appears here.")
    chunk_pages, labels = ctx.layout(record["doc_id"])
    return plots.retrieval_heatmap_svg(record.get("trace"), chunk_pages, labels)


def chat_user(ctx: UIContext, doc_id: str | None, question: str, history: list | None, session: str = ""):
    """First step of a chat turn (instant, unqueued): echo the question, arm the job so Stop
    works while it waits. Returns (textbox value, history, pending question); a user error (no
    document, no question) is said in the chat and leaves the pending question empty."""
    q = " ".join(str(question or "").split())
    try:
        if doc_id != ALL_DOCS:
            _ready(ctx, doc_id)
        elif not list_documents(ctx):
            raise UIError("the library is empty: add a document in the Library tab first")
        if not q:
            raise UIError("type a question first")
    except Exception as e:  # said in the chat, in place: the question stays in the box, nothing is queued
        note = {"role": "assistant", "content": in_place(error_text(e))}
        return question, list(history or []) + [note], ""
    ctx.arm(session, "ask")
    return "", list(history or []) + [{"role": "user", "content": q}], q


def _answer_choices(answers: list[dict]) -> list[tuple[str, int]]:
    out = []
    for i, a in enumerate(answers):
        q = a.get("question", "")
        out.append((f"#{i + 1}: {q[:60]}{'…' if len(q) > 60 else ''}", i))
    return out


def _evidence_note(evidence: list[dict], labels: dict[int, str]) -> dict:
    """A collapsed chat message under an answer, listing what it retrieved."""
    if not evidence:
        body, pages = "No document chunk was retrieved.", ""
    else:
        lines = [
            f"- {pages_text(e['pages'][0], e['pages'][-1], labels)}, chunk {e['chunk']}, weight "
            f"{e['weight']:.3f}{effect_text(e).replace(' · ', ', ')}: {md_escape(snippet(e['text'], 140))}"
            for e in evidence
        ]
        body = "\n".join(lines)
        ps = sorted({p for e in evidence for p in e["pages"]})
        pages = f" ({pages_text(ps[0], ps[-1], labels)})"
    return {"role": "assistant", "content": body,
            "metadata": {"title": f"Evidence: {len(evidence)} passages{pages}", "status": "done"}}  # fmt: skip


def chat_bot(
    ctx: UIContext,
    doc_id: str | None,
    question: str | None,
    history: list | None,
    answers: list | None,
    max_new_tokens: int = 64,
    session: str = "",
    before_page: int | None = None,
) -> Iterator[tuple]:
    """Second step of a chat turn: stream the answer into the chat, then show its heatmap and
    evidence. Yields (history, answers, answer picker update, heatmap HTML, evidence Markdown,
    result JSON). `doc_id` ALL_DOCS asks every ready document (chat_all)."""
    history = list(history or [])
    answers = list(answers or [])
    skip = gr.skip()
    if not question:
        yield history, answers, skip, skip, skip, skip
        return
    if doc_id == ALL_DOCS:
        yield from chat_all(ctx, question, history, answers, max_new_tokens, before_page)
        return
    final: dict | None = None
    for ev in ask_stream(ctx, doc_id, question, max_new_tokens=max_new_tokens, session=session,
                         before_page=before_page):
        if ev["done"]:
            final = ev
        elif "early" in ev:  # the answer, before its causal effects: show it (and let it be picked) now
            early = {**ev["early"], "doc_id": ctx.library.resolve(doc_id), "question": question}
            _, labels = ctx.layout(early["doc_id"])
            note = "\n\n*Measuring each passage's causal effect on this answer…*"
            shown_now = answers + [{k: early.get(k) for k in ("doc_id", "question", "answer", "evidence", "trace",
                                                               "quote", "abstained", "passages", "short_answer")}]
            yield (history + [{"role": "assistant", "content": answer_md(early, labels) + note}], shown_now,
                   gr.update(choices=_answer_choices(shown_now), value=len(shown_now) - 1),
                   answer_heatmap(ctx, early), evidence_md(early["evidence"], labels) + note, skip)
        else:  # the answer is a quote chosen at the end: show progress, not the raw generation
            yield history + [{"role": "assistant", "content": "*reading the passages the model retrieved…* ▌"}], answers, skip, skip, skip, skip
    assert final is not None
    _, labels = ctx.layout(final["doc_id"])
    text = final["answer"].strip()
    if final.get("stopped"):
        shown = (md_escape(text) + " " if text else "") + "*(stopped)*"
        yield history + [{"role": "assistant", "content": shown}], answers, skip, skip, skip, skip
        return
    shown = answer_md(final, labels)
    history = history + [{"role": "assistant", "content": shown}, _evidence_note(final["evidence"], labels)]
    record = {k: final.get(k) for k in ("doc_id", "question", "answer", "evidence", "trace", "quote", "abstained",
                                        "passages", "short_answer")}
    answers.append(record)
    picker = gr.update(choices=_answer_choices(answers), value=len(answers) - 1)
    result = {k: final[k] for k in ("answer", "evidence", "trace")}
    yield history, answers, picker, answer_heatmap(ctx, record), answer_evidence_md(ctx, record, labels), result


def chat_all(ctx: UIContext, question: str, history: list, answers: list, max_new_tokens: int,
             before_page: int | None) -> Iterator[tuple]:
    """"All documents": every ready document's model retrieves on its own (qa.ask.ask_all); one
    chat message with the answers grouped by document, the surest first; each answer is also added
    to the answer picker (its heatmap and evidence)."""
    from qa.ask import ask_all

    skip = gr.skip()
    yield history + [{"role": "assistant", "content": "*asking every document…* ▌"}], answers, skip, skip, skip, skip
    out = ask_all(ctx.library, ctx.engine(), question, max_new_tokens=max(1, min(int(max_new_tokens), MAX_NEW_TOKENS)),
                  before_page=before_page)
    parts = []
    for d in out["documents"]:
        _, labels = ctx.layout(d["doc_id"])
        parts.append(f"**{md_escape(d['title'])}**\n\n{answer_md(d, labels)}")
        answers.append({"doc_id": d["doc_id"], "question": question, **{k: d.get(k) for k in
                        ("answer", "evidence", "trace", "quote", "abstained", "passages", "short_answer")}})
    history = history + [{"role": "assistant", "content": "\n\n---\n\n".join(parts)}]
    picker = gr.update(choices=_answer_choices(answers), value=len(answers) - len(out["documents"]))
    first = answers[len(answers) - len(out["documents"])]
    _, labels = ctx.layout(first["doc_id"])
    yield (history, answers, picker, answer_heatmap(ctx, first), answer_evidence_md(ctx, first, labels),
           {"question": out["question"], "documents": [{k: d[k] for k in ("doc_id", "title", "answer", "evidence")}
                                                       for d in out["documents"]]})


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def answer_md(result: dict, labels: dict[int, str] | None = None) -> str:
    """The chat's answer: a quote from the document with its page, or an abstention; the model's
    short answer under the quote when it copied one verbatim from it."""
    text = str(result.get("answer") or "").strip()
    passages = result.get("passages") or []
    if result.get("abstained"):
        if passages:  # the cross-encoder's closest passages, said to be what they are
            return (f"**Not found in this document.** {md_escape(abstain_reason(result))}\n\n"
                    "The closest passages (closest, not an answer):\n\n" + _passages_md(passages, labels))
        return (f"**Not found in this document.** {md_escape(abstain_reason(result))} The passages the "
                "model scored highest are listed under Evidence.")
    q = result.get("quote")
    if q and passages:  # evidence first: the best passage, its answer sentence in bold; then the next two
        pages = q.get("pages") or [0]
        origin = quote_origin(q)
        where = f" ({md_escape(origin)})" if origin else ""
        out = (f"{_quote_marked(q['text'], q.get('short') or q.get('sentence'))}\n\n— "
               f"{pages_text(pages[0], pages[-1], labels)}{matter_text(q, ',')}, chunk {int(q['chunk'])}{where}")
        if result.get("short_answer"):
            out = f"**{md_escape(result['short_answer'])}**\n\n" + out
        rest = [p for p in passages if p["chunk"] != q["chunk"]]
        if rest:
            out += "\n\nAlso relevant:\n\n" + _passages_md(rest, labels)
        return out
    if q:
        pages = q.get("pages") or [0]
        short = q.get("short")  # the trained reader's short answer, in bold inside the quote
        if q.get("introduces"):
            where = f"the passage that introduces {md_escape(q['introduces'])}, read first"
        elif q.get("retrieved", True):
            where = "the passage is shown first under Evidence"
        else:
            where = (f"the model scored this chunk {_ordinal(int(q.get('rank') or 0))}, after the chunks it retrieved; "
                     "the passage is shown first under Evidence")
        out = (f"{_quote_marked(q['text'], short or q.get('sentence'))}\n\n— {pages_text(pages[0], pages[-1], labels)}"
               f"{matter_text(q, ',')}, chunk {int(q['chunk'])} ({where})")
        if result.get("short_answer") and not short:  # the model's own, copied from the quote
            out = f"**{md_escape(result['short_answer'])}**\n\n" + out
        return out
    return md_escape(text) if text else "*(the model wrote nothing; see what it retrieved below)*"


def _passages_md(passages: list[dict], labels: dict[int, str] | None = None) -> str:
    """Shown passages as a list: pages, chunk (the page view's chunk field shows it), the reader's
    probability, the text."""
    items = []
    for p in passages:
        pages = p.get("pages") or [0]
        items.append(f"- {pages_text(pages[0], pages[-1], labels)} · chunk {int(p['chunk'])} · "
                     f"{100 * float(p.get('p') or 0):.0f}%: {md_escape(snippet(p.get('text', ''), 240))}")
    return "\n".join(items)


def answer_evidence_md(ctx: UIContext, record: dict, labels: dict[int, str] | None = None) -> str:
    """Evidence of an answer: the quoted passage first (its chunk, the quote in bold), then the
    chunks the model retrieved by fusion weight."""
    body = evidence_md(record.get("evidence") or [], labels)
    q = record.get("quote")
    if not q:
        return body
    best = next((p for p in record.get("passages") or [] if p["chunk"] == q["chunk"]), None)
    if best is not None:  # the passage the quote was read from (its window), the quote in bold
        flat, quoted = " ".join(best["text"].split()), " ".join(q["text"].split())
        i = flat.find(quoted)
        shown = (md_escape(flat[:i]) + "**" + md_escape(quoted) + "**" + md_escape(flat[i + len(quoted):])
                 if i >= 0 else "**" + md_escape(quoted) + "**")
        pages = best.get("pages") or [0]
        return (f"**Quoted passage** · {pages_text(pages[0], pages[-1], labels)}{matter_text(q)} · "
                f"chunk {int(q['chunk'])}\n\n> {shown}\n\n" + body)
    rows = ctx.library.chunks(record["doc_id"], [int(q["chunk"])])
    if not rows:
        return body
    r = rows[0]
    flat = " ".join(r["text"].split())
    quoted = " ".join(q["text"].split())
    i = flat.find(quoted[:60])
    shown = (md_escape(flat[:i]) + "**" + md_escape(flat[i:i + len(quoted)]) + "**" + md_escape(flat[i + len(quoted):])
             if i >= 0 else md_escape(flat))
    head = (f"**Quoted passage** · {pages_text(r['page_first'], r['page_last'], labels)}{matter_text(q)} · "
            f"chunk {int(q['chunk'])}"
            f"\n\n> {shown}")
    return head + "\n\n" + body


def show_answer(ctx: UIContext, answers: list | None, index: int | None) -> tuple[str, str, dict | None]:
    """(heatmap, evidence, result) of one earlier answer of the chat."""
    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        return answer_heatmap(ctx, None), "", None
    rec = answers[int(index)]
    _, labels = ctx.layout(rec["doc_id"])
    return (answer_heatmap(ctx, rec), answer_evidence_md(ctx, rec, labels),
            {k: rec[k] for k in ("answer", "evidence", "trace")})  # fmt: skip


def heatmap_pick(ctx: UIContext, answers: list | None, index: int | None, chunk: Any, gen: Any = None) -> str:
    """The passage behind a heatmap cell (or a chunk number typed in), with what that row gave it."""
    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        return "Ask a question first."
    rec = answers[int(index)]
    if chunk is None:
        return "Pick a chunk."
    c = int(chunk)
    notes = []
    rows = (rec.get("trace") or {}).get("chunks") or []
    for i, r in enumerate(rows):
        if gen is not None and int(gen) >= 0 and int(r.get("gen_chunk", -1)) != int(gen):
            continue
        s = r.get("scores")
        bits = []
        if s is not None and c < len(s) and s[c] is not None:
            bits.append(f"relevance {float(s[c]):.3f}")
        if c in (r.get("topk") or []):
            w = r["weights"][r["topk"].index(c)]
            bits.append(f"retrieved (top-k), weight {float(w):.3f}")
        if bits:
            notes.append(f"gen {i + 1}: " + ", ".join(bits))
    text = passage_md(ctx, rec["doc_id"], c)
    return text + ("\n\n" + " · ".join(notes) if notes else "")


def page_view(ctx: UIContext, doc_id: str | None, chunk: Any) -> tuple[Any, str]:
    """(image, caption) of the page(s) a chunk lies on, the chunk highlighted: a PDF or EPUB page as
    printed (ingest.page.render_page, one image per page when the chunk runs over a page break), a
    text document's page typeset; (None, the passage in its context) when no page can be drawn."""
    from ingest.page import passage_context, render_page

    if not doc_id or chunk is None or str(chunk) == "":
        return None, ""
    lib = ctx.library
    doc_id = lib.resolve(doc_id)
    c = int(chunk)
    n = lib.document(doc_id)["n_chunks"]
    if not 0 <= c < n:
        raise UIError(f"chunk {c} is not in this document (0 to {n - 1})")
    row = lib.chunks(doc_id, [c])[0]
    _, labels = ctx.layout(doc_id)
    pages = list(range(row["page_first"], row["page_last"] + 1))
    try:
        pngs = [render_page(lib, doc_id, pg, highlight=c) for pg in pages]
    except IngestError as e:  # no kept file (added before files were kept): the passage in its context
        ctxt = passage_context(lib, doc_id, c)
        return None, (f"*{md_escape(str(e))}.* In its context ({pages_text(pages[0], pages[-1], labels)}):\n\n> "
                      f"{md_escape(' '.join(ctxt['before'].split()))} **{md_escape(' '.join(ctxt['text'].split()))}** "
                      f"{md_escape(' '.join(ctxt['after'].split()))}")
    return _stack_png(pngs), (f"Chunk {c} highlighted on {pages_text(pages[0], pages[-1], labels)}"
                             + (" (it runs over the page break)" if len(pages) > 1 else ""))


def _stack_png(pngs: list[bytes]) -> Any:
    """PNG pages one above the other, as a PIL image (what gr.Image shows)."""
    import io

    from PIL import Image

    imgs = [Image.open(io.BytesIO(b)).convert("RGB") for b in pngs]
    if len(imgs) == 1:
        return imgs[0]
    out = Image.new("RGB", (max(i.width for i in imgs), sum(i.height for i in imgs) + 8 * (len(imgs) - 1)), "white")
    y = 0
    for im in imgs:
        out.paste(im, (0, y))
        y += im.height + 8
    return out


def export_conversation(ctx: UIContext, doc_id: str | None) -> str:
    """The document's conversation and latest summary as a Markdown file (qa.export); its path."""
    from qa.export import export_file

    if doc_id == ALL_DOCS:
        raise UIError("pick one document to export its conversation")
    doc_id = _ready(ctx, doc_id)
    return str(export_file(ctx.library, doc_id, ctx.upload_root / "exports", model_fp=ctx.fingerprint()))


def mask_regenerate(
    ctx: UIContext, answers: list | None, index: int | None, chunks: Any, max_new_tokens: int = 64
) -> tuple[str, str, str, dict | None]:
    """Mask and regenerate: ask the picked answer's question again with `chunks` ("12" or "12,40",
    or a number) barred from retrieval (qa.ask.ask's `mask`). Returns (the unmasked answer,
    the new answer, the new evidence with each passage's weight and causal effect, the new result
    JSON): Markdown for the two answers side by side."""
    from qa.ask import ask, parse_mask

    answers = answers or []
    if index is None or not (0 <= int(index) < len(answers)):
        raise UIError("ask a question first, then pick the chunk to mask")
    if chunks is None or str(chunks).strip() == "":
        raise UIError("type the chunk number to mask (click a heatmap cell to fill it in), e.g. 12 or 12,40")
    if isinstance(chunks, float) and chunks.is_integer():
        chunks = int(chunks)
    mask = parse_mask(str(chunks))
    rec = answers[int(index)]
    doc_id = _ready(ctx, rec["doc_id"])
    n_new = max(1, min(int(max_new_tokens or 64), MAX_NEW_TOKENS))
    try:
        out = ask(ctx.library, ctx.engine(), doc_id, rec["question"], max_new_tokens=n_new, mask=mask)
    except NotPrefilled as e:
        raise UIError(_not_prefilled_message(ctx, doc_id)) from e
    _, labels = ctx.layout(doc_id)
    masked = ", ".join(str(c) for c in out["masked"])
    before = out["unmasked"]
    before_md = "**Before** (nothing masked)\n\n" + answer_md(before, labels)
    after_md = f"**After** (chunk{'s' if len(out['masked']) > 1 else ''} {masked} masked)\n\n" + answer_md(out, labels)
    ev = evidence_md(out["evidence"], labels, title=f"Evidence with chunk {masked} masked")
    return before_md, after_md, ev, {k: out[k] for k in ("answer", "evidence", "trace")}


# ---------------------------------------------------------------------------------------------
# summary and document map
# ---------------------------------------------------------------------------------------------

SUMMARY_MODES = {
    "extractive": "Extractive — whole sentences from every chapter, the ones the rest of the document retrieves most",
    "abstractive": "Abstractive — generated by the model (offered only once it beats the extractive summary)",
}
WHOLE_DOCUMENT = 0  # the part choice "whole document"


def summary_parts(ctx: UIContext, doc_id: str | None) -> list[tuple[str, int]]:
    """The Summary tab's part choices: the whole document, then each chapter or section with its page."""
    from ingest.parts import document_parts

    if not doc_id:
        return [("Whole document", WHOLE_DOCUMENT)]
    doc_id = ctx.library.resolve(doc_id)
    _, labels = ctx.layout(doc_id)
    parts = document_parts(ctx.library, doc_id)
    return [("Whole document", WHOLE_DOCUMENT)] + [
        (f"{p.number}. {p.title[:60]} ({pages_text(p.page_first, p.page_first, labels)})", p.number)
        for p in parts if p.number > 0]


def summarize_doc(ctx: UIContext, doc_id: str | None, mode: str = "extractive", max_new_tokens: int = 128,
                  chapter: int | None = None, pages: str | None = None) -> dict:
    """Contract 2 `summarize` ({"summary", "evidence", "trace"}) plus "mode" (the one used) and
    "doc_id"; of the whole document, part `chapter`, or `pages` ("12-30")."""
    from qa.summary import parse_pages, summarize

    doc_id = _ready(ctx, doc_id)
    mode = (mode or "extractive").lower()
    if mode not in SUMMARY_MODES:
        raise UIError(f"unknown summary mode {mode!r}: extractive or abstractive")
    n_new = max(1, min(int(max_new_tokens or 128), MAX_NEW_TOKENS))
    rng = parse_pages(pages) if pages and str(pages).strip() else None
    part = int(chapter) if chapter not in (None, "", WHOLE_DOCUMENT) and rng is None else None
    try:
        out = summarize(ctx.library, ctx.engine(), doc_id, mode=mode, max_new_tokens=n_new, chapter=part, pages=rng)
    except NotPrefilled as e:
        raise UIError(_not_prefilled_message(ctx, doc_id)) from e
    return {**out, "mode": out["trace"]["mode"], "doc_id": doc_id}


def summary_heatmap(ctx: UIContext, out: dict) -> str:
    chunk_pages, labels = ctx.layout(out["doc_id"])
    tr = out.get("trace") or {}
    if out["mode"] == "extractive":
        deg = tr.get("in_degree") or []
        sel = tr.get("selected") or []
        w = {e["chunk"]: e["weight"] for e in out["evidence"]}
        row = {"gen_chunk": -1, "scores": deg, "topk": sel, "weights": [max(w.get(c, 1.0), 1e-6) for c in sel]}
        return plots.retrieval_heatmap_svg(
            {"n_doc_chunks": len(chunk_pages), "chunks": [row]}, chunk_pages, labels,
            title="How much the rest of the document retrieved each chunk (the quoted sentences' chunks outlined)",
            value_name="in-degree", row_labels=["in-degree"], mark_name="selected",
        )  # fmt: skip
    return plots.retrieval_heatmap_svg(tr, chunk_pages, labels, title="Retrieval while writing the summary")


def summary_view(ctx: UIContext, doc_id: str | None, mode: str = "extractive", max_new_tokens: int = 128,
                 chapter: int | None = None, pages: str | None = None):
    """(summary Markdown, evidence Markdown, heatmap HTML, result JSON) for the Summary tab."""
    out = summarize_doc(ctx, doc_id, mode, max_new_tokens, chapter=chapter, pages=pages)
    _, labels = ctx.layout(out["doc_id"])
    label = SUMMARY_MODES[out["mode"]]
    tr = out["trace"]
    notice = f"*{md_escape(tr['notice'])}.*\n\n" if tr.get("notice") else ""
    if out["mode"] == "extractive":
        lines, last = [md_escape(out["summary"].split("\n\n")[0])], None
        many = len(tr.get("parts") or []) > 1
        for s in tr.get("sentences") or []:
            if many and s["part"] != last:
                lines.append(f"**{md_escape(s['part_title'])}**")
                last = s["part"]
            lines.append(_quote(s["text"]) + f"  \n> — {pages_text(s['pages'][0], s['pages'][-1], labels)}")
        if not tr.get("sentences"):
            lines.append("*No whole sentence found here.*")
        body = "\n\n".join(lines)
    else:
        body = md_escape(out["summary"].strip()) or "*(the model wrote nothing)*"
        body += "\n\n*Judge the summary by its evidence below.*"
    md = f"### {label}\n\n{notice}{body}"
    return md, evidence_md(out["evidence"], labels), summary_heatmap(ctx, out), out


# ---------------------------------------------------------------------------------------------
# outline
# ---------------------------------------------------------------------------------------------


def outline_doc(ctx: UIContext, doc_id: str | None) -> dict:
    """API: the document's outline (qa.outline.build): parts, statements and their users,
    people and places with where they are introduced, the strongest long links."""
    from qa.outline import build

    dep = doc_map(ctx, doc_id)
    return build(ctx.library, ctx.library.resolve(doc_id), dep)  # type: ignore[arg-type]


def outline_view(ctx: UIContext, doc_id: str | None) -> str:
    """The Outline tab's Markdown."""
    from qa.outline import page_ranges

    o = outline_doc(ctx, doc_id)
    _, labels = ctx.layout(o["doc_id"])
    out = [f"**{len(o['parts'])} parts** ({o['parts'][0]['source'] if o['parts'] else '-'}): "
           + "; ".join(f"{p['number']}. {md_escape(p['title'][:40])} (p. {plots.page_label(p['page_first'], labels)})"
                       for p in o["parts"][:40]) + (" …" if len(o["parts"]) > 40 else "")]
    if o["statements"]:
        out.append(f"\n### Statements ({len(o['statements'])})\n\n*Used by: the later chunks that retrieved the "
                   "statement while the document was read (strongest first). Type one in “What did a chunk rely "
                   "on?” below to see what it retrieved.*\n")
        out.append("| statement | page | chunk | used by |\n|---|---|---|---|")
        for st in o["statements"]:
            used = ", ".join(str(u["chunk"]) for u in st["used_by"][:6]) or "—"
            if len(st["used_by"]) > 6:
                used += f" (+{len(st['used_by']) - 6})"
            name = f"{st['kind']} {st['label'] or st['number']}" + (f" ({st['title']})" if st.get("title") else "")
            out.append(f"| {md_escape(name)} | {md_escape(st['page_label'])} | {st['chunks'][0]} | {used} |")
    if o["names"]:
        out.append("\n### People and places\n\n*Capitalised names by frequency, with the sentence that "
                   "introduces each (its first mention) and the pages where it recurs.*\n")
        for n in o["names"]:
            intro = n["introduced"]
            out.append(f"- **{md_escape(n['name'])}** ({n['kind']}, {n['mentions']} mentions): introduced on "
                       f"p. {plots.page_label(intro['page'], labels)}, chunk {intro['chunk']}  \n"
                       f"  {_quote(intro['text'], 300)[2:]}  \n  pages {page_ranges(n['pages'])}")
    if not o["statements"] and not o["names"]:
        out.append("\nNo statements (definitions, lemmas, theorems) and no frequent names found.")
    return "\n".join(out)


def relied_on_view(ctx: UIContext, doc_id: str | None, chunk: Any) -> str:
    """What chunk `chunk` retrieved while it was read, with the statement each retrieved chunk is part of."""
    from qa.outline import document_statements, relied_on

    if not doc_id or chunk is None or str(chunk) == "":
        return "Pick a document and type a chunk number."
    doc_id = ctx.library.resolve(doc_id)
    c = int(chunk)
    n = ctx.library.document(doc_id)["n_chunks"]
    if not 0 <= c < n:
        raise UIError(f"chunk {c} is not in this document (0 to {n - 1})")
    rows = relied_on(document_statements(ctx.library, doc_id), doc_map(ctx, doc_id), c)
    parts = [passage_md(ctx, doc_id, c, heading="Chunk")]
    if not rows:
        parts.append("It retrieved nothing (the first chunks of a document have nothing to retrieve).")
    for r in sorted(rows, key=lambda r: -r["weight"]):
        what = f" — {r['statement']}" if r["statement"] else ""
        parts.append(passage_md(ctx, doc_id, r["chunk"], heading=f"Relied on (weight {r['weight']:.3f}{what}): chunk"))
    return "\n\n---\n\n".join(parts)


def doc_map(ctx: UIContext, doc_id: str | None) -> list[dict]:
    """API: the document's dependency map (what each chunk retrieved at prefill)."""
    from qa.summary import dependency_map

    doc_id = _ready(ctx, doc_id)
    try:
        return dependency_map(ctx.library, ctx.engine(), doc_id)
    except NotPrefilled as e:
        raise UIError(_not_prefilled_message(ctx, doc_id)) from e


def doc_map_view(ctx: UIContext, doc_id: str | None) -> tuple[str, str]:
    """(map SVG, Markdown list of the strongest long-range links named by what they join) for the
    Document map tab; licence, contents and index pages are left out of both."""
    from ingest.boilerplate import chunk_matter
    from qa.outline import document_statements, named_links

    dep = doc_map(ctx, doc_id)
    doc_id = ctx.library.resolve(doc_id)  # type: ignore[arg-type]
    chunk_pages, labels = ctx.layout(doc_id)
    chunks = ctx.library.chunks(doc_id)
    skip = set(chunk_matter(ctx.library, doc_id, chunks))
    shown = [{**r, "retrieved": [j for j in r["retrieved"] if int(j) not in skip],
              "weights": [w for j, w in zip(r["retrieved"], r["weights"]) if int(j) not in skip]}
             for r in dep if int(r.get("chunk", -1)) not in skip]
    svg = plots.dependency_map_svg(shown, chunk_pages, labels)
    links = plots.dependency_links(shown, len(chunk_pages))
    if not links:
        return svg, "No links to show."
    n_pages = ctx.library.document(doc_id)["n_pages"]
    lines = [f"{len(chunk_pages):,} chunks on {n_pages} pages, {len(links):,} retrieval links"
             + (f" ({len(skip)} chunks on licence, contents or index pages left out)" if skip else "")
             + ". Click a dot (or type two chunk numbers) to read both passages."]
    strong = named_links(dep, skip, document_statements(ctx.library, doc_id, chunks), chunks, labels)
    if strong:
        lines.append("\nStrongest long links (a chunk retrieving one more than 8 chunks back):")
        for ln in strong[:8]:
            lines.append(f"- chunk {ln['source']} ({md_escape(ln['source_is'])}) → chunk {ln['target']} "
                         f"({md_escape(ln['target_is'])}), weight {ln['weight']:.2f}")
    return svg, "\n".join(lines)


def doc_map_pick(ctx: UIContext, doc_id: str | None, src: Any, dst: Any = None) -> str:
    """Both passages of a link (querying chunk src, retrieved chunk dst); without dst, src and
    the chunks it retrieved."""
    if not doc_id or src is None:
        return "Pick a document and a chunk."
    doc_id = ctx.library.resolve(doc_id)
    s = int(src)
    parts = [passage_md(ctx, doc_id, s, heading="Querying chunk")]
    if dst is not None and str(dst) != "" and int(dst) >= 0:
        parts.append(passage_md(ctx, doc_id, int(dst), heading="Retrieved chunk"))
        return "\n\n---\n\n".join(parts)
    dep = doc_map(ctx, doc_id)
    row = next((r for r in dep if int(r.get("chunk", -1)) == s), None)
    if not row or not row.get("retrieved"):
        parts.append("It retrieved nothing (the first chunks of a document have nothing to retrieve).")
        return "\n\n".join(parts)
    pairs = sorted(zip(row["retrieved"], row["weights"]), key=lambda t: -t[1])
    for j, w in pairs[:4]:
        parts.append(passage_md(ctx, doc_id, int(j), heading=f"Retrieved (weight {float(w):.3f}): chunk"))
    return "\n\n---\n\n".join(parts)
