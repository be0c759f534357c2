"""Errors shown to people: each prints as one line at the command line and as gr.Error in the UI."""


class DRTError(Exception):
    """Base of every error caused by input (a bad file, an unknown document, a bad option)."""

    user_error = True


class ModelNotFound(DRTError):
    pass


class CheckpointMismatch(DRTError):
    pass


class CorruptCheckpoint(DRTError):
    """model.safetensors cannot be read (truncated, bad header or offsets)."""
