"""LoD <-> padded reorders and the offsets / seq_lens checks the kernels share."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusebridge import ArgumentError, ArgumentTypeError
from fusebridge.kernels.sequence_layout import (
    as_offsets,
    as_seq_lens,
    lod_to_padded,
    padded_to_lod,
)

LAYOUTS = ["tnc", "ntc"]
PAD_SIDES = ["right", "left"]


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


# Sentences of 2, 0, 3 and 1 words; word w holds w + 1 so that padding (0) stands out.
HAND_X = np.arange(1, 7, dtype=np.float32)
HAND_OFFSETS = [0, 2, 2, 5, 6]
HAND_NTC = {
    "right": [[1, 2, 0], [0, 0, 0], [3, 4, 5], [6, 0, 0]],
    "left": [[0, 1, 2], [0, 0, 0], [3, 4, 5], [0, 0, 6]],
}


@pytest.mark.parametrize("pad_side", PAD_SIDES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_hand_case_pad_placement(layout, pad_side):
    padded, lens = lod_to_padded(HAND_X, HAND_OFFSETS, layout, pad_side)
    expected = np.array(HAND_NTC[pad_side], np.float32)
    np.testing.assert_array_equal(padded, expected if layout == "ntc" else expected.T)
    assert padded.dtype == np.float32
    assert lens.dtype == np.int64
    np.testing.assert_array_equal(lens, [2, 0, 3, 1])
    data, offsets = padded_to_lod(padded, lens, layout, pad_side)
    np.testing.assert_array_equal(data, HAND_X)
    np.testing.assert_array_equal(offsets, HAND_OFFSETS)
    assert offsets.dtype == np.int64


@given(
    lengths=st.lists(st.integers(0, 6), max_size=6),
    trailing=st.lists(st.integers(0, 3), max_size=2),
    layout=st.sampled_from(LAYOUTS),
    pad_side=st.sampled_from(PAD_SIDES),
)
def test_round_trip(lengths, trailing, layout, pad_side):
    words = sum(lengths)
    x = np.random.default_rng(words).standard_normal((words, *trailing))
    offsets = offsets_of(lengths)
    padded, lens = lod_to_padded(x, offsets, layout, pad_side)
    t = max(lengths, default=0)
    n = len(lengths)
    assert padded.shape == ((t, n) if layout == "tnc" else (n, t)) + tuple(trailing)
    np.testing.assert_array_equal(lens, lengths)
    # Every sentence, read back where pad_side says it sits; zeros around it.
    ntc = padded if layout == "ntc" else padded.swapaxes(0, 1)
    for i, length in enumerate(lengths):
        start = 0 if pad_side == "right" else t - length
        np.testing.assert_array_equal(
            ntc[i, start : start + length], x[offsets[i] : offsets[i + 1]]
        )
        assert not ntc[i, :start].any() and not ntc[i, start + length :].any()
    data, back = padded_to_lod(padded, lens, layout, pad_side)
    np.testing.assert_array_equal(data, x)
    np.testing.assert_array_equal(back, offsets)


@pytest.mark.parametrize("pad_side", PAD_SIDES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_padded_to_lod_ignores_the_padding(layout, pad_side):
    """Whatever the padded positions hold (ONNX Runtime leaves garbage there in some ops),
    only the real steps come out."""
    rng = np.random.default_rng(1)
    lens = np.array([3, 0, 5, 2])
    padded = rng.standard_normal((5, 4, 2) if layout == "tnc" else (4, 5, 2))
    data, offsets = padded_to_lod(padded, lens, layout, pad_side)
    clean, _ = lod_to_padded(data, offsets, layout, pad_side)
    mask = np.arange(5)[None, :] < lens[:, None]  # [N, T], right-padded
    if pad_side == "left":
        mask = mask[:, ::-1]
    if layout == "tnc":
        mask = mask.T
    np.testing.assert_array_equal(clean, np.where(mask[..., None], padded, 0))


def test_seq_lens_none_means_every_step():
    padded = np.arange(24.0).reshape(3, 4, 2)  # tnc: T = 3, N = 4
    data, offsets = padded_to_lod(padded, None)
    np.testing.assert_array_equal(offsets, [0, 3, 6, 9, 12])
    np.testing.assert_array_equal(data, padded.swapaxes(0, 1).reshape(12, 2))


def test_no_sentences_and_only_empty_sentences():
    padded, lens = lod_to_padded(np.zeros((0, 3)), [0])
    assert padded.shape == (0, 0, 3) and lens.shape == (0,)
    padded, lens = lod_to_padded(np.zeros((0, 3)), [0, 0, 0], "ntc")
    assert padded.shape == (2, 0, 3)
    data, offsets = padded_to_lod(padded, lens, "ntc")
    assert data.shape == (0, 3)
    np.testing.assert_array_equal(offsets, [0, 0, 0])


def test_validators_return_contiguous_int64():
    offsets = as_offsets(np.array([0, 2, 2, 5], np.int32)[::1], "op", 5)
    assert offsets.dtype == np.int64 and offsets.flags.c_contiguous
    strided = np.array([0, 9, 1, 9, 4], np.uint8)[::2]
    np.testing.assert_array_equal(as_offsets(strided, "op", 4), [0, 1, 4])
    assert as_offsets(strided, "op", 4).flags.c_contiguous
    lens = as_seq_lens([3, 0, 1], "op", 3, 3)
    assert lens.dtype == np.int64 and lens.flags.c_contiguous
    np.testing.assert_array_equal(as_seq_lens(None, "op", 3, 7), [7, 7, 7])


@pytest.mark.parametrize(
    ("offsets", "rows", "error", "match"),
    [
        ([[0, 2]], 2, ArgumentError, r"offsets must be a 1-D integer array, got shape \(1, 2\)"),
        ([0.0, 2.0], 2, ArgumentTypeError, "offsets must be an integer array, got float64"),
        ([False, True], 1, ArgumentTypeError, "offsets must be an integer array, got bool"),
        ([], 0, ArgumentError, "offsets must have N\\+1 >= 1 entries"),
        ([1, 2], 2, ArgumentError, "offsets must start at 0, got 1"),
        ([0, 3, 2, 4], 4, ArgumentError, "offsets must be nondecreasing, got 3 then 2 at index 1"),
        ([0, 2, 5], 4, ArgumentError, r"offsets must end at the number of rows \(4\), got 5"),
        (np.array([0, 2**64 - 1], np.uint64), 2, ArgumentError, "offsets must fit in int64"),
    ],
)
def test_as_offsets_rejects(offsets, rows, error, match):
    with pytest.raises(error, match=match) as info:
        as_offsets(offsets, "fusion_gru", rows)
    assert str(info.value).startswith("fusion_gru: ")


@pytest.mark.parametrize(
    ("seq_lens", "error", "match"),
    [
        (
            [2, 2],
            ArgumentError,
            r"seq_lens must have one entry per sentence \(3\), got shape \(2,\)",
        ),
        ([[1, 2, 3]], ArgumentError, "seq_lens must be a 1-D integer array"),
        ([1.0, 2.0, 3.0], ArgumentTypeError, "seq_lens must be an integer array, got float64"),
        ([1, -1, 2], ArgumentError, "seq_lens must not be negative, got -1"),
        ([1, 5, 2], ArgumentError, "seq_lens must not exceed the padded length 4, got 5"),
    ],
)
def test_as_seq_lens_rejects(seq_lens, error, match):
    with pytest.raises(error, match=match) as info:
        as_seq_lens(seq_lens, "fusion_gru", 3, 4)
    assert str(info.value).startswith("fusion_gru: ")


def test_reorders_reject_bad_arguments():
    x = np.zeros((3, 2))
    with pytest.raises(ArgumentError, match="lod_to_padded: layout must be one of"):
        lod_to_padded(x, [0, 3], layout="nct")
    with pytest.raises(ArgumentError, match="lod_to_padded: pad_side must be one of"):
        lod_to_padded(x, [0, 3], pad_side="middle")
    with pytest.raises(ArgumentError, match=r"lod_to_padded: offsets must end .* \(3\), got 2"):
        lod_to_padded(x, [0, 2])
    with pytest.raises(ArgumentError, match="padded_to_lod: seq_lens must not exceed"):
        padded_to_lod(np.zeros((2, 1, 4)), [3])
    with pytest.raises(ArgumentError, match="padded_to_lod: padded must have at least 2"):
        padded_to_lod(np.zeros(3), [1])
