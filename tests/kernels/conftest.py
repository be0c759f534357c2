"""Kernel tests: the Triton kernels run in the CPU interpreter here, compiled on CUDA (-m gpu).

triton 3.9 reads TRITON_INTERPRET when a function is decorated with @triton.jit, not when it is
called, and also when triton.language itself is imported (tl.max, tl.sum, ... are @jit functions).
So an environment variable set by a conftest is fragile: whichever test module imports triton first
decides. `kernels/gca/triton_gca.py` therefore does not depend on it: its kernels are plain functions
wrapped per call, interpreted for CPU tensors (or when TRITON_INTERPRET=1 at call time) and compiled
for CUDA tensors, and they call no @jit helper. These tests need no global setting; the `interpret`
fixture sets TRITON_INTERPRET=1 for the tests of `backend="auto"`, which reads it at call time.
Setting it for the whole session would send every CPU `gca(backend="auto")` in the other test
directories to the (slow) interpreter and every CUDA call of -m gpu through it as well.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield


@pytest.fixture
def nan_empty(monkeypatch):
    """torch.empty / torch.empty_like return NaN-filled float tensors, so an output element that a
    kernel forgets to write fails the comparison (fla's tests/conftest.py does the same)."""
    empty, empty_like = torch.empty, torch.empty_like

    def nan_fill(t):
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: nan_fill(empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: nan_fill(empty_like(*a, **kw)))
    yield
