"""Paddle's padded `rnn` op (what paddle.nn.GRU, nn.LSTM and nn.SimpleRNN save as, in PIR and
legacy programs alike): GRU mode becomes our FusionGRU, one per layer; LSTM and RNN_TANH /
RNN_RELU become ONNX's standard LSTM and RNN ops, one per layer, which ONNX Runtime runs.

The op (checked on Paddle 3.3.1): Input [T, N, I] time-major; PreState one [L*D, N, H] tensor
(two, h and c, for LSTM); WeightList all weights then all biases, each list by (layer,
direction), ih before hh: w_ih [G*H, in], w_hh [G*H, H], b_ih [G*H], b_hh [G*H], G = 3 (GRU),
4 (LSTM), 1 (RNN); optional SequenceLength [N]. Out [T, N, D*H], State the final states in
PreState's layout. Gate order: GRU (r, z, c) with c = act(x_c + r * (h @ W_c + b_hc)) and
h = z * h_prev + (1 - z) * c (linear_before_reset 1, origin_mode 1 in our terms); LSTM (i, f,
c, o). A padded step of a shorter sentence outputs zeros, and the backward direction starts at
each sentence's own last word: our padded layout with seq_lens, and ONNX's sequence_lens."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    one_var,
    optional_var,
    slot_names,
)
from fusebridge.integrations.paddle.program_desc import OpDesc
from fusebridge.ops import recurrence

_GATES = {"GRU": 3, "LSTM": 4, "RNN_TANH": 1, "RNN_RELU": 1}
# Paddle's gate blocks, GRU (r, z, c) and LSTM (i, f, c, o), in the toolkit's terms.
_ORDER = {
    "GRU": recurrence.GRU_RZN,
    "LSTM": recurrence.LSTM_IFCO,
    "RNN_TANH": recurrence.SAME_ORDER[1],
    "RNN_RELU": recurrence.SAME_ORDER[1],
}


def _layer(cx, names: tuple[str, ...], layer: int, sizes: tuple) -> recurrence.LayerWeights:
    """One layer's parameters from the WeightList (all weights, then all biases, each by
    (layer, direction), ih before hh), checked against the op's sizes."""
    mode, d, layers, hidden, in_size = sizes
    g = _GATES[mode]
    per = 2 * layers * d  # weights, then biases
    blocks = []
    for direction in range(d):
        k = 2 * (layer * d + direction)
        arrays = []
        for offset, shape in (
            (k, (g * hidden, in_size)),
            (k + 1, (g * hidden, hidden)),
            (per + k, (g * hidden,)),
            (per + k + 1, (g * hidden,)),
        ):
            var = names[offset]
            value = cx.param(var)
            if value.shape != shape or value.dtype != np.float32:
                raise ModelFormatError(
                    f"{cx.where()}: WeightList[{offset}] {var!r} is {value.dtype} "
                    f"{list(value.shape)}, expected float32 {list(shape)} (layer {layer}, "
                    f"direction {direction})"
                )
            arrays.append(value)
        blocks.append(tuple(arrays))
    return recurrence.LayerWeights.from_blocks(blocks, _ORDER[mode])


@CONVERTERS.register("rnn", lod=None)
def _rnn(cx, op: OpDesc) -> None:
    mode = choice(cx, op, "mode", tuple(_GATES))
    d = 2 if attribute(cx, op, "is_bidirec", "bool", False) else 1
    layers = attribute(cx, op, "num_layers", "int", 1)
    hidden = attribute(cx, op, "hidden_size", "int", 0)
    xv = one_var(cx, op, "Input")
    out = one_var(cx, op, "Out", outputs=True)
    weights = slot_names(op, "WeightList")
    if layers < 1 or hidden < 1:
        raise ModelFormatError(
            f"{cx.where()}: num_layers = {layers} and hidden_size = {hidden} must be positive"
        )
    if len(weights) != 4 * layers * d:
        raise ModelFormatError(
            f"{cx.where()}: WeightList names {len(weights)} variables, expected "
            f"{4 * layers * d} (4 per layer and direction)"
        )
    if not attribute(cx, op, "is_test", "bool", False) and attribute(
        cx, op, "dropout_prob", "float", 0.0
    ):
        raise UnsupportedOpError(
            f"{cx.where()}: dropout between layers in training (is_test false, dropout_prob "
            f"{attribute(cx, op, 'dropout_prob', 'float', 0.0)}) is not supported"
        )
    states = slot_names(op, "PreState")
    if len(states) not in (0, 2 if mode == "LSTM" else 1):
        raise ModelFormatError(
            f"{cx.where()}: PreState names {len(states)} variables; mode {mode} takes "
            f"{2 if mode == 'LSTM' else 1}"
        )
    for var in states:
        declared = cx.block.vars[var].shape if var in cx.block.vars else None
        if declared is not None and (
            len(declared) != 3
            or declared[0] not in (-1, layers * d)
            or declared[2] not in (-1, hidden)
        ):
            raise ModelFormatError(
                f"{cx.where()}: PreState {var!r} is declared {list(declared)}, expected "
                f"[{layers * d}, N, {hidden}] (num_layers * directions, batch, hidden_size)"
            )
    lengths_var = optional_var(cx, op, "SequenceLength")
    lengths = cx.value(lengths_var) if lengths_var else None
    in_size = cx.param(weights[0]).shape[-1] if weights else 0
    params = [
        _layer(cx, weights, k, (mode, d, layers, hidden, in_size if k == 0 else d * hidden))
        for k in range(layers)
    ]
    initial = [cx.value(s) for s in states]
    if mode == "GRU":
        attrs = {"linear_before_reset": 1, "origin_mode": 1, "layout": "tnc"}
        build = recurrence.fusion_gru_layer(attrs)
    else:
        build = (
            recurrence.onnx_layer("LSTM")
            if mode == "LSTM"
            else recurrence.onnx_layer("RNN", "Tanh" if mode == "RNN_TANH" else "Relu")
        )
    y, finals = recurrence.stack_layers(
        cx, cx.value(xv), lengths, params, initial, build, out, last_name=out
    )
    cx.define(out, y)
    state_vars = slot_names(op, "State", outputs=True)
    for var, parts in zip(state_vars, finals[: len(states)]):
        if var in cx.read:
            cx.define(var, recurrence.concat_layers(cx, parts, var))
