"""MXNet's fused RNN op in every mode: gru as our FusionGRU, lstm as ONNX's LSTM, rnn_tanh and
rnn_relu as ONNX's RNN, one node per layer; the flat parameter vector unpacked by rnn_params.py,
the layers stacked by the recurrence toolkit (ops/recurrence.py).

The op's inputs: data [T, N, I], parameters, state [L*D, N, H], state_cell (lstm only), then
sequence_length [N] when use_sequence_length is set; its outputs: out [T, N, D*H], then with
state_outputs the final state (and state_cell) in the states' layout."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    dropout_p,
    positive_attribute,
    shape_of,
    unsupported_attribute,
)
from fusebridge.integrations.mxnet.converters.sequence import checked_lengths
from fusebridge.integrations.mxnet.rnn_params import mxnet_input_size, mxnet_rnn_weights
from fusebridge.integrations.mxnet.symbol import MXNode
from fusebridge.ops import recurrence

# mode -> the layer builder. MXNet's gru is the canonical GRU with linear_before_reset and
# origin_mode (rnn_params.py).
_LAYERS = {
    "gru": recurrence.fusion_gru_layer(
        {"linear_before_reset": 1, "origin_mode": 1, "layout": "tnc"}
    ),
    "lstm": recurrence.onnx_layer("LSTM"),
    "rnn_tanh": recurrence.onnx_layer("RNN", "Tanh"),
    "rnn_relu": recurrence.onnx_layer("RNN", "Relu"),
}


@CONVERTERS.register("RNN")
def _rnn(cx, node: MXNode) -> None:
    """Unlike MXNet's CPU path, which ignores it in every mode, sequence_length is honoured:
    each sentence stops at its own length (and its reverse direction starts there)."""
    mode = cx.attr("mode", "str")
    if mode not in _LAYERS:
        bad_attribute(cx, "mode", mode, f"one of {', '.join(_LAYERS)}")
    _refuse_unsupported(cx)
    hidden = positive_attribute(cx, "state_size")
    layers = positive_attribute(cx, "num_layers", 1)
    dropout_p(cx, 0.0)  # dropout between layers while training: checked, not used
    bidirectional = cx.attr("bidirectional", "bool", False)
    use_lengths = cx.attr("use_sequence_length", "bool", False)
    state_slots = [2, 3] if mode == "lstm" else [2]
    if len(node.inputs) != 2 + len(state_slots) + use_lengths:
        raise ModelFormatError(
            f"{cx.where()}: {len(node.inputs)} inputs, expected data, parameters, state"
            + (", state_cell" if mode == "lstm" else "")
            + (", sequence_length" if use_lengths else "")
        )
    params = cx.array(cx.input(1))
    if params is None:
        raise UnsupportedOpError(
            f"{cx.where()}: the parameters input must be known at load time (a parameter, or "
            "gluon's Reshape + _rnn_param_concat of parameters)"
        )
    input_size = mxnet_input_size(params.size, mode, hidden, layers, bidirectional)
    if input_size is None:
        raise ModelFormatError(
            f"{cx.where()}: {params.size} parameters do not fit {layers} layer(s) of mode "
            f"{mode}, hidden size {hidden}{', bidirectional' if bidirectional else ''}"
        )
    cx.spend(params.nbytes)
    weights = mxnet_rnn_weights(
        params.reshape(-1),
        mode=mode,
        input_size=input_size,
        hidden_size=hidden,
        num_layers=layers,
        bidirectional=bidirectional,
    )
    x = cx.input(0)
    lengths = checked_lengths(cx, state_slots[-1] + 1, x, 0) if use_lengths else None
    states = _initial_states(cx, state_slots)
    y, finals = recurrence.stack_layers(cx, x, lengths, weights, states, _LAYERS[mode], node.name)
    if cx.attr("state_outputs", "bool", False):
        names = ("state", "state_cell")
        cx.define(
            y, *(recurrence.concat_layers(cx, f, f"{node.name}/{n}") for f, n in zip(finals, names))
        )
    else:
        cx.define(y)


def _refuse_unsupported(cx) -> None:
    """LSTMP's projection and the clipping of an LSTM's cell state: no layer builder has them."""
    projection = cx.attr("projection_size", "int?", None)
    if projection is not None:
        unsupported_attribute(cx, "projection_size", projection, "None (LSTMP is not supported)")
    for key in ("lstm_state_clip_min", "lstm_state_clip_max"):
        bound = cx.attr(key, "float?", None)
        if bound is not None:
            unsupported_attribute(cx, key, bound, "None (a clipped cell state is not supported)")


def _initial_states(cx, slots: list[int]) -> list:
    """The initial states (h, then c for lstm), or none when all are gluon's zero begin states
    (_zeros of run-time batch). One such beside a given one becomes zeros of the other's shape:
    ONNX's LSTM takes initial_c only after initial_h."""
    given = [k for k in slots if cx.node.inputs[k] not in cx.zero_states]
    if not given:
        return []
    like = cx.input(given[0])
    dtype = like.dtype.numpy() if like.dtype is not None else np.float32
    zeros = {"value": ir.tensor(np.zeros(1, dtype))}
    return [
        cx.input(k) if k in given else cx.add("ConstantOfShape", [shape_of(cx, like, 0)], zeros)
        for k in slots
    ]
