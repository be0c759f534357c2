"""Errors shown to people: one line at the command line (exit 2), gr.Error in the UI.

Every class here is a `cli_io.UserError` (app.py prints those without a traceback, on one line).
Messages say what happened and, where there is one, what to do about it.
"""

from __future__ import annotations

from cli_io import UserError


class IngestError(UserError):
    """Base of every ingest error caused by the input (a bad file, a wrong password, a limit)."""


class UnsupportedFile(IngestError):
    """Not a PDF, an EPUB or decodable text (decided by the content, never by the name)."""


class EmptyDocument(IngestError):
    """The file is empty, or nothing in it is text (a scanned PDF without OCR, say)."""


class PasswordRequired(IngestError):
    """An encrypted PDF and no password was given."""


class WrongPassword(IngestError):
    """An encrypted PDF and the password given does not open it."""


class DamagedFile(IngestError):
    """MuPDF could not open or repair the file."""


class ParseTimeout(IngestError):
    """Parsing ran past its time limit; the worker process was killed."""


class ParseOutOfMemory(IngestError):
    """Parsing ran past its memory limit."""


class ParseCrashed(IngestError):
    """The parser process died (a signal from MuPDF's C code, say)."""


class TooLarge(IngestError):
    """The file or its text is past a configured limit."""


class NotPrefilled(IngestError):
    """The document has not been (fully) prefilled by the current model."""


class PrefillBusy(IngestError):
    """Another process (or another tab of the UI) is prefilling the same document with this model."""


class EngineUnavailable(IngestError):
    """The inference engine (drt_core.engine) or the model cannot be loaded."""


class Cancelled(IngestError):
    """The user cancelled; what was done is kept."""
