"""The library schema: a blank database migrates to exactly these columns (update on purpose only)."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_utils import Database

from cli_io import UserError
from store import migrations
from store.errors import LibraryCorrupt, SchemaTooNew
from store.library import Library

EXPECTED = {
    "_migrations": {"id": int, "migration_set": str, "name": str, "applied_at": str},
    "documents": {
        "id": str,
        "title": str,
        "kind": str,
        "source_name": str,
        "n_bytes": int,
        "n_pages": int,
        "n_chars": int,
        "n_tokens": int,
        "n_chunks": int,
        "chunk_tokens": int,
        "tokenizer_fp": str,
        "warnings": str,
        "created_at": str,
    },
    "pages": {"doc_id": str, "number": int, "label": str, "char_start": int, "char_end": int, "text": str},
    "chunks": {
        "doc_id": str,
        "idx": int,
        "tok_start": int,
        "tok_end": int,
        "char_start": int,
        "char_end": int,
        "page_first": int,
        "page_last": int,
        "text": str,
    },
    "tokens": {"doc_id": str, "dtype": str, "ids": bytes},
    "outline": {"doc_id": str, "idx": int, "level": int, "title": str, "page": int},
    "prefill_states": {
        "doc_id": str,
        "model_fp": str,
        "status": str,
        "n_tokens_done": int,
        "n_chunks_done": int,
        "n_tokens_total": int,
        "state_dir": str,
        "last_error": str,
        "updated_at": str,
    },
    "traces": {"id": int, "doc_id": str, "model_fp": str, "kind": str, "data": str, "created_at": str},
    "questions": {"id": int, "doc_id": str, "text": str, "created_at": str},
    "answers": {
        "id": int,
        "question_id": int,
        "model_fp": str,
        "text": str,
        "evidence": str,
        "trace_id": int,
        "seconds": float,
        "created_at": str,
    },
}
APPLIED = ["m001_initial", "m002_chunks_fts", "m003_outline", "m004_drop_chunks_fts"]


def test_blank_database_migrates_to_the_expected_schema():
    db = Database(memory=True)
    applied = migrations.apply(db)
    assert applied == APPLIED
    tables = {t: db[t].columns_dict for t in db.table_names()}
    assert tables == EXPECTED
    assert db["documents"].pks == ["id"]
    assert db["pages"].pks == ["doc_id", "number"]
    assert db["chunks"].pks == ["doc_id", "idx"]
    assert db["prefill_states"].pks == ["doc_id", "model_fp"]
    assert migrations.applied(db) == APPLIED
    assert not [r for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()]
    assert migrations.apply(db) == []  # idempotent


def test_library_opens_in_wal_with_foreign_keys(drt_home):
    lib = Library(drt_home)
    try:
        assert lib._w.journal_mode == "wal"
        assert lib._w.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert lib._r.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert (drt_home / "library.db").exists()
    finally:
        lib.close()
    Library(drt_home).close()  # reopening applies nothing new


def test_unknown_migration_is_refused(drt_home):
    Library(drt_home).close()
    con = sqlite3.connect(drt_home / "library.db")
    con.execute(
        "INSERT INTO _migrations (migration_set, name, applied_at) VALUES ('drt-reader', 'm999_future', 'x')"
    )
    con.commit()
    con.close()
    with pytest.raises(SchemaTooNew, match="newer drt-reader"):
        Library(drt_home)


def test_corrupt_file_is_a_clear_error(drt_home):
    drt_home.mkdir(parents=True)
    (drt_home / "library.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LibraryCorrupt) as e:
        Library(drt_home)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)


def test_concurrent_first_opens_migrate_once(drt_home):
    """The CLI and the UI may create the library at the same moment: one migrates, both open."""
    import threading

    libs, errors = [], []

    def open_one() -> None:
        try:
            libs.append(Library(drt_home))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lib in libs:
        lib.close()
    assert not errors and len(libs) == 4
    con = sqlite3.connect(drt_home / "library.db")
    names = [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY id")]
    con.close()
    assert names == APPLIED


def test_the_full_text_index_is_dropped_from_a_library_that_has_it():
    """m004: a library made before it (m001-m003, chunks indexed by FTS5 with triggers) loses the
    index and its triggers; its chunks stay, and a chunk written after is written once."""
    db = Database(memory=True)
    migrations.migrations.apply(db, stop_before="m004_drop_chunks_fts")
    assert "chunks_fts" in db.table_names()
    db.execute("PRAGMA foreign_keys = OFF")  # the chunk alone: no document row needed for this
    row = {"doc_id": "d", "idx": 0, "tok_start": 0, "tok_end": 63, "char_start": 0, "char_end": 5,
           "page_first": 1, "page_last": 1, "text": "lemma"}
    db["chunks"].insert(row)
    assert db.execute("SELECT count(*) FROM chunks_fts").fetchone()[0] == 1
    assert migrations.apply(db) == ["m004_drop_chunks_fts"]
    assert not [t for t in db.table_names() if t.startswith("chunks_fts")]
    assert not db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    db["chunks"].insert({**row, "idx": 1})
    assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 2
