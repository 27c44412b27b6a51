"""Framework weight layouts to the canonical GRU weights, checked against the framework (Paddle)
or against a vector packed by hand from the documented layout (MXNet)."""

import numpy as np
import pytest
from gru_impls import offsets_of, paddle_gru

from fusebridge import ArgumentError
from fusebridge.kernels import reference
from fusebridge.kernels.gru_weight_layouts import (
    canonical_to_paddle_weight_h,
    mxnet_rnn_params_to_canonical,
    negate_update_gate,
    paddle_weight_h_to_canonical,
)

RNG = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


# Paddle WeightH


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

    np.testing.assert_allclose(
        ours(paddle_weight_h_to_canonical(weight)), expected, rtol=1e-5, atol=1e-6
    )
    # Reading Paddle's memory as a plain [OC, 3*OC] matrix is measurably wrong.
    assert not np.allclose(ours(weight), expected, rtol=1e-3, atol=1e-3)


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
    with pytest.raises(ArgumentError, match=r"canonical_to_paddle_weight_h: wh must have shape"):
        canonical_to_paddle_weight_h(np.zeros(12, np.float32))


# MXNet RNN(mode='gru')

H, IN, LAYERS, DIRS = 3, 5, 2, 2


def mxnet_gates(rows):
    """One MXNet matrix or bias, built from named gate blocks (r, z, n)."""
    return {g: f32(H, *rows) for g in "rzn"}


def pack_by_hand():
    """The flat vector as MXNet 1.9.1's RNN lays it out (docs/gru.md), and the blocks it was
    made of."""
    blocks = []  # per (layer, direction): i2h, h2h weights and biases as gate dicts
    for layer in range(LAYERS):
        i_l = IN if layer == 0 else DIRS * H
        for _ in range(DIRS):
            blocks.append(
                {
                    "i2h_weight": mxnet_gates((i_l,)),
                    "h2h_weight": mxnet_gates((H,)),
                    "i2h_bias": mxnet_gates(()),
                    "h2h_bias": mxnet_gates(()),
                }
            )
    stack = lambda g: np.concatenate([g["r"], g["z"], g["n"]]).reshape(-1)  # noqa: E731
    weights = [stack(b[k]) for b in blocks for k in ("i2h_weight", "h2h_weight")]
    biases = [stack(b[k]) for b in blocks for k in ("i2h_bias", "h2h_bias")]
    return np.concatenate(weights + biases), blocks


def test_mxnet_params_two_layers_bidirectional():
    params, blocks = pack_by_hand()
    layers = mxnet_rnn_params_to_canonical(
        params, input_size=IN, hidden_size=H, num_layers=LAYERS, bidirectional=True
    )
    assert len(layers) == LAYERS
    for layer, (wx, wh, bias, bias_h) in enumerate(layers):
        i_l = IN if layer == 0 else DIRS * H
        assert wx.shape == (DIRS, i_l, 3 * H) and wh.shape == (DIRS, H, 3 * H)
        assert bias.shape == bias_h.shape == (DIRS, 3 * H)
        for d in range(DIRS):
            b = blocks[layer * DIRS + d]
            # Canonical columns: update = MXNet's z, reset = r, candidate = n.
            for col, gate in enumerate("zrn"):
                cols = slice(col * H, (col + 1) * H)
                np.testing.assert_array_equal(wx[d][:, cols], b["i2h_weight"][gate].T)
                np.testing.assert_array_equal(wh[d][:, cols], b["h2h_weight"][gate].T)
                np.testing.assert_array_equal(bias[d][cols], b["i2h_bias"][gate])
                np.testing.assert_array_equal(bias_h[d][cols], b["h2h_bias"][gate])


