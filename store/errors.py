"""Errors of the store shown to people (one line at the command line, gr.Error in the UI).

`store` imports nothing from drt_core, so this is its own small hierarchy; every class carries
`user_error = True`, which is what app.py and the UI look for.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store error meant for people."""

    user_error = True

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


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
