"""MXNet's RNN parameter packing, every mode (gru, lstm, rnn_tanh, rnn_relu), to the recurrence
toolkit's canonical layer weights (ops/recurrence.py: ONNX's form and gate order); for gru also
FusionGRU's four arrays (docs/gru.md). Every result is a NEW array. MXNet's blocks are read here;
the reordering and the layouts are the toolkit's.

MXNet 1.9.1's layout (src/operator/rnn-inl.h): all weights, then all biases; per layer, per
direction (forward, backward): W_i2h [G*H, I_l] then W_h2h [G*H, H] row-major, and b_i2h [G*H],
b_h2h [G*H] in the same order; I_0 = input_size, I_l = D*H after. G gate blocks, in MXNet's
order: gru (r, z, n), lstm (i, f, c, o), rnn_tanh and rnn_relu one."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_float_array, as_int
from fusebridge.ops.recurrence import GRU_RZN, LSTM_IFCO, SAME_ORDER, LayerWeights

# mode -> MXNet's gate blocks, as positions of the canonical gates (recurrence's orders).
# MXNet's gru is the canonical GRU with linear_before_reset and origin_mode (h' = (1 - z) * n
# + z * h): its z is our update gate, n our candidate.
GATE_ORDER: dict[str, tuple[int, ...]] = {
    "gru": GRU_RZN,
    "lstm": LSTM_IFCO,
    "rnn_tanh": SAME_ORDER[1],
    "rnn_relu": SAME_ORDER[1],
}


def _positive(value: object, op: str, name: str) -> int:
    v = as_int(value, op, name)
    if v < 1:
        raise ArgumentError(f"{op}: {name} must be at least 1, got {v}")
    return v


def mxnet_param_count(
    mode: str, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
) -> int:
    """How many values MXNet's flat vector holds for these sizes: per layer and direction,
    G*H*(I_l + H) weights and 2*G*H biases."""
    g, h, d = len(GATE_ORDER[mode]), hidden_size, 2 if bidirectional else 1
    inputs = [input_size] + [d * h] * (num_layers - 1)
    return sum(d * g * h * (i + h) for i in inputs) + num_layers * d * 2 * g * h


def mxnet_input_size(
    count: int, mode: str, hidden_size: int, num_layers: int, bidirectional: bool
) -> int | None:
    """The input size a flat vector of `count` values holds for these sizes, or None when no
    input size fits: layer 0's D*G*H*I input weights are what the rest leaves."""
    per_input = (2 if bidirectional else 1) * len(GATE_ORDER[mode]) * hidden_size
    rest = mxnet_param_count(mode, 1, hidden_size, num_layers, bidirectional) - per_input
    first = count - rest
    return first // per_input if first > 0 and first % per_input == 0 else None


def mxnet_rnn_weights(
    params: np.ndarray,
    *,
    mode: str,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
    op: str = "mxnet_rnn_weights",
) -> list[LayerWeights]:
    """MXNet RNN(mode=...) flat parameter vector -> the layers' canonical weights (`op`: the
    function called, for messages)."""
    if mode not in GATE_ORDER:
        raise ArgumentError(f"{op}: mode {mode!r}, expected one of {', '.join(GATE_ORDER)}")
    params = as_float_array(params, op, "params")
    ic = _positive(input_size, op, "input_size")
    h = _positive(hidden_size, op, "hidden_size")
    layers = _positive(num_layers, op, "num_layers")
    dirs, g = 2 if bidirectional else 1, len(GATE_ORDER[mode])
    expected = mxnet_param_count(mode, ic, h, layers, bidirectional)
    if params.ndim != 1 or params.size != expected:
        raise ArgumentError(
            f"{op}: params must be a 1-D vector of {expected} values for {layers} layer(s), "
            f"{'bidirectional' if bidirectional else 'one direction'}, input_size {ic}, "
            f"hidden_size {h}, got shape {params.shape}"
        )

    def take(start: int, shape: tuple[int, ...]) -> np.ndarray:
        return params[start : start + int(np.prod(shape))].reshape(shape)

    result = []
    w_at, b_at = 0, expected - layers * dirs * 2 * g * h  # where the next weight, bias start
    for i in [ic] + [dirs * h] * (layers - 1):
        blocks = []
        for _ in range(dirs):
            w_ih, w_hh = take(w_at, (g * h, i)), take(w_at + g * h * i, (g * h, h))
            w_at += g * h * (i + h)
            blocks.append((w_ih, w_hh, take(b_at, (g * h,)), take(b_at + g * h, (g * h,))))
            b_at += 2 * g * h
        result.append(LayerWeights.from_blocks(blocks, GATE_ORDER[mode]))
    return result


def mxnet_rnn_params_to_canonical(
    params: np.ndarray,
    *,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """MXNet RNN(mode='gru') flat parameter vector -> [(wx, wh, bias, bias_h)] per layer
    (FusionGRU's inputs)."""
    layers = mxnet_rnn_weights(
        params,
        mode="gru",
        input_size=input_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        bidirectional=bidirectional,
        op="mxnet_rnn_params_to_canonical",
    )
    return [layer.fusion_gru() for layer in layers]
