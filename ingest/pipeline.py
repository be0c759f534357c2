"""The ONE ingest pipeline: parse -> tokenize -> store -> prefill, for the CLI and the web UI.

    result = ingest(path, library=lib, engine=engine, progress=print, cancel=event)

- progress: called with `Progress(stage, done, total, tokens_per_s, eta_s, message)`; stages are
  "hash", "parse", "tokenize", "store", "prefill", "done".
- cancel: a `threading.Event`. Before the document is stored, cancelling raises `Cancelled` and
  leaves the library as it was. During prefill the engine stops at the next chunk batch; what it
  checkpointed is kept, the document is "partial", and running `ingest` again resumes it.
- errors: every bad input raises an `IngestError` (a `cli_io.UserError`: one line) before anything is
  written. The document, its pages, chunks and token ids are written in ONE transaction, only after
  parsing and tokenizing succeeded. Prefill state is separate: a row per (document, model
  fingerprint) whose counters follow the engine's checkpoints (`state.n_tokens`).
- resume: the same file (same sha256) is the same document; ingesting it again skips parse and
  tokenize (the token ids are stored) and continues prefill from the last checkpoint.
- the prefill row's `n_tokens_done` is what the engine has COMMITTED (the `n_tokens` of the state
  directory's meta.json, the commit record), never the engine's in-memory progress: after a crash
  the row says where the next run will resume.
- the original file of a PDF or EPUB is kept as `$DRT_HOME/files/<doc_id>.<pdf|epub>` for its
  page images (`ingest.page.keep_original`; `remove_document` deletes it).
- one writer per state directory: prefill holds an exclusive advisory lock (flock on
  `<state dir>/.prefill.lock`) while it runs; a second prefill of the same document by the same
  model (another CLI process, another UI tab) fails at once with PrefillBusy instead of writing
  the same memmaps and carry files concurrently.
- prefill cadence: env `DRT_PREFILL_BLOCK_CHUNKS` (chunks per engine block) and
  `DRT_PREFILL_CHECKPOINT_EVERY` (blocks per checkpoint) are passed to `engine.prefill` when set
  (the engine's defaults otherwise). A resumed prefill should use the same block size as the run it
  continues for states bit-identical to an uninterrupted run's.
- a state saved before the chunks' token ids were stored (`store.errors.StateTooOld` when opened) is
  prefilled again from the stored token ids, with a warning; asking it first says to ingest again.

The engine (drt_core.engine) is only touched through `Engine.from_pretrained`, `.tokenizer`,
`.fingerprint`, `.open_state(dir)`, `.prefill(state, ids, cancel=)` and `state.n_tokens` /
`state.dependency_map()`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from drt_core.protocol import DocumentEngine
from store.errors import StateTooOld
from store.library import Library

from .errors import Cancelled, EngineUnavailable, IngestError, PrefillBusy
from .page import forget_original, keep_original
from .parse import ParseLimits, parse_file
from .tokenize import CHUNK_TOKENS, make_encoder, tokenize_document, tokenizer_fingerprint

logger = logging.getLogger(__name__)

STAGES = ("hash", "parse", "tokenize", "store", "prefill", "done")
DB_UPDATE_EVERY_S = 1.0  # prefill counters in sqlite are refreshed at most this often
ENV_BLOCK_CHUNKS = "DRT_PREFILL_BLOCK_CHUNKS"
ENV_CHECKPOINT_EVERY = "DRT_PREFILL_CHECKPOINT_EVERY"


@dataclass
class Progress:
    stage: str
    done: int
    total: int
    tokens_per_s: float | None = None
    eta_s: float | None = None
    message: str = ""


@dataclass
class IngestResult:
    doc_id: str
    title: str
    pages: int
    tokens: int
    chunks: int
    seconds: float
    status: str  # "done" | "partial" (prefill cancelled or not run) | "stored" (prefill=False)
    created: bool  # this call wrote the document rows (False: it was already in the library)
    tokens_prefilled: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The `drt-reader ingest --json` object (docs/design.md, Contract 2)."""
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "pages": self.pages,
            "tokens": self.tokens,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
        }


ProgressFn = Callable[[Progress], None]


# ---------------------------------------------------------------------------------------------
# engine
# ---------------------------------------------------------------------------------------------


def default_device() -> str:
    return os.environ.get("DRT_DEVICE", "cpu")


