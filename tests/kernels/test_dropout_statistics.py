"""The keep masks behave like independent Bernoulli(1 - p) draws."""

import numpy as np
import pytest

from fusebridge import kernels
from fusebridge.kernels.reference import unpack_mask

N = 1 << 20


def keeps(p, seed, offset, n=N):
    return unpack_mask(kernels.dropout_mask((n,), p, seed=seed, offset=offset), (n,))


@pytest.mark.parametrize("p", [0.01, 0.1, 0.3, 0.5, 0.9, 0.99])
def test_keep_rate_within_six_sigma(p):
    kept = int(keeps(p, seed=-7, offset=3).sum())
    q = 1 - float(np.float32(p))
    assert abs(kept - N * q) <= 6 * np.sqrt(N * q * (1 - q))


def correlation(a, b):
    return float(np.corrcoef(a.astype(np.float64), b.astype(np.float64))[0, 1])


@pytest.mark.parametrize("offset", [0, 1, 2**32 - 1, 2**63])
def test_adjacent_offsets_are_uncorrelated(offset):
    assert abs(correlation(keeps(0.5, 42, offset), keeps(0.5, 42, offset + 1))) < 5e-3


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, -2])
def test_adjacent_seeds_are_uncorrelated(seed):
    assert abs(correlation(keeps(0.3, seed, 0), keeps(0.3, seed + 1, 0))) < 5e-3


def test_neighbouring_elements_are_uncorrelated():
    k = keeps(0.5, 9, 9)
    for lag in (1, 2, 3, 4, 64):
        assert abs(correlation(k[:-lag], k[lag:])) < 5e-3
