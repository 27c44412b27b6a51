"""GEMM through the BLAS library the core links (scipy-openblas32): the only GEMM the kernels
use, so no general matrix product is ever hand-written."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels import core


def sgemm(a: np.ndarray, b: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """alpha * a @ b for float32 matrices, computed by OpenBLAS."""
    a = np.ascontiguousarray(a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ArgumentError(f"sgemm: a [m, k] and b [k, n] must chain, got {a.shape} and {b.shape}")
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    core._C.sgemm(a, b, c, float(alpha), 0.0)
    return c