@functools.lru_cache(maxsize=2)
def load_engine(model: str, device: str | None = None) -> DocumentEngine:
    """`Engine.from_pretrained(model)`, cached per (model, device); EngineUnavailable if it cannot."""
    try:
        from drt_core.engine import Engine
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "drt_core":
            raise EngineUnavailable(
                "the inference engine (drt_core.engine) is not part of this build yet"
            ) from e
        raise
    try:
        return Engine.from_pretrained(model, device=device or default_device())
    except (FileNotFoundError, NotADirectoryError, OSError) as e:
        raise EngineUnavailable(f"cannot load the model {model}: {e}") from e


def _resolve_engine(engine: DocumentEngine | Callable[[], DocumentEngine] | None) -> DocumentEngine | None:
    if engine is None or hasattr(engine, "prefill"):
        return engine
    return engine()  # a factory: the model is loaded only once the file has parsed


def adopt_older_states(library: Library, engine: DocumentEngine) -> None:
    """The states this model's documents have under an older engine version's fingerprint, moved
    onto its fingerprint now (drt_core.state_migration): they open without a prefill."""
    from drt_core.state_migration import migrate_library

    migrate_library(library, engine)


def state_dir(home: str | Path, doc_id: str, model_fp: str) -> Path:
    """$DRT_HOME/states/<doc_id>/<model_fp>/ (docs/design.md, the store)."""
    return Path(home) / "states" / doc_id / model_fp


def remove_document(library: Library, doc_id: str) -> tuple[str, str]:
    """Delete a document (rows first: the commit point), then its prefilled states of every model
    and its kept file.
    `doc_id` may be a unique prefix, or the whole title or file name. Returns (doc_id, title)."""
    doc_id = library.resolve(doc_id, partial=False)
    title = library.document(doc_id)["title"]
    library.delete_document(doc_id)  # the states below are unreachable from now on
    shutil.rmtree(Path(library.home) / "states" / doc_id, ignore_errors=True)
    forget_original(library.home, doc_id)  # the kept PDF or EPUB (ingest.page)
    return doc_id, title


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        v = int(raw)
    except ValueError:
        raise IngestError(f"{name} must be a positive integer, not {raw!r}") from None
    if v < 1:
        raise IngestError(f"{name} must be a positive integer, not {raw!r}")
    return v


def prefill_options() -> dict[str, int]:
    """Keyword arguments for `engine.prefill` from DRT_PREFILL_BLOCK_CHUNKS /
    DRT_PREFILL_CHECKPOINT_EVERY (only those that are set)."""
    opts = {}
    for env, key in ((ENV_BLOCK_CHUNKS, "block_chunks"), (ENV_CHECKPOINT_EVERY, "checkpoint_every")):
        v = _env_int(env)
        if v is not None:
            opts[key] = v
    return opts


LOCK_NAME = ".prefill.lock"
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


