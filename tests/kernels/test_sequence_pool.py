"""sequence_pool against the NumPy oracle (reference.sequence_pool, a plain loop per sentence)
and against Paddle's own `sequence_pool` op in a legacy static program."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.error_bounds import assert_within, pool_bound
from helpers.paddle_oracle import legacy_static, paddle_or_skip
from hypothesis import given
from hypothesis import strategies as st

from fusebridge import ArgumentError, ArgumentTypeError, kernels
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_pool import POOLTYPES

NAMES = POOLTYPES + tuple(p.lower() for p in POOLTYPES)


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def check(x, offsets, pooltype, pad_value):
    out = kernels.sequence_pool(x, offsets, pooltype, pad_value)
    expected = reference.sequence_pool(x, offsets, pooltype, pad_value)
    assert out.dtype == x.dtype and out.shape == expected.shape
    assert out.shape == (len(offsets) - 1,) + x.shape[1:]
    if pooltype.upper() in ("MAX", "LAST", "FIRST"):
        np.testing.assert_array_equal(out, expected)  # picks, no arithmetic
    else:
        assert_within(out, expected, pool_bound(x, offsets, pooltype.upper()))


@given(
    lengths=st.lists(st.integers(0, 6), max_size=7),
    tail=st.sampled_from([(), (1,), (5,), (2, 3), (0,)]),
    dtype=st.sampled_from([np.float32, np.float64]),
    pooltype=st.sampled_from(NAMES),
    pad_value=st.floats(-1e6, 1e6, width=32),
    seed=st.integers(0, 2**32 - 1),
)
def test_matches_reference(lengths, tail, dtype, pooltype, pad_value, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((sum(lengths),) + tail).astype(dtype)
    check(x, offsets_of(lengths), pooltype, pad_value)


def test_empty_sentences_give_pad_value_in_every_pooltype():
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 4
    offsets = offsets_of([0, 2, 0, 3, 0])
    for pooltype in POOLTYPES:
        out = kernels.sequence_pool(x, offsets, pooltype, pad_value=7.5)
        assert (out[[0, 2, 4]] == 7.5).all(), pooltype
    no_words = np.zeros((0, 3), np.float64)
    np.testing.assert_array_equal(
        kernels.sequence_pool(no_words, [0, 0], "MAX", -1), -np.ones((1, 3))
    )
    assert kernels.sequence_pool(no_words, [0], "SUM").shape == (0, 3)


def test_pad_value_is_rounded_to_float32_as_paddle_does():
    out = kernels.sequence_pool(np.zeros((1, 2)), [0, 1, 1], "SUM", pad_value=0.1)
    assert out.dtype == np.float64 and out[1, 0] == np.float64(np.float32(0.1))


def test_errors_name_op_argument_and_expectation():
    x = np.zeros((5, 3), np.float32)
    offsets = offsets_of([2, 3])
    cases = [
        ({"pooltype": "Sum"}, ArgumentError, "pooltype must be one of"),
        ({"pooltype": "MIN"}, ArgumentError, "pooltype must be one of"),
        ({"x": x.astype(np.int64)}, ArgumentTypeError, "x must be float32 or float64"),
        ({"x": np.float32(1)}, ArgumentError, "x must be"),
        ({"offsets": [0, 2, 4]}, ArgumentError, "offsets must end at the number of rows"),
        ({"offsets": [1, 5]}, ArgumentError, "offsets must start at 0"),
        ({"pad_value": "0"}, ArgumentTypeError, "pad_value must be a real number"),
        ({"pad_value": True}, ArgumentTypeError, "pad_value must be a real number"),
    ]
    for change, error, message in cases:
        call = {"x": x, "offsets": offsets, "pooltype": "SUM", **change}
        with pytest.raises(error, match=f"^sequence_pool: {message}"):
            kernels.sequence_pool(**call)


# Paddle's sequence_pool op as the oracle: legacy program, LoD feed.


@functools.cache
def _paddle_program(tail: tuple[int, ...], dtype: str, pooltype: str, pad_value: float):
    paddle = paddle_or_skip()
    with legacy_static(paddle):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, *tail], dtype, lod_level=1)
            block = main.global_block()
            out = block.create_var(name="out", dtype=dtype)
            # MaxIndex must exist as a variable even when is_test leaves it unwritten.
            max_index = block.create_var(name="max_index", dtype="int32")
            block.append_op(
                type="sequence_pool",
                inputs={"X": [x]},
                outputs={"Out": [out], "MaxIndex": [max_index]},
                attrs={"pooltype": pooltype, "is_test": True, "pad_value": pad_value},
            )
        return main, out, paddle.static.Executor(paddle.CPUPlace())


def paddle_sequence_pool(x, lengths, pooltype, pad_value) -> np.ndarray:
    paddle = paddle_or_skip()
    main, out, exe = _paddle_program(x.shape[1:], str(x.dtype), pooltype, pad_value)
    with legacy_static(paddle):
        lod_x = paddle.base.core.DenseTensor()
        lod_x.set(x, paddle.CPUPlace())
        lod_x.set_recursive_sequence_lengths([[int(n) for n in lengths]])
        (result,) = exe.run(main, feed={"x": lod_x}, fetch_list=[out], return_numpy=False)
        return np.array(result)


# Unsorted, with empty sentences first, inside and last. Paddle refuses fewer words than
# sentences ("first dimension of Input(X) must be large than batch size"), so there are more.
LENGTHS = [0, 3, 1, 0, 4, 2, 0]


@pytest.mark.paddle
@pytest.mark.parametrize("pooltype", POOLTYPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tail", [(3,), (2, 3)], ids=["2d", "3d"])
def test_matches_paddle(pooltype, dtype, tail):
    rng = np.random.default_rng(len(pooltype) + len(tail))
    x = rng.standard_normal((sum(LENGTHS),) + tail).astype(dtype)
    pad_value = -0.1  # not a float32 number: Paddle's attribute rounds it
    expected = paddle_sequence_pool(x, LENGTHS, pooltype, pad_value)
    got = kernels.sequence_pool(x, offsets_of(LENGTHS), pooltype, pad_value)
    assert got.dtype == expected.dtype and got.shape == expected.shape == (len(LENGTHS),) + tail
    assert_within(got, expected, 2 * pool_bound(x, offsets_of(LENGTHS), pooltype))
    assert (got[[0, 3, 6]] == expected[[0, 3, 6]]).all()  # the pad, bit for bit
