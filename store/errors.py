"""Errors of the store shown to people (one line at the command line, gr.Error in the UI).

`store` imports nothing from drt_core, so this is its own small hierarchy under the one root of
errors meant for people, `cli_io.UserError` (what app.py catches).
"""

from __future__ import annotations

from cli_io import UserError


class StoreError(UserError):
    """Base of every store error meant for people."""


class UnknownDocument(StoreError):
    """No document has this id or id prefix."""


class AmbiguousDocument(StoreError):
    """An id prefix matches more than one document."""


class LibraryCorrupt(StoreError):
    """library.db cannot be opened as a SQLite database."""


class SchemaTooNew(StoreError):
    """library.db has migrations this version of drt-reader does not know."""


class LibraryBusy(StoreError):
    """Another process held the write lock for longer than the busy timeout."""


class LibraryFull(StoreError):
    """The disk (or the database's size limit) is full: the write was rolled back."""


class StateTooOld(StoreError):
    """A prefilled state saved before the chunks' token ids were stored: it cannot be read on; the
    document is prefilled again from its stored token ids (ingest does it)."""
