"""GEMM through the BLAS library the core links (scipy-openblas32): the only GEMM the kernels
use, so no general matrix product is ever hand-written."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import contiguous, new_array

OP = "sgemm"


def _matrix(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise ArgumentTypeError(f"{OP}: {name} must be a real matrix, got {arr.dtype}")
    if arr.ndim != 2:
        raise ArgumentError(f"{OP}: {name} must be 2-D, got shape {arr.shape}")
    return contiguous(arr, OP, name, np.float32)


def sgemm(a: np.ndarray, b: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """alpha * a @ b for float32 matrices, computed by OpenBLAS."""
    a, b = _matrix(a, "a"), _matrix(b, "b")
    if a.shape[1] != b.shape[0]:
        raise ArgumentError(f"{OP}: a [m, k] and b [k, n] must chain, got {a.shape} and {b.shape}")
    if max(a.shape + b.shape) > 2**31 - 1:
        raise ArgumentError(
            f"{OP}: a {a.shape} and b {b.shape} exceed the 32-bit BLAS interface (2**31 - 1)"
        )
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{OP}: alpha must be a real number, got {type(alpha).__name__}")
    c = new_array((a.shape[0], b.shape[1]), np.float32, OP, "the output", zeros=True)
    core._C.sgemm(a, b, c, float(alpha), 0.0)
    return c
