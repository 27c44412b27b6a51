"""fusebridge.random: key, fold_in and split as docs/dropout.md defines them, checked
against the definition written out here with the NumPy Philox of kernels/reference.py (not the
compiled philox4x32 the module uses)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebridge as fb
from fusebridge import random as fbrandom
from fusebridge.kernels import reference

M64 = 2**64


def fold_in_by_hand(seed: int, offset: int, data: int) -> int:
    """docs/dropout.md: words 0 and 1 of Philox4x32-10 with key
    (s_lo ^ 0x6A09E667, s_hi ^ 0xBB67AE85) and counter (o_lo, o_hi, d_lo, d_hi);
    s' = (w1 << 32) | w0."""
    data %= M64
    key = np.array([(seed & 0xFFFFFFFF) ^ 0x6A09E667, (seed >> 32) ^ 0xBB67AE85], np.uint64)
    counter = np.array(
        [offset & 0xFFFFFFFF, offset >> 32, data & 0xFFFFFFFF, data >> 32], np.uint64
    )
    w = reference.philox4x32(counter, key)
    return (int(w[1]) << 32) | int(w[0])


# (seed, offset, data) -> new seed, from fold_in_by_hand once; pinned so that the definition
# written above cannot drift along with the module.
PINNED = [
    (0, 0, 0, 0x5701D30350355DE9),
    (42, 0, 1, 0x89CB8FF3332376B4),
    (M64 - 1, 0, -1, 0x0C42503D371FF9B8),
    (0x0123456789ABCDEF, 2**40 + 3, 2**63, 0x0DD2935FC08589BB),
]


@pytest.mark.parametrize("seed, offset, data, want", PINNED)
def test_fold_in_vectors(seed, offset, data, want):
    assert fold_in_by_hand(seed, offset, data) == want
    assert fbrandom.fold_in(fbrandom.Key(seed, offset), data) == fbrandom.Key(want, 0)


def test_fold_in_matches_the_definition_over_many_inputs():
    rng = np.random.default_rng(1)
    for _ in range(200):
        seed, offset = (int(v) for v in rng.integers(0, M64, 2, dtype=np.uint64))
        data = int(rng.integers(-(2**63), 2**63, dtype=np.int64))
        got = fbrandom.fold_in(fbrandom.Key(seed, offset), data)
        assert got == fbrandom.Key(fold_in_by_hand(seed, offset, data), 0)


def test_key_and_split():
    assert fbrandom.key(7) == fbrandom.Key(7, 0)
    k = fbrandom.Key(0xFEDCBA9876543210, 5)
    assert fbrandom.split(k, 5) == [fbrandom.fold_in(k, i) for i in range(5)]
    assert fbrandom.split(k) == fbrandom.split(k, 2)
    assert fbrandom.split(k, 0) == []
    children = fbrandom.split(k, 64)
    assert len({c.seed for c in children}) == 64  # siblings never share a seed
    # The whitening keeps derived seeds apart from the dropout words of the same (seed, offset).
    words = reference.dropout_words(k.seed, k.offset, np.arange(2))
    assert children[0].seed != (int(words[1]) << 32) | int(words[0])


def test_negative_patterns_are_twos_complement():
    assert fbrandom.key(-1) == fbrandom.key(M64 - 1)
    assert fbrandom.Key(-(2**63), -2) == fbrandom.Key(2**63, M64 - 2)
    k = fbrandom.key(3)
    assert fbrandom.fold_in(k, -1) == fbrandom.fold_in(k, M64 - 1)
    # A model's int64 rng_offset_out (a 0-d array) is accepted as it comes.
    assert fbrandom.Key(3, np.array(-1, np.int64)) == fbrandom.Key(3, M64 - 1)
    assert fbrandom.as_int64(M64 - 1) == -1 and fbrandom.as_int64(2**63 - 1) == 2**63 - 1


def test_keys_are_values():
    a, b = fbrandom.Key(1, 2), fbrandom.Key(1, 2)
    assert a == b and hash(a) == hash(b) and len({a, b, fbrandom.Key(1, 3)}) == 2
    with pytest.raises(AttributeError):
        a.seed = 3
    assert repr(fbrandom.Key(0xAB, 9)) == "Key(seed=0x00000000000000ab, offset=9)"
    # fold_in and split do not change the key they are given (no hidden state).
    before = fbrandom.Key(11, 4)
    first = fbrandom.split(before, 3)
    assert before == fbrandom.Key(11, 4) and fbrandom.split(before, 3) == first


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: fbrandom.key(-(2**63) - 1), fb.ArgumentError),
        (lambda: fbrandom.key(M64), fb.ArgumentError),
        (lambda: fbrandom.key(1.0), fb.ArgumentTypeError),
        (lambda: fbrandom.key("1"), fb.ArgumentTypeError),
        (lambda: fbrandom.key(True), fb.ArgumentTypeError),
        (lambda: fbrandom.Key(1, M64), fb.ArgumentError),
        (lambda: fbrandom.Key(None, 0), fb.ArgumentTypeError),
        (lambda: fbrandom.fold_in(fbrandom.key(1), -(2**63) - 1), fb.ArgumentError),
        (lambda: fbrandom.fold_in(fbrandom.key(1), 0.5), fb.ArgumentTypeError),
        (lambda: fbrandom.fold_in((1, 0), 0), fb.ArgumentTypeError),
        (lambda: fbrandom.split(fbrandom.key(1), -1), fb.ArgumentError),
        (lambda: fbrandom.split(fbrandom.key(1), 2.0), fb.ArgumentTypeError),
        (lambda: fbrandom.split(42, 2), fb.ArgumentTypeError),
    ],
)
def test_bad_input(call, error):
    with pytest.raises(error):
        call()
