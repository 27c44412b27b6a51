"""MXNet's RNN flat parameter vector to the canonical weights, every mode, checked against a
vector packed by hand from the documented layout (gate blocks gru r, z, n; lstm i, f, c, o;
rnn one), and for gru against MXNet's formula. MXNet's own numbers: test_mxnet_op_oracles."""

import numpy as np
import pytest

from fusebridge import ArgumentError
from fusebridge.integrations.mxnet.rnn_params import (
    mxnet_rnn_params_to_canonical,
    mxnet_rnn_weights,
)
from fusebridge.kernels import reference

RNG = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


H, IN, LAYERS, DIRS = 3, 5, 2, 2


def mxnet_gates(rows, gates):
    """One MXNet matrix or bias, built from named gate blocks (`gates` in MXNet's order)."""
    return {g: f32(H, *rows) for g in gates}


def pack_by_hand(gates="rzn"):
    """The flat vector as MXNet 1.9.1's RNN lays it out (docs/gru.md), gate blocks `gates` in
    MXNet's order, and the blocks it was made of."""
    blocks = []  # per (layer, direction): i2h, h2h weights and biases as gate dicts
    for layer in range(LAYERS):
        i_l = IN if layer == 0 else DIRS * H
        for _ in range(DIRS):
            blocks.append(
                {
                    "i2h_weight": mxnet_gates((i_l,), gates),
                    "h2h_weight": mxnet_gates((H,), gates),
                    "i2h_bias": mxnet_gates((), gates),
                    "h2h_bias": mxnet_gates((), gates),
                }
            )
    stack = lambda g: np.concatenate([g[k] for k in gates]).reshape(-1)  # noqa: E731
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


@pytest.mark.parametrize(
    ("mode", "gates", "canonical"),
    [
        ("lstm", "ifco", "iofc"),
        ("rnn_tanh", "h", "h"),
        ("rnn_relu", "h", "h"),
        ("gru", "rzn", "zrn"),
    ],
)
def test_mxnet_params_every_mode(mode, gates, canonical):
    """ONNX's form, W [D, G*H, I], R [D, G*H, H], biases [D, G*H], in ONNX's gate order: LSTM
    i, o, f, c (ONNX's LSTM spec), GRU z, r, h."""
    params, blocks = pack_by_hand(gates)
    layers = mxnet_rnn_weights(
        params, mode=mode, input_size=IN, hidden_size=H, num_layers=LAYERS, bidirectional=True
    )
    g = len(gates)
    for layer, weights in enumerate(layers):
        i_l = IN if layer == 0 else DIRS * H
        assert weights.w.shape == (DIRS, g * H, i_l) and weights.r.shape == (DIRS, g * H, H)
        for d in range(DIRS):
            b = blocks[layer * DIRS + d]
            for row, gate in enumerate(canonical):
                rows = slice(row * H, (row + 1) * H)
                np.testing.assert_array_equal(weights.w[d][rows], b["i2h_weight"][gate])
                np.testing.assert_array_equal(weights.r[d][rows], b["h2h_weight"][gate])
                np.testing.assert_array_equal(weights.b[d][rows], b["i2h_bias"][gate])
                np.testing.assert_array_equal(weights.bh[d][rows], b["h2h_bias"][gate])


def test_mxnet_params_unknown_mode():
    params, _ = pack_by_hand()
    with pytest.raises(ArgumentError, match=r"mode 'lstmp', expected one of gru, lstm"):
        mxnet_rnn_weights(params, mode="lstmp", input_size=IN, hidden_size=H)
