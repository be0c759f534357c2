"""Errors shown to people: each prints as one line at the command line and as gr.Error in the UI."""

from cli_io import UserError


class DRTError(UserError):
    """Base of the model's and training's errors caused by input (a bad checkpoint, option or file)."""


class ModelNotFound(DRTError):
    pass


class CheckpointMismatch(DRTError):
    pass


class CorruptCheckpoint(DRTError):
    """model.safetensors cannot be read (truncated, bad header or offsets)."""