def test_mxnet_params_follow_mxnet_formula():
    """One step of MXNet's own formula (docs/gru.md) from the raw blocks equals the canonical GRU
    with linear_before_reset and origin_mode on the converted weights."""
    params, blocks = pack_by_hand()
    wx, wh, bias, bias_h = mxnet_rnn_params_to_canonical(
        params, input_size=IN, hidden_size=H, num_layers=LAYERS, bidirectional=True
    )[0]
    x, h = f32(1, IN).astype(np.float64), f32(H).astype(np.float64)
    b = blocks[0]
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    pre = {g: b["i2h_weight"][g] @ x[0] + b["i2h_bias"][g] for g in "rzn"}
    hid = {g: b["h2h_weight"][g] @ h + b["h2h_bias"][g] for g in "rzn"}
    r, z = sig(pre["r"] + hid["r"]), sig(pre["z"] + hid["z"])
    n = np.tanh(pre["n"] + r * hid["n"])
    expected = (1 - z) * n + z * h
    forward = {"bias_h": bias_h[:1], "h0": h[None], "offsets": [0, 1]}
    hidden, _ = reference.gru(
        x, wx[:1], wh[:1], bias[:1], linear_before_reset=True, origin_mode=True, **forward
    )
    np.testing.assert_allclose(hidden[0], expected, rtol=1e-12)


def test_mxnet_params_wrong_length():
    params, _ = pack_by_hand()
    # Weights D*3H*(I_l + H) per layer: 2*9*(5+3) + 2*9*(6+3); biases L*D*6H = 2*2*18.
    assert params.size == 144 + 162 + 72 == 378
    with pytest.raises(
        ArgumentError,
        match=r"mxnet_rnn_params_to_canonical: params must be a 1-D vector of 378 values for 2 "
        r"layer\(s\), bidirectional, input_size 5, hidden_size 3, got shape \(377,\)",
    ):
        mxnet_rnn_params_to_canonical(
            params[:-1], input_size=IN, hidden_size=H, num_layers=LAYERS, bidirectional=True
        )
    with pytest.raises(ArgumentError, match="hidden_size must be at least 1"):
        mxnet_rnn_params_to_canonical(params, input_size=IN, hidden_size=0)


# origin_mode False -> True by negating the update gate


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_negate_update_gate_turns_origin_mode_on(linear_before_reset):
    lengths, ic, oc = [3, 1, 4], 3, 2
    x = f32(sum(lengths), ic)
    wx, wh = f32(2, ic, 3 * oc), f32(2, oc, 3 * oc)
    bias, bias_h, h0 = f32(2, 3 * oc), f32(2, 3 * oc), f32(2, len(lengths), oc)
    inputs = [wx.copy(), wh.copy(), bias.copy(), bias_h.copy()]
    common = {
        "h0": h0,
        "offsets": offsets_of(lengths),
        "direction": "bidirectional",
        "linear_before_reset": linear_before_reset,
    }
    expected = reference.gru(x, wx, wh, bias, bias_h=bias_h, origin_mode=False, **common)
    nwx, nwh, nbias, nbias_h = negate_update_gate(wx, wh, bias, bias_h)
    got = reference.gru(x, nwx, nwh, nbias, bias_h=nbias_h, origin_mode=True, **common)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    # The update-gate columns negated, the others untouched, the inputs unchanged.
    for before, after in zip(inputs, (nwx, nwh, nbias, nbias_h)):
        np.testing.assert_array_equal(after[..., :oc], -before[..., :oc])
        np.testing.assert_array_equal(after[..., oc:], before[..., oc:])
    for before, now in zip(inputs, (wx, wh, bias, bias_h)):
        np.testing.assert_array_equal(now, before)


def test_negate_update_gate_none_stays_none_and_2d_weights():
    wx, wh = f32(3, 6), f32(2, 6)
    nwx, nwh, nbias, nbias_h = negate_update_gate(wx, wh)
    assert nbias is None and nbias_h is None
    assert not np.shares_memory(nwx, wx) and not np.shares_memory(nwh, wh)
    np.testing.assert_array_equal(nwh[:, :2], -wh[:, :2])


@pytest.mark.parametrize("gate_activation", ["tanh", "relu", "identity"])
def test_negate_update_gate_refuses_other_gates(gate_activation):
    with pytest.raises(
        ArgumentError,
        match=f"negate_update_gate: gate_activation must be 'sigmoid'.*{gate_activation}",
    ):
        negate_update_gate(f32(3, 6), f32(2, 6), gate_activation=gate_activation)


def test_negate_update_gate_checks_columns():
    with pytest.raises(ArgumentError, match=r"bias must have 3\*OC = 6 columns"):
        negate_update_gate(f32(3, 6), f32(2, 6), f32(9))