@contextlib.contextmanager
def prefill_lock(sdir: Path, doc_id: str):
    """Exclusive, non-blocking advisory lock on a state directory (PrefillBusy when held).

    flock locks belong to the open file description, so two threads of one process (two UI tabs)
    exclude each other as well as two processes; the kernel drops the lock when its holder dies
    (a SIGKILLed ingest never leaves a stale lock). The empty lock file stays."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no locking
        yield
        return
    f = open(sdir / LOCK_NAME, "a+b")
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PrefillBusy(
                f"document {doc_id[:12]} is being prefilled right now by another process or tab; "
                "wait for it to finish (or stop it), then try again"
            ) from None
        yield
    finally:
        f.close()


def committed_tokens(state: Any, sdir: Path) -> int:
    """Tokens the engine has committed to `sdir` (meta.json's n_tokens, the commit record).

    `state.n_tokens` is the engine's in-memory progress, ahead of the disk between checkpoints;
    the library must only ever claim what a restart will find. Falls back to `state.n_tokens` for
    an engine whose commit record carries no count."""
    import json

    try:
        meta = json.loads((sdir / "meta.json").read_text())
        return int(meta["n_tokens"])
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, KeyError, TypeError):
        return int(state.n_tokens)


# ---------------------------------------------------------------------------------------------
# ingest
# ---------------------------------------------------------------------------------------------


def sha256_file(path: str | Path, cancel: threading.Event | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            if cancel is not None and cancel.is_set():
                raise Cancelled("ingest was cancelled")
            h.update(block)
    return h.hexdigest()


def ingest(
    path: str | Path,
    *,
    library: Library,
    engine: DocumentEngine | Callable[[], DocumentEngine] | None,
    title: str | None = None,
    password: str | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    limits: ParseLimits | None = None,
    prefill: bool = True,
) -> IngestResult:
    """Add a file to the library and prefill it (see the module docstring).

    Args:
        path: PDF, EPUB, text, Markdown or TeX (the content decides).
        library: the store.
        engine: an Engine, or a zero-argument factory (called only after the file parsed), or
            None with prefill=False (then the project tokenizer is used).
        title: overrides the title found in the file (metadata, \\title, first heading, file name).
        password: for encrypted PDFs.
        progress, cancel: see the module docstring.
        limits: parse limits (time, memory, sizes).
        prefill: False stores the document without running the model.
    """
    t0 = time.monotonic()
    emit = progress or (lambda p: None)
    p = Path(path)
    if not p.is_file():
        raise IngestError(f"no such file: {p}" if not p.exists() else f"not a file: {p}")
    size = p.stat().st_size
    emit(Progress("hash", 0, size, message=f"reading {p.name}"))
    doc_id = sha256_file(p, cancel)
    emit(Progress("hash", size, size, message=f"document {doc_id[:12]}"))
    eng = None
    created = False
    warnings: list[str] = []
    if library.has_document(doc_id):
        emit(Progress("store", 1, 1, message="already in the library: resuming"))
        if title and title != library.document(doc_id)["title"]:
            library.set_title(doc_id, title)
    else:
        eng, created, warnings = _store_new(p, doc_id, size, library, engine, title, password, limits, cancel, emit)
    doc = library.document(doc_id)
    keep_original(library.home, doc_id, p, doc["kind"])  # for its page images; never fails the ingest
    status, n_done = "stored", 0
    if prefill:
        eng = eng if eng is not None else _resolve_engine(engine)
        if eng is None:
            raise EngineUnavailable("no engine to prefill with")
        row = prefill_document(library, eng, doc_id, progress=emit, cancel=cancel)
        status, n_done = ("done" if row["status"] == "done" else "partial"), row["n_tokens_done"]
    result = IngestResult(
        doc_id=doc_id,
        title=doc["title"],
        pages=doc["n_pages"],
        tokens=doc["n_tokens"],
        chunks=doc["n_chunks"],
        seconds=time.monotonic() - t0,
        status=status,
        created=created,
        tokens_prefilled=n_done,
        warnings=warnings or doc["warnings"],
    )
    emit(Progress("done", 1, 1, message=status))
    return result


def _store_new(p: Path, doc_id: str, size: int, library: Library, engine, title: str | None, password: str | None,
               limits: ParseLimits | None, cancel: threading.Event | None, emit) -> tuple[Any, bool, list[str]]:
    """Parse, tokenize and store a file the library does not have: (the engine, if one was made,
    whether the document was created, the parse warnings)."""
    emit(Progress("parse", 0, 1, message=f"parsing {p.name}"))
    parsed = parse_file(p, password=password, limits=limits, cancel=cancel)
    warnings = list(parsed.warnings)
    emit(Progress("parse", 1, 1, message=f"{len(parsed.pages)} pages, {len(parsed.text):,} characters"))
    eng = _resolve_engine(engine)
    n_chars = len(parsed.text)
    emit(Progress("tokenize", 0, n_chars, message="tokenizing"))  # the stage starts here
    tok = eng.tokenizer if eng is not None else None
    encode = make_encoder(tok)
    tok_fp = tokenizer_fingerprint(tok)
    tokenized = tokenize_document(
        parsed,
        encode,
        tokenizer_fp=tok_fp,
        progress=lambda d, t: emit(Progress("tokenize", d, t, message="tokenizing")),
        cancel=cancel,
    )
    if cancel is not None and cancel.is_set():
        raise Cancelled("ingest was cancelled before anything was stored")
    emit(Progress("store", 0, 1, message=f"storing {len(tokenized.chunks)} chunks"))
    doc_row = {
        "id": doc_id,
        "title": (title or parsed.title or p.stem).strip() or p.stem,
        "kind": parsed.kind,
        "source_name": p.name,
        "n_bytes": size,
        "n_pages": len(parsed.pages),
        "n_chars": n_chars,
        "n_tokens": len(tokenized.ids),
        "n_chunks": len(tokenized.chunks),
        "chunk_tokens": CHUNK_TOKENS,
        "tokenizer_fp": tok_fp,
        "warnings": warnings,
    }
    pages = [
        {
            "number": pg.number,
            "label": pg.label,
            "char_start": pg.char_start,
            "char_end": pg.char_end,
            "text": pg.text,
        }
        for pg in parsed.pages
    ]
    chunks = [
        {
            "idx": c.index,
            "tok_start": c.tok_start,
            "tok_end": c.tok_end,
            "char_start": c.char_start,
            "char_end": c.char_end,
            "page_first": c.page_first,
            "page_last": c.page_last,
            "text": c.text,
        }
        for c in tokenized.chunks
    ]
    outline = [{"level": lv, "title": t, "page": pg} for lv, t, pg in parsed.outline]
    created = library.add_document(doc_row, pages, chunks, tokenized.ids, outline=outline)
    emit(Progress("store", 1, 1, message="stored"))
    return eng, created, warnings


# ---------------------------------------------------------------------------------------------
# prefill (resumable)
# ---------------------------------------------------------------------------------------------


def prefill_document(
    library: Library,
    engine: DocumentEngine,
    doc_id: str,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> dict:
    """Prefill a stored document with `engine`, from its last checkpoint; return the state row."""
    emit = progress or (lambda p: None)
    doc = library.document(doc_id)
    adopt_older_states(library, engine)
    fp = str(engine.fingerprint)
    tok_fp = tokenizer_fingerprint(engine.tokenizer)
    if doc["tokenizer_fp"] not in (tok_fp, "unknown"):
        raise IngestError(
            f"document {doc_id[:12]} was tokenized with another tokenizer than this model's; "
            f"remove it (drt-reader rm {doc_id[:12]}) and ingest it again"
        )
    ids = library.token_ids(doc_id)
    sdir = state_dir(library.home, doc_id, fp)
    sdir.mkdir(parents=True, exist_ok=True)
    with prefill_lock(sdir, doc_id):
        return _prefill_locked(library, engine, doc, doc_id, fp, ids, sdir, emit, cancel)


def _prefill_locked(
    library: Library,
    engine: DocumentEngine,
    doc: dict,
    doc_id: str,
    fp: str,
    ids: list[int],
    sdir: Path,
    emit: ProgressFn,
    cancel: threading.Event | None,
) -> dict:
    total = len(ids)
    try:
        state = _open_state(engine, sdir, doc_id)
    except OSError as e:
        if e.errno in _DISK_FULL:
            raise _disk_full(e, sdir) from e
        raise

    def save(status: str, error: str | None = None) -> dict:
        n = min(committed_tokens(state, sdir), total)
        n_chunks = doc["n_chunks"] if n >= total else n // CHUNK_TOKENS
        library.set_prefill_state(
            doc_id, fp, status=status, n_tokens_done=n, n_chunks_done=n_chunks,
            n_tokens_total=total, state_dir=str(sdir), last_error=error,
        )  # fmt: skip
        return library.prefill_state(doc_id, fp) or {}

    row = library.prefill_state(doc_id, fp)
    if int(state.n_tokens) >= total:
        recorded = row is not None and row["status"] == "done"
        if not recorded or library.latest_trace(doc_id, fp, "dependency_map") is None:
            return _complete(library, engine, doc_id, fp, total, doc["n_chunks"], sdir, state)
        emit(Progress("prefill", total, total, message="already prefilled"))
        return row
    opts = prefill_options()
    save("partial" if state.n_tokens else "pending")
    start_tokens = int(state.n_tokens)
    if start_tokens:
        logger.info("prefill of %s resuming at %d of %d tokens", doc_id[:12], start_tokens, total)
    else:
        logger.info("prefill of %s starting: %d tokens", doc_id[:12], total)
    emit(Progress("prefill", start_tokens, total, message="resuming" if start_tokens else "prefilling"))
    last_db = time.monotonic()
    recorded = start_tokens
    after_cancel = 0
    try:
        for ev in engine.prefill(state, ids, cancel=cancel, **opts):
            tps = float(ev.tokens_per_s) if getattr(ev, "tokens_per_s", None) else None
            eta = (ev.total_tokens - ev.done_tokens) / tps if tps else None
            emit(Progress("prefill", int(ev.done_tokens), int(ev.total_tokens), tps, eta, "prefilling"))
            if time.monotonic() - last_db >= DB_UPDATE_EVERY_S:
                # one small read of the commit record; the row is written only when it moved
                n_committed = committed_tokens(state, sdir)
                if n_committed != recorded:
                    recorded = save("partial")["n_tokens_done"]
                last_db = time.monotonic()
            if cancel is not None and cancel.is_set():
                after_cancel += 1
                if after_cancel > 2:  # the engine did not stop at its next batch: stop listening
                    break
    except BaseException as e:
        msg = " ".join(str(e).split())[:500] or type(e).__name__
        try:
            save("partial", f"{type(e).__name__}: {msg}")
        except Exception:  # the original error matters more than the bookkeeping
            logger.exception("could not record the prefill error")
        if isinstance(e, MemoryError):
            raise IngestError(
                "prefill ran out of memory; what was checkpointed is kept, run ingest again"
            ) from e
        if isinstance(e, OSError) and e.errno in _DISK_FULL:
            raise _disk_full(e, sdir) from e
        raise
    if int(state.n_tokens) >= total:
        return _complete(library, engine, doc_id, fp, total, doc["n_chunks"], sdir, state)
    row = save("partial")
    emit(Progress("prefill", row["n_tokens_done"], total, message="cancelled: run ingest again to resume"))
    return row


def _open_state(engine: DocumentEngine, sdir: Path, doc_id: str) -> Any:
    """engine.open_state(sdir) under the prefill lock. A state saved before the chunks' token ids
    were stored (StateTooOld) is removed and opened anew: its prefill starts again from the token
    ids in the library, which hold everything it was computed from."""
    try:
        return engine.open_state(sdir)
    except StateTooOld as e:
        logger.warning("%s; prefilling document %s again", e, doc_id[:12])
        for f in sdir.iterdir():
            if f.name != LOCK_NAME:  # held by this prefill
                shutil.rmtree(f) if f.is_dir() else f.unlink()
        return engine.open_state(sdir)


def _disk_full(e: OSError, sdir: Path) -> IngestError:
    return IngestError(
        f"no space left for the prefilled states in {sdir} ({e.strerror or e}); what was "
        "checkpointed is kept: free some space and run ingest again"
    )


def _complete(
    library: Library, engine: DocumentEngine, doc_id: str, fp: str, total: int, n_chunks: int, sdir: Path,
    state: Any,
) -> dict:
    """Mark the prefill done and record the dependency map, in one transaction; then build what a
    question reads besides the states (question_indexes)."""
    dep = state.dependency_map()
    library.complete_prefill(
        doc_id, fp, n_tokens_total=total, n_chunks=n_chunks, state_dir=str(sdir), dependency_map=dep
    )
    question_indexes(library, engine, doc_id, state)
    return library.prefill_state(doc_id, fp) or {}


def chunk_index(library: Library, doc_id: str):
    """The BM25 index (drt_core.bm25, units = single chunks) of the document's chunk texts as the
    library stores them: what qa's reader reads a document's term statistics from. Kept in the
    document's states folder (removed with it), built when missing or stale: once at the end of the
    prefill, not on every new process's first question."""
    from drt_core.bm25 import BM25

    path = Path(library.home) / "states" / doc_id / "chunks-bm25-w0.npz"
    n = int((library.document(doc_id) or {}).get("n_chunks") or 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    have, kept = BM25.kept(path, n, 0, lambda: [r["text"] for r in library.chunks(doc_id)])
    if not kept:  # a full disk or a read-only library: the index is rebuilt next time
        logger.warning("could not keep the chunk index of %s", doc_id[:12])
    return have


def question_indexes(library: Library, engine: DocumentEngine, doc_id: str, state: Any) -> None:
    """Build and keep what a question reads besides the states (the engine's BM25, the chunk
    index), so that the first question in a new process does not build them."""
    try:
        chunk_index(library, doc_id)
        if getattr(engine, "bm25_index", None) is not None and float(getattr(engine.cfg, "bm25_weight", 0) or 0) > 0:
            engine.bm25_index(state)
    except Exception:  # an answer builds them anyway: a failure here must not fail the ingest
        logger.exception("could not build the question indexes of %s", doc_id[:12])


def ready_state(library: Library, engine: DocumentEngine, doc_id: str) -> Any:
    """The engine state of a fully prefilled document, or NotPrefilled with what to do."""
    from .errors import NotPrefilled

    adopt_older_states(library, engine)
    fp = str(engine.fingerprint)
    row = library.prefill_state(doc_id, fp)
    if row is None or row["status"] != "done":
        done = f" ({row['n_tokens_done']:,} of {row['n_tokens_total']:,} tokens)" if row else ""
        raise NotPrefilled(
            f"document {doc_id[:12]} is not prefilled by this model yet{done}; "
            f"run `drt-reader ingest` on its file to finish"
        )
    state = engine.open_state(state_dir(library.home, doc_id, fp))
    if int(state.n_tokens) < int(row["n_tokens_total"]):
        raise NotPrefilled(
            f"the prefilled state of document {doc_id[:12]} is missing or incomplete on disk; "
            "run `drt-reader ingest` on its file again"
        )
    return state
