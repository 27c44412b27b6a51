"""Paddle's GRU WeightH layout to the canonical GRU weights, checked against Paddle's own gru op
and against a layout written by hand."""

import numpy as np
import pytest
from helpers.error_bounds import PADDLE, assert_within, gru_bound
from helpers.paddle_gru_op import canonical_to_paddle_weight_h, offsets_of, paddle_gru

from fusebridge import ArgumentError
from fusebridge.integrations.paddle.weight_layouts import paddle_weight_h_to_canonical
from fusebridge.kernels import reference

RNG = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


def test_paddle_weight_h_hand_layout():
    # OC = 2: memory 0..7 is the [2, 4] (update | reset) block, 8..11 the [2, 2] candidate.
    flat = np.arange(12, dtype=np.float32).reshape(2, 6)
    expected = [[0, 1, 2, 3, 8, 9], [4, 5, 6, 7, 10, 11]]
    np.testing.assert_array_equal(paddle_weight_h_to_canonical(flat), expected)
    np.testing.assert_array_equal(
        canonical_to_paddle_weight_h(np.array(expected, np.float32)), flat
    )


@pytest.mark.paddle
def test_paddle_weight_h_against_paddle_gru():
    lengths = [2, 5, 1, 3]
    ic, oc = 3, 4
    x, weight_x = f32(sum(lengths), ic), f32(ic, 3 * oc, scale=0.5)
    weight, bias = f32(oc, 3 * oc, scale=0.5), f32(1, 3 * oc, scale=0.1)
    attrs = {"origin_mode": False, "activation": "tanh", "gate_activation": "sigmoid"}
    expected = paddle_gru(x, lengths, weight_x, weight, bias, is_reverse=False, **attrs)

    def ours(wh):
        hidden, _ = reference.gru(x, weight_x, wh, bias[0], offsets=offsets_of(lengths), **attrs)
        return hidden

    # The float64 formula against Paddle's float32 gru: within Paddle's error bound.
    _, bound = gru_bound(
        x, weight_x, paddle_weight_h_to_canonical(weight), bias[0], lengths=lengths, lib=PADDLE,
        **attrs,
    )  # fmt: skip
    assert_within(ours(paddle_weight_h_to_canonical(weight)), expected, bound)
    # Reading Paddle's memory as a plain [OC, 3*OC] matrix is wrong far beyond the bound.
    assert np.max(np.abs(ours(weight) - expected) / bound) > 1e3


def test_paddle_weight_h_round_trip():
    wh = f32(5, 15)
    before = wh.copy()
    paddle_layout = canonical_to_paddle_weight_h(wh)
    assert paddle_layout.shape == (5, 15) and paddle_layout.dtype == np.float32
    np.testing.assert_array_equal(paddle_weight_h_to_canonical(paddle_layout), wh)
    np.testing.assert_array_equal(
        canonical_to_paddle_weight_h(paddle_weight_h_to_canonical(wh)), wh
    )
    np.testing.assert_array_equal(wh, before)


def test_paddle_weight_h_rejects_other_shapes():
    with pytest.raises(ArgumentError, match=r"paddle_weight_h_to_canonical: weight_h .*\(4, 6\)"):
        paddle_weight_h_to_canonical(np.zeros((4, 6), np.float32))
    with pytest.raises(ValueError, match=r"canonical_to_paddle_weight_h: wh must have shape"):
        canonical_to_paddle_weight_h(np.zeros(12, np.float32))
