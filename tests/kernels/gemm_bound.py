"""The error bound a float32 matrix product is tested against, from k and the operands'
magnitudes instead of a fixed tolerance."""

from __future__ import annotations

import numpy as np


def gemm_error_bound(abs_product: np.ndarray, k: int, extra_terms: int = 0) -> np.ndarray:
    """|fl(sum of k products) - exact| <= gamma_k * sum |a_i b_i|, gamma_k = k u / (1 - k u),
    u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). abs_product is
    |a| @ |b| in float64 (plus |bias| for a fused bias: extra_terms = 1 more addition)."""
    n = k + extra_terms
    u = 2.0**-24
    return n * u / (1 - n * u) * abs_product
