"""Philox against Random123's published known-answer vectors and the worked examples of the
(seed, offset, idx) mapping (docs/dropout.md, "The bit contract"), both in
tests/fixtures/philox_kat.json."""

import json
from pathlib import Path

import numpy as np
import pytest

from fusebridge import ArgumentError, kernels
from fusebridge.kernels import reference

KAT = json.loads((Path(__file__).parents[1] / "fixtures" / "philox_kat.json").read_text())
VECTORS = [v for v in KAT["vectors"] if v["generator"] == "philox4x32"]
DERIVED = KAT["derived_onednn_s64"]["cases"]


def words(hexes):
    return np.array([int(h, 16) for h in hexes], np.uint32)


def test_vectors_cover_both_round_counts():
    assert {v["rounds"] for v in VECTORS} == {7, 10}


@pytest.mark.parametrize("v", VECTORS, ids=lambda v: f"r{v['rounds']}-line{v['line']}")
@pytest.mark.parametrize("impl", [kernels.philox4x32, reference.philox4x32], ids=["C", "numpy"])
def test_known_answers(v, impl):
    out = impl(words(v["ctr"]), words(v["key"]), v["rounds"])
    np.testing.assert_array_equal(out, words(v["expected"]))


def test_batch_and_key_broadcast():
    ctr = np.stack([words(v["ctr"]) for v in VECTORS if v["rounds"] == 10])
    keys = np.stack([words(v["key"]) for v in VECTORS if v["rounds"] == 10])
    np.testing.assert_array_equal(kernels.philox4x32(ctr, keys), reference.philox4x32(ctr, keys))
    shared_key = kernels.philox4x32(ctr, keys[0])
    np.testing.assert_array_equal(shared_key, reference.philox4x32(ctr, keys[0]))


@pytest.mark.parametrize("case", DERIVED, ids=lambda c: f"idx{c['idx']}")
def test_derived_mapping(case, each_isa):
    idx, seed, offset = case["idx"], case["seed"], case["offset"]
    block = kernels.philox4x32(words(case["counter"]), words(case["key"]))
    assert block[case["word"]] == int(case["r"], 16)
    assert reference.dropout_words(seed, offset, np.array([idx]))[0] == int(case["r"], 16)
    for p, expected in ((0.5, case["keep_p0_5"]), (0.1, case["keep_p0_1"])):
        # A one-element block at idx of a tensor that is idx + 1 long gets exactly idx's bit.
        mask = kernels.dropout_mask((1,), p, seed=seed, offset=offset, shard=((idx + 1,), (idx,)))
        assert bool(mask[0] & 1) == expected
        x = np.ones(1, np.float32)
        y = kernels.dropout(x, p, seed=seed, offset=offset, shard=((idx + 1,), (idx,)))
        assert (y[0] != 0) == expected


def test_bad_arguments():
    with pytest.raises(ArgumentError, match="counter"):
        kernels.philox4x32(np.zeros(3, np.uint32), np.zeros(2, np.uint32))
    with pytest.raises(ArgumentError, match="key"):
        kernels.philox4x32(np.zeros(4, np.uint32), np.zeros(2, np.float32))
    with pytest.raises(ArgumentError, match="rounds"):
        kernels.philox4x32(np.zeros(4, np.uint32), np.zeros(2, np.uint32), rounds=99)
