"""Errors of asking, summarising and evaluating, shown to people: one line at the command line
(exit 2), gr.Error in the UI. A `cli_io.UserError`, like every package's errors; what goes wrong
with a document itself (not found, not prefilled, no such page) stays ingest's and store's."""

from __future__ import annotations

from cli_io import UserError


class QAError(UserError):
    """A bad question, option, page range, chunk number or question file (one line, exit status 2)."""
