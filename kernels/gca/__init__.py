"""Grouped Cross Attention: the operator of docs/design.md, Contract 1.

`gca(q, k, v, w, *, softmax_one=False, scale=None, backend="auto") -> o`

backend:
    "reference"  readable PyTorch (kernels/gca/reference.py), autograd through einsums; when a
                 gradient is wanted, the same forward saving only what the Triton kernel saves, with
                 a recomputing backward (kernels/gca/recompute.py: the memory of CPU training);
    "triton"     the fused Triton kernels (CUDA, or the CPU interpreter with TRITON_INTERPRET=1);
    "auto"       Triton on CUDA tensors, Triton on CPU when TRITON_INTERPRET=1, else the reference.
"""

from __future__ import annotations

import logging
import os

import torch

from .recompute import gca_recompute
from .reference import gca_naive_loop, gca_reference

__all__ = ["gca", "gca_reference", "gca_naive_loop", "resolve_backend"]

logger = logging.getLogger(__name__)


def resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in ("auto", "reference", "triton"):
        raise ValueError(f"backend must be 'auto', 'reference' or 'triton', got {backend!r}")
    if backend != "auto":
        return backend
    if device.type == "cuda":
        return "triton"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "triton"
    return "reference"


def gca(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    *,
    softmax_one: bool = False,
    scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Grouped Cross Attention.

    Args:
        q: [Z, H, M, d] query rows of one query chunk (M = 64 in training, 1..64 when decoding).
        k, v: [Z, H, K, N, d] the K retrieved chunks, N keys each.
        w: [Z, K] fusion weights of the retrieved chunks (normalised by the caller).
        softmax_one: add 1 to each chunk's softmax denominator.
        scale: Default: 1/sqrt(d).
        backend: "auto" | "reference" | "triton".
    Returns:
        o: [Z, H, M, d], dtype of q.
    """
    which = resolve_backend(backend, q.device)
    if which == "reference":
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, w)):
            return gca_recompute(q, k, v, w, softmax_one=softmax_one, scale=scale)
        return gca_reference(q, k, v, w, softmax_one=softmax_one, scale=scale)
    from .triton_gca import gca_triton  # lazy: triton is optional on CPU

    return gca_triton(q, k, v, w, softmax_one=softmax_one, scale=scale)
