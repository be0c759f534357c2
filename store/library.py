"""The library: documents, pages, chunks, prefill states, traces, questions and answers in
`$DRT_HOME/library.db` (sqlite, WAL), through sqlite-utils 4.

Concurrency (Gradio calls handlers from a thread pool; the CLI may run beside the UI):
- ONE writer connection per `Library`, guarded by a lock; every write is one `BEGIN IMMEDIATE`
  transaction, so a read-then-write never fails with SQLITE_BUSY_SNAPSHOT, and another process
  waits up to the busy timeout for the write lock (docs/reliability.md §4).
- Reads use one connection per thread (`threading.local`), created on first use. In WAL mode they
  never block the writer nor wait for it.
- `synchronous=FULL` (WAL: durable across power loss), `foreign_keys=ON`: deleting a document
  deletes its pages, chunks, tokens, states, traces, questions and answers.

A document's rows (documents, pages, chunks, tokens) are written in ONE transaction, so a failing
ingest never leaves half a document behind; prefill progress lives in `prefill_states` and is
updated separately (it is resumable).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import migrations
from .errors import (
    AmbiguousDocument,
    LibraryBusy,
    LibraryCorrupt,
    LibraryFull,
    SchemaTooNew,
    StoreError,
    UnknownDocument,
)
from .sqlite import Database

DB_NAME = "library.db"
BUSY_TIMEOUT_S = 30.0
STATUSES = ("pending", "partial", "done")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def ids_to_blob(ids: Sequence[int]) -> bytes:
    a = array("I", ids)  # uint32: vocabularies are far below 2**32
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def blob_to_ids(blob: bytes) -> list[int]:
    a = array("I")
    a.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tolist()


class Library:
    """The sqlite library under `home` (created, migrated and put in WAL mode on open)."""

    def __init__(self, home: str | Path):
        self.home = Path(home).expanduser()
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the data directory {self.home}: {e.strerror or e}") from e
        self.path = self.home / DB_NAME
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[Database] = []
        self._closed = False
        try:
            self._w = self._connect()
            self._w.enable_wal()
            # BEGIN IMMEDIATE: two processes opening a new library never both migrate it
            with self.write() as db:
                unknown = set(migrations.applied(db)) - set(migrations.known_names())
                if unknown:
                    raise SchemaTooNew(
                        f"{self.path} was written by a newer drt-reader (unknown migrations: "
                        f"{', '.join(sorted(unknown))}); upgrade drt-reader"
                    )
                migrations.apply(db)  # each migration nests as a savepoint
        except BaseException as e:
            w = getattr(self, "_w", None)
            if w is not None:
                w.close()
            self._closed = True
            if not isinstance(e, sqlite3.DatabaseError):
                raise
            msg = str(e)
            if "locked" in msg or "busy" in msg:
                raise LibraryBusy(f"{self.path} is locked by another process ({msg})") from e
            raise LibraryCorrupt(f"{self.path} cannot be opened as a library ({msg})") from e

    # -- connections ------------------------------------------------------------------------

    def _connect(self) -> Database:
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")
        return Database(conn, execute_plugins=False)

    @property
    def _r(self) -> Database:
        """This thread's read connection."""
        if self._closed:
            raise StoreError("the library is closed")
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._connect()
            db.conn.execute("PRAGMA query_only = ON")
            self._local.db = db
            with self._lock:
                self._readers.append(db)
        return db

    @contextmanager
    def write(self) -> Iterator[Database]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT) on the single writer connection."""
        with self._lock:
            if self._closed:
                raise StoreError("the library is closed")
            db = self._w
            try:
                db.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise LibraryBusy(f"the library is busy (another process is writing): {e}") from e
            try:
                yield db
                db.conn.execute("COMMIT")
            except BaseException as e:
                if db.conn.in_transaction:
                    db.rollback()
                if isinstance(e, sqlite3.OperationalError) and "full" in str(e):
                    raise LibraryFull(
                        f"the disk holding {self.path} is full ({e}); nothing of this change was "
                        "written: free some space and try again"
                    ) from e
                raise

    def _rows(self, sql: str, params: Sequence[Any] | dict = ()) -> list[dict]:
        cur = self._r.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row)) for row in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for db in self._readers:
                try:
                    db.close()
                except sqlite3.Error:  # pragma: no cover
                    pass
            self._readers.clear()
            self._w.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ------------------------------------------------------------------------------

    def add_document(
        self,
        doc: dict,
        pages: Sequence[dict],
        chunks: Sequence[dict],
        token_ids: Sequence[int],
        outline: Sequence[dict] = (),
    ) -> bool:
        """Write a document with its pages, chunks, token ids and outline (a PDF's bookmarks: level,
        title, page) in one transaction.

        `doc` has the `documents` columns except created_at (id = sha256 of the file). Returns
        False, writing nothing, when the document is already there (the same file twice).
        """
        row = dict(doc)
        row.setdefault("created_at", now())
        row["warnings"] = json.dumps(list(row.get("warnings") or []), ensure_ascii=False)
        doc_id = row["id"]
        with self.write() as db:
            if db.execute("SELECT 1 FROM documents WHERE id = ?", [doc_id]).fetchone():
                return False
            db["documents"].insert(row)
            db["pages"].insert_all(({"doc_id": doc_id, **p} for p in pages), batch_size=500)
            db["chunks"].insert_all(({"doc_id": doc_id, **c} for c in chunks), batch_size=500)
            db["tokens"].insert({"doc_id": doc_id, "dtype": "uint32le", "ids": ids_to_blob(token_ids)})
            if outline:
                db["outline"].insert_all(({"doc_id": doc_id, "idx": i, **o} for i, o in enumerate(outline)))
        return True

    def has_document(self, doc_id: str) -> bool:
        return bool(self._rows("SELECT 1 AS x FROM documents WHERE id = ?", [doc_id]))

    def document(self, doc_id: str) -> dict:
        rows = self._rows("SELECT * FROM documents WHERE id = ?", [doc_id])
        if not rows:
            raise UnknownDocument(f"no document {doc_id} in the library")
        return _doc(rows[0])

    def resolve(self, ref: str, *, partial: bool = True) -> str:
        """The full id of the one document that `ref` names: the start of its id (hexadecimal,
        case-insensitive), else its title or file name (with or without the extension), else (with
        `partial`) a part of one of them. Several documents matching raises AmbiguousDocument
        naming them. Deleting passes partial=False: a part of a name never removes a document."""
        p = " ".join((ref or "").split())
        low = p.lower()
        if not p:
            raise UnknownDocument("no document given: give its id or its title (see `drt-reader list`)")
        if all(c in "0123456789abcdef" for c in low):
            rows = self._rows(
                "SELECT id FROM documents WHERE id >= ? AND id < ? ORDER BY id LIMIT 3", [low, low + "g"]
            )
            if len(rows) > 1:
                raise AmbiguousDocument(f"{p} matches more than one document; give more of its id")
            if rows:
                return rows[0]["id"]
        docs = self._rows("SELECT id, title, source_name FROM documents ORDER BY created_at DESC, id")

        def names(d: dict) -> list[str]:
            src = d["source_name"] or ""
            return [" ".join(n.split()).lower() for n in (d["title"] or "", src, Path(src).stem) if n]

        rules = (lambda n: n == low, lambda n: low in n)  # the whole name first, then a part
        for match in rules if partial else rules[:1]:
            hits = [d for d in docs if any(match(n) for n in names(d))]
            if len(hits) == 1:
                return hits[0]["id"]
            if hits:
                some = ", ".join(f"{d['id'][:12]} ({d['title']})" for d in hits[:4])
                raise AmbiguousDocument(f"{p!r} names {len(hits)} documents: {some}; give its id")
        raise UnknownDocument(
            f"no document {p!r} in the library: give the start of its id (hexadecimal) or its "
            f"{'title' if partial else 'whole title or file name'} (see `drt-reader list`)"
        )

    def documents(self) -> list[dict]:
        """Every document (newest first), each with its prefill states by model fingerprint."""
        docs = [_doc(r) for r in self._rows("SELECT * FROM documents ORDER BY created_at DESC, id")]
        states: dict[str, list[dict]] = {}
        for s in self._rows("SELECT * FROM prefill_states ORDER BY updated_at"):
            states.setdefault(s["doc_id"], []).append(s)
        for d in docs:
            d["prefill"] = states.get(d["id"], [])
        return docs

    def delete_document(self, doc_id: str) -> bool:
        """Delete the document and everything that hangs off it. True if it was there."""
        with self.write() as db:
            cur = db.execute("DELETE FROM documents WHERE id = ?", [doc_id])
            return cur.rowcount > 0

    def set_title(self, doc_id: str, title: str) -> None:
        with self.write() as db:
            db.execute("UPDATE documents SET title = ? WHERE id = ?", [title, doc_id])

    # -- pages, chunks, tokens ---------------------------------------------------------------

    def pages(self, doc_id: str, with_text: bool = False, numbers: Sequence[int] | None = None) -> list[dict]:
        """Pages of a document (all, or those numbered in `numbers`), in page order."""
        cols = "number, label, char_start, char_end" + (", text" if with_text else "")
        if numbers is None:
            return self._rows(f"SELECT {cols} FROM pages WHERE doc_id = ? ORDER BY number", [doc_id])
        return self._rows_in(f"SELECT {cols} FROM pages WHERE doc_id = ? AND number IN", "number", doc_id, numbers)

    def outline(self, doc_id: str) -> list[dict]:
        """The document's bookmarks ({level, title, page}) in file order; [] when it has none."""
        return self._rows("SELECT level, title, page FROM outline WHERE doc_id = ? ORDER BY idx", [doc_id])

    def chunks(self, doc_id: str, indices: Sequence[int] | None = None) -> list[dict]:
        """Chunks of a document (all, or those in `indices`, in index order)."""
        cols = "idx, tok_start, tok_end, char_start, char_end, page_first, page_last, text"
        if indices is None:
            return self._rows(f"SELECT {cols} FROM chunks WHERE doc_id = ? ORDER BY idx", [doc_id])
        return self._rows_in(f"SELECT {cols} FROM chunks WHERE doc_id = ? AND idx IN", "idx", doc_id, indices)

    def _rows_in(self, select: str, key: str, doc_id: str, values: Sequence[int]) -> list[dict]:
        """`select` ("... WHERE doc_id = ? AND key IN") for the distinct `values`, in `key` order,
        500 at a time (SQLite's bound-parameter limit)."""
        want = sorted({int(v) for v in values})
        out: list[dict] = []
        for k in range(0, len(want), 500):
            part = want[k : k + 500]
            marks = ",".join("?" * len(part))
            out += self._rows(f"{select} ({marks}) ORDER BY {key}", [doc_id, *part])
        return out

    def token_ids(self, doc_id: str) -> list[int]:
        rows = self._rows("SELECT dtype, ids FROM tokens WHERE doc_id = ?", [doc_id])
        if not rows:
            raise UnknownDocument(f"no tokens stored for document {doc_id}")
        if rows[0]["dtype"] != "uint32le":
            raise StoreError(f"unknown token dtype {rows[0]['dtype']!r} for {doc_id}")
        return blob_to_ids(rows[0]["ids"])

    # -- prefill states -------------------------------------------------------------------------

    def prefill_state(self, doc_id: str, model_fp: str) -> dict | None:
        rows = self._rows(
            "SELECT * FROM prefill_states WHERE doc_id = ? AND model_fp = ?", [doc_id, model_fp]
        )
        return rows[0] if rows else None

    def set_prefill_state(
        self,
        doc_id: str,
        model_fp: str,
        *,
        status: str,
        n_tokens_done: int,
        n_chunks_done: int,
        n_tokens_total: int,
        state_dir: str,
        last_error: str | None = None,
    ) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        row = {
            "doc_id": doc_id,
            "model_fp": model_fp,
            "status": status,
            "n_tokens_done": int(n_tokens_done),
            "n_chunks_done": int(n_chunks_done),
            "n_tokens_total": int(n_tokens_total),
            "state_dir": str(state_dir),
            "last_error": last_error,
            "updated_at": now(),
        }
        with self.write() as db:
            db["prefill_states"].upsert(row, pk=("doc_id", "model_fp"))

    def complete_prefill(
        self,
        doc_id: str,
        model_fp: str,
        *,
        n_tokens_total: int,
        n_chunks: int,
        state_dir: str,
        dependency_map: Any,
    ) -> None:
        """Status "done" and the document's dependency map (a trace), in one transaction."""
        with self.write() as db:
            self._insert_trace(db, doc_id, model_fp, "dependency_map", dependency_map)
            db["prefill_states"].upsert(
                {
                    "doc_id": doc_id,
                    "model_fp": model_fp,
                    "status": "done",
                    "n_tokens_done": int(n_tokens_total),
                    "n_chunks_done": int(n_chunks),
                    "n_tokens_total": int(n_tokens_total),
                    "state_dir": str(state_dir),
                    "last_error": None,
                    "updated_at": now(),
                },
                pk=("doc_id", "model_fp"),
            )

    # -- traces, questions, answers -----------------------------------------------------------

    def add_trace(self, doc_id: str, model_fp: str, kind: str, data: Any) -> int:
        with self.write() as db:
            return self._insert_trace(db, doc_id, model_fp, kind, data)

    @staticmethod
    def _insert_trace(db: Database, doc_id: str, model_fp: str, kind: str, data: Any) -> int:
        cur = db.execute(
            "INSERT INTO traces (doc_id, model_fp, kind, data, created_at) VALUES (?, ?, ?, ?, ?)",
            [doc_id, model_fp, kind, json.dumps(data, ensure_ascii=False), now()],
        )
        return int(cur.lastrowid)

    def trace(self, trace_id: int) -> dict:
        rows = self._rows("SELECT * FROM traces WHERE id = ?", [int(trace_id)])
        if not rows:
            raise StoreError(f"no trace {trace_id}")
        return _trace(rows[0])

    def latest_trace(self, doc_id: str, model_fp: str, kind: str) -> dict | None:
        rows = self._rows(
            "SELECT * FROM traces WHERE doc_id = ? AND model_fp = ? AND kind = ? ORDER BY id DESC LIMIT 1",
            [doc_id, model_fp, kind],
        )
        return _trace(rows[0]) if rows else None

    def record_answer(
        self,
        doc_id: str,
        question: str,
        model_fp: str,
        answer: str,
        evidence: Any,
        trace: Any,
        seconds: float | None = None,
    ) -> dict:
        """Question, its trace and its answer in one transaction; returns their ids."""
        with self.write() as db:
            qid = int(
                db.execute(
                    "INSERT INTO questions (doc_id, text, created_at) VALUES (?, ?, ?)",
                    [doc_id, question, now()],
                ).lastrowid
            )
            tid = self._insert_trace(db, doc_id, model_fp, "answer", trace)
            aid = int(
                db.execute(
                    "INSERT INTO answers (question_id, model_fp, text, evidence, trace_id, seconds, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [qid, model_fp, answer, json.dumps(evidence, ensure_ascii=False), tid, seconds, now()],
                ).lastrowid
            )
        return {"question_id": qid, "answer_id": aid, "trace_id": tid}

    def conversation(self, doc_id: str) -> list[dict]:
        """Questions and answers about a document, oldest first."""
        rows = self._rows(
            """
            SELECT q.id AS question_id, q.text AS question, a.id AS answer_id, a.text AS answer,
                   a.evidence, a.trace_id, a.model_fp, a.seconds, q.created_at
            FROM questions q LEFT JOIN answers a ON a.question_id = q.id
            WHERE q.doc_id = ? ORDER BY q.id, a.id
            """,
            [doc_id],
        )
        for r in rows:
            r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else []
        return rows


def _doc(row: dict) -> dict:
    row = dict(row)
    row["warnings"] = json.loads(row.get("warnings") or "[]")
    return row


def _trace(row: dict) -> dict:
    row = dict(row)
    row["data"] = json.loads(row["data"])
    return row
