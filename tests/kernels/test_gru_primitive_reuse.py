"""Sentence lengths are data of each call, never part of the primitive: batches of any
lengths and sizes run on one GRU primitive (a server whose batches all differ would otherwise
miss the cache on every request), and each batch is right (reference.gru)."""

import numpy as np
import pytest
from test_gru import assert_matches_reference, random_gru

from fusebridge import kernels


@pytest.fixture
def cache_on():
    """The primitive cache with room (FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY may turn it off)."""
    before = kernels.cache_stats()["capacity"]
    kernels.set_cache_capacity(max(before, 64))
    yield
    kernels.set_cache_capacity(before)


@pytest.mark.parametrize("layout", ["lod", "tnc"])
def test_hundred_batches_of_different_lengths_create_one_primitive(cache_on, layout):
    rng = np.random.default_rng(16)
    weights = None
    before = kernels.cache_stats()
    word_counts = set()
    for _ in range(100):
        n = int(rng.integers(1, 12))
        lens = rng.integers(0, 20, n)
        steps = int(lens.max()) + int(rng.integers(0, 3))
        # IC 7 and OC 19: sizes no other test uses, so the one primitive is made here.
        x, args = random_gru(rng, 2, 7, 19, lens, layout=layout, steps=steps)
        if weights is None:
            weights = {k: args[k] for k in ("wx", "wh", "bias", "bias_h")}
        args |= weights
        assert_matches_reference(
            x, args, layout=layout, direction="bidirectional", linear_before_reset=True
        )
        word_counts.add(int(lens.sum()))
    after = kernels.cache_stats()
    assert len(word_counts) > 20  # the batches really differ, in N and in words
    assert after["misses"] - before["misses"] == 1
    assert after["size"] - before["size"] <= 1
    assert after["hits"] - before["hits"] == 99
