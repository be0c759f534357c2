"""The tolerance rule of the kernel tests, in one place.

A kernel result `tri` is compared with an fp32 reference `ref32` computed from the same input values.
Its error may be at most `ratio` (2) times the error of a same-dtype PyTorch implementation
(`gca_reference(..., upcast=False)` run in the input dtype), plus a tiny absolute floor for fp32,
where both errors are rounding noise (~1e-7 relative) and a ratio means nothing. Error is the
largest absolute difference from `ref32`.
"""

from __future__ import annotations

import torch

__all__ = ["max_abs_err", "assert_close_2x"]

# floor for fp32 results: 1e-5 of the reference's magnitude (fp32 eps is 1.2e-7; the backward
# recomputes P from the saved lse, which costs dW a few ulps of its largest terms)
FP32_FLOOR = 1e-5


def max_abs_err(ref: torch.Tensor, x: torch.Tensor) -> float:
    return (x.detach().double() - ref.detach().double()).abs().max().item()


def assert_close_2x(
    name: str,
    ref32: torch.Tensor,
    tri: torch.Tensor,
    same_dtype: torch.Tensor,
    *,
    ratio: float = 2.0,
) -> None:
    """Assert that `tri` is within `ratio` x the error of `same_dtype`, both measured against `ref32`.

    Args:
        name (str): what is compared ("o", "dq", "dw", ...), for the message.
        ref32 (torch.Tensor): fp32 reference.
        tri (torch.Tensor): the result under test (any float dtype; compared in fp64).
        same_dtype (torch.Tensor): the same quantity from a plain PyTorch implementation in tri's
            input dtype.
        ratio (float, Optional): Default: 2.0.
    """
    if tri.shape != ref32.shape or same_dtype.shape != ref32.shape:
        raise AssertionError(
            f"{name}: shapes differ: ref {tuple(ref32.shape)}, tri {tuple(tri.shape)}, "
            f"same-dtype {tuple(same_dtype.shape)}"
        )
    if not torch.isfinite(tri).all():
        raise AssertionError(f"{name}: non-finite values in the result under test")
    scale = max(1.0, ref32.detach().abs().max().item())
    floor = FP32_FLOOR * scale if tri.dtype == torch.float32 else 0.0
    e_tri = max_abs_err(ref32, tri)
    e_same = max_abs_err(ref32, same_dtype)
    bound = ratio * e_same + floor
    if e_tri > bound:
        raise AssertionError(
            f"{name}: error {e_tri:.3e} > {ratio:g} x same-dtype error {e_same:.3e} + floor {floor:.1e} "
            f"(reference magnitude {scale:.3e}, dtype {tri.dtype})"
        )
