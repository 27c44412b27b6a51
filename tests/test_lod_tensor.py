"""LoDTensor's checks hold for its whole life. Lengths whose sum wraps past int64 are refused
with the exact sum (before: offsets [0, 2**63 - 1, -2, 302] passed and lod_to_padded
segfaulted); the offsets are the tensor's own read-only copy and no attribute can be rebound
(before: a caller could change t.offsets after the check, and a Session then failed inside a
kernel with "offsets must be nondecreasing")."""

import copy
import pickle

import numpy as np
import pytest

import fusebridge as fb
from fusebridge import lod_tensor
from fusebridge.models import assets

ROWS = np.zeros((302, 4), np.float32)


@pytest.mark.parametrize(
    ("lengths", "match"),
    [
        ([2**63 - 1, 2**63 - 1, 304], r"the 3 lengths sum to 18446744073709551918"),
        ([2**63 - 1, 2**63 - 1, 2**63 - 1, 305], r"the 4 lengths sum to 27670116110564327726"),
        ([300, -1, 3], r"lengths must be non-negative integers, got -1 at index 1"),
        ([-(2**63), 302], r"got -9223372036854775808 at index 0"),
        ([2**64], r"lengths must fit in int64, got 18446744073709551616"),
        ([302, 2**63], r"lengths must fit in int64, got 9223372036854775808"),
        ([1.5, 300.5], r"lengths must be an integer array, got float64"),
        ([[1, 2], [3]], r"lengths must be a 1-D array of integers"),
    ],
)
def test_lengths_are_checked_without_wrapping(lengths, match):
    with pytest.raises(fb.Error, match=f"^LoDTensor: .*{match}"):
        fb.LoDTensor(ROWS, lengths=lengths)


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([0, 2**63 - 1, -2, 302], "offsets must be nondecreasing, got 9223372036854775807 then -2"),
        ([0, -(2**63), 302], "offsets must be nondecreasing"),
        ([5, 302], "offsets must start at 0, got 5"),
        ([0, 303], r"offsets must end at the number of rows \(302\), got 303"),
        ([0, 2**64], "offsets must fit in int64"),
    ],
)
def test_offsets_are_checked_without_wrapping(offsets, match):
    with pytest.raises(fb.ArgumentError, match=f"^LoDTensor: {match}"):
        fb.LoDTensor(ROWS, offsets=offsets)


def test_the_offsets_are_a_read_only_copy():
    given = np.array([0, 100, 302])
    t = fb.LoDTensor(ROWS, offsets=given)
    given[1] = 400  # the caller's array stays the caller's
    assert t.offsets.tolist() == [0, 100, 302]
    assert not t.offsets.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        t.offsets[1] = 400
    assert not np.shares_memory(t.offsets, given)
    from_lengths = fb.LoDTensor(ROWS, lengths=[100, 202])
    assert not from_lengths.offsets.flags.writeable and from_lengths.offsets.dtype == np.int64


@pytest.mark.parametrize("name", ["data", "offsets", "_data", "_offsets", "lengths", "extra"])
def test_no_attribute_can_be_rebound(name):
    t = fb.LoDTensor(ROWS, lengths=[302])
    with pytest.raises(AttributeError):
        setattr(t, name, np.array([0, 1]))
    assert t.offsets.tolist() == [0, 302] and t.data.shape == (302, 4)


def test_reshaping_the_callers_array_leaves_the_tensor_as_checked():
    data = np.zeros((6, 2), np.float32)
    t = fb.LoDTensor(data, lengths=[2, 4])
    data.shape = (3, 4)
    assert t.data.shape == (6, 2)
    data[0, 0] = 5  # values are shared: only the checked shape is the tensor's own
    assert t.data[0, 0] == 5


def test_copies_and_pickles_are_rebuilt_through_the_checks():
    t = fb.LoDTensor(ROWS, lengths=[100, 202])
    for other in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert other.offsets.tolist() == [0, 100, 302] and not other.offsets.flags.writeable


def test_checked_already_takes_a_read_only_copy_of_writeable_offsets():
    offsets = np.array([0, 2, 302])
    t = fb.LoDTensor._checked_already(ROWS, offsets)
    offsets[1] = 400
    assert t.offsets.tolist() == [0, 2, 302] and not t.offsets.flags.writeable
    frozen = fb.LoDTensor(ROWS, lengths=[2, 300]).offsets
    assert fb.LoDTensor._checked_already(ROWS, frozen).offsets is frozen  # nothing to copy


@pytest.fixture(scope="module")
def tagger_session():
    optimized, _ = fb.optimize(fb.load(assets.path("tagger")))
    return fb.Session(optimized)


def test_a_session_runs_a_tensor_whose_offsets_someone_tried_to_change(tagger_session):
    ids = np.random.default_rng(0).integers(0, 1000, (14, 1))
    feeds = {"words": fb.LoDTensor(ids, lengths=[4, 0, 9, 1])}
    want = tagger_session.run(feeds)
    with pytest.raises(ValueError, match="read-only"):
        feeds["words"].offsets[1] = 9
    with pytest.raises(AttributeError):
        feeds["words"].offsets = np.array([0, 9, 4, 13, 14])
    got = tagger_session.run(feeds)
    for name, value in got.items():
        np.testing.assert_array_equal(value.data, want[name].data)
        assert value.offsets.tolist() == [0, 4, 4, 13, 14]


def test_session_outputs_keep_the_fast_path(tagger_session, monkeypatch):
    """Outputs whose offsets a feed brought in are not checked again (LoDTensor's
    _checked_already), and are read-only like every LoDTensor's."""
    ids = np.random.default_rng(1).integers(0, 1000, (14, 1))
    feeds = {"words": fb.LoDTensor(ids, lengths=[4, 0, 9, 1])}

    def no_second_check(*args, **kwargs):
        raise AssertionError("a feed's offsets were checked again")

    monkeypatch.setattr(lod_tensor, "as_offsets", no_second_check)
    monkeypatch.setattr(lod_tensor, "offsets_from_lengths", no_second_check)
    for value in tagger_session.run(feeds).values():
        assert value.offsets.tolist() == [0, 4, 4, 13, 14]
        assert not value.offsets.flags.writeable
