"""What every tab needs: the library, the engine and the running jobs (`UIContext`), how errors
reach a person, and the settings every event shares.

- Jobs are keyed by (session, kind) so the Cancel/Stop buttons of one browser tab stop that tab's
  job only. `arm()` registers a job before it enters the queue, so Cancel works while it waits;
  `ui.jobs.run_threaded` runs a job's work in a worker thread.
- Errors meant for people (`cli_io.UserError`, the root of every package's own) become `gr.Error` with an
  HTML-escaped one-line message (`user_facing`), or a line in place beside the control
  (`in_place(error_text(e))`); anything else is logged with its traceback and shown as a short
  generic message.
- Every event that runs the model shares one worker (`MODEL`); UI-only events are private
  (`PRIVATE`).
"""

from __future__ import annotations

import functools
import html
import inspect
import logging
import os
import re
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import gradio as gr

from cli_io import UserError
from ingest import pipeline
from ingest.errors import IngestError
from store.library import Library

from .render import md_escape

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE = "50mb"
MAX_NEW_TOKENS = 512
ALL_DOCS = "*"  # the Ask tab's "All documents" choice

# the event settings: every event that runs the model shares one worker (users queue); UI-only
# events are not API endpoints
MODEL = {"concurrency_id": "model", "concurrency_limit": 1}
PRIVATE = {"api_visibility": "private"}

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
    if isinstance(e, UserError):
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
    if isinstance(e, UserError):
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
        self._adopted = False
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
        """The engine for `model` (loaded once; pipeline.load_engine caches it per process). The
        first time, the library's states under an older engine version's fingerprint are moved onto
        this one (pipeline.adopt_older_states), so the library lists them as prefilled."""
        with self._engine_lock:
            eng = pipeline.load_engine(self.model)
            if not self._adopted:
                pipeline.adopt_older_states(self.library, eng)
                self._adopted = True
            return eng

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

    def forget_layout(self, doc_id: str) -> None:
        """Drop a document's cached layout (it was stored again, or removed)."""
        with self._lock:
            self._layouts.pop(doc_id, None)

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


# ---------------------------------------------------------------------------------------------
# documents and events
# ---------------------------------------------------------------------------------------------


def ready(ctx: UIContext, doc_id: str | None) -> str:
    """The picked document's full id; a UIError saying what to do when none is picked."""
    if not doc_id:
        if not ctx.library.documents():
            raise UIError("the library is empty: add a document in the Library tab first")
        raise UIError("pick a document first (only fully prefilled documents are listed)")
    return ctx.library.resolve(doc_id)


def chunk_number(value: Any) -> int | None:
    """A chunk-number field (the Ask, Outline and Map tabs' text boxes, empty until a chunk is chosen:
    Gradio's number field shows 0, a chunk no one chose): None when empty; a UIError for anything but a
    whole number from 0. Whether the document has that chunk is the handler's to say."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise UIError(f"chunk: {text[:40]!r} is not a chunk number (a whole number from 0, e.g. 12)")
    return int(text)


def not_prefilled_message(ctx: UIContext, doc_id: str) -> str:
    title = ctx.library.document(doc_id)["title"]
    return f"“{title}” is not fully prefilled yet: open the Library tab, pick it and press Resume."


def session_of(request: gr.Request | None) -> str:
    """The browser tab an event comes from (its jobs are its own)."""
    return getattr(request, "session_hash", None) or ""
