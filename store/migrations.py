"""The library schema as an ordered list of migrations (sqlite-utils 4 `Migrations`).

Applied names are recorded in the `_migrations` table (one row per migration: id, migration_set,
name, applied_at); each migration runs in one transaction with its record. Never edit a migration
that has shipped: add the next one. tests/store/test_migrations.py pins the resulting columns.

Tables:
  documents       one row per file, id = sha256 of its bytes (the same file twice is one document)
  pages           page number (1-based), printed label, char span in the document text, text
  chunks          63-token chunks: token span, char span, page span, text
  tokens          the document's token ids (little-endian uint32 blob): resume needs no re-parse
  prefill_states  per (document, model fingerprint): pending / partial / done, progress counters
  traces          JSON: dependency maps, answer and summary retrieval traces
  questions, answers
  outline         a PDF's bookmarks (level, title, page), in file order
"""

from __future__ import annotations

from .sqlite import Database, Migrations


class _Migrations(Migrations):
    migrations_table = "_migrations"


migrations = _Migrations("drt-reader")


@migrations()
def m001_initial(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE documents (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            kind TEXT NOT NULL,
            source_name TEXT NOT NULL,
            n_bytes INTEGER NOT NULL,
            n_pages INTEGER NOT NULL,
            n_chars INTEGER NOT NULL,
            n_tokens INTEGER NOT NULL,
            n_chunks INTEGER NOT NULL,
            chunk_tokens INTEGER NOT NULL,
            tokenizer_fp TEXT NOT NULL,
            warnings TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL
        );
        CREATE TABLE pages (
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            number INTEGER NOT NULL,
            label TEXT NOT NULL,
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            text TEXT NOT NULL,
            PRIMARY KEY (doc_id, number)
        );
        CREATE TABLE chunks (
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            tok_start INTEGER NOT NULL,
            tok_end INTEGER NOT NULL,
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            page_first INTEGER NOT NULL,
            page_last INTEGER NOT NULL,
            text TEXT NOT NULL,
            PRIMARY KEY (doc_id, idx)
        );
        CREATE TABLE tokens (
            doc_id TEXT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
            dtype TEXT NOT NULL,
            ids BLOB NOT NULL
        );
        CREATE TABLE prefill_states (
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            model_fp TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'partial', 'done')),
            n_tokens_done INTEGER NOT NULL DEFAULT 0,
            n_chunks_done INTEGER NOT NULL DEFAULT 0,
            n_tokens_total INTEGER NOT NULL,
            state_dir TEXT NOT NULL,
            last_error TEXT,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (doc_id, model_fp)
        );
        CREATE TABLE traces (
            id INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            model_fp TEXT NOT NULL,
            kind TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX traces_doc_kind ON traces (doc_id, model_fp, kind);
        CREATE TABLE questions (
            id INTEGER PRIMARY KEY,
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX questions_doc ON questions (doc_id);
        CREATE TABLE answers (
            id INTEGER PRIMARY KEY,
            question_id INTEGER NOT NULL REFERENCES questions(id) ON DELETE CASCADE,
            model_fp TEXT NOT NULL,
            text TEXT NOT NULL,
            evidence TEXT NOT NULL,
            trace_id INTEGER REFERENCES traces(id) ON DELETE SET NULL,
            seconds REAL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX answers_question ON answers (question_id);
        """
    )


@migrations()
def m002_chunks_fts(db: Database) -> None:
    """Full-text search over chunk text ("find in book"); triggers keep it in step with chunks."""
    db["chunks"].enable_fts(["text"], create_triggers=True, tokenize="porter")


@migrations()
def m003_outline(db: Database) -> None:
    """A PDF's bookmarks: the parts a summary covers (documents stored before have none; their parts
    come from headings)."""
    db.executescript(
        """
        CREATE TABLE outline (
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            level INTEGER NOT NULL,
            title TEXT NOT NULL,
            page INTEGER NOT NULL,
            PRIMARY KEY (doc_id, idx)
        );
        """
    )


@migrations()
def m004_drop_chunks_fts(db: Database) -> None:
    """m002's full-text index goes: nothing read it (the question-time BM25 of drt_core/bm25.py has
    its own index), and its triggers wrote every chunk twice. Applied to a library that has it, the
    table and its triggers are dropped; the chunks stay."""
    if "chunks_fts" in db.table_names():
        db["chunks"].disable_fts()


def known_names() -> list[str]:
    return [m.name for m in migrations._migrations]


def apply(db: Database) -> list[str]:
    """Apply pending migrations; return the names applied now."""
    pending = [m.name for m in migrations.pending(db)]
    migrations.apply(db)
    return pending


def applied(db: Database) -> list[str]:
    return [m.name for m in migrations.applied(db)]
