"""MXNet's fused RNN op, mode gru, as our FusionGRU: one per layer, the flat parameter vector
unpacked by rnn_params.py, the layers stacked by the recurrence toolkit (ops/recurrence.py)."""

from __future__ import annotations

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    dropout_p,
    positive_attribute,
)
from fusebridge.integrations.mxnet.converters.sequence import checked_lengths
from fusebridge.integrations.mxnet.rnn_params import mxnet_gru_params
from fusebridge.integrations.mxnet.symbol import MXNode
from fusebridge.ops import recurrence


@CONVERTERS.register("RNN")
def _rnn(cx, node: MXNode) -> None:
    """mode gru -> one FusionGRU per layer (tnc, linear_before_reset 1, origin_mode 1, gates
    reordered from r, z, n to update, reset, candidate). Unlike MXNet's oneDNN path, which
    ignores it, sequence_length is honoured."""
    mode = cx.attr("mode", "str")
    if mode != "gru":
        raise UnsupportedOpError(f"{cx.where()}: mode {mode!r}; only gru is supported")
    if cx.attr("projection_size", "int?", None) is not None:
        raise UnsupportedOpError(f"{cx.where()}: projection_size is not supported")
    hidden = positive_attribute(cx, "state_size")
    layers = positive_attribute(cx, "num_layers", 1)
    dropout_p(cx, 0.0)  # dropout between layers while training: checked, not used
    bidirectional = cx.attr("bidirectional", "bool", False)
    use_lengths = cx.attr("use_sequence_length", "bool", False)
    if len(node.inputs) != 3 + use_lengths:  # data, parameters, state[, sequence_length]
        raise ModelFormatError(
            f"{cx.where()}: {len(node.inputs)} inputs, expected data, parameters, state"
            + (", sequence_length" if use_lengths else "")
        )
    d = 2 if bidirectional else 1
    params = cx.array(cx.input(1))
    if params is None:
        raise UnsupportedOpError(
            f"{cx.where()}: the parameters input must be known at load time (a parameter, or "
            "gluon's Reshape + _rnn_param_concat of parameters)"
        )
    # The flat vector's size fixes the input size: d*3H*(I + H) weights in layer 0, ...
    later = (layers - 1) * d * 3 * hidden * (d * hidden + hidden)
    first = params.size - layers * d * 6 * hidden - later
    input_size = first // (d * 3 * hidden) - hidden
    if first <= 0 or first % (d * 3 * hidden) or input_size < 1:
        raise ModelFormatError(
            f"{cx.where()}: {params.size} parameters do not fit {layers} layer(s) of hidden size "
            f"{hidden}{', bidirectional' if bidirectional else ''}"
        )
    cx.spend(params.nbytes)
    weights = mxnet_gru_params(
        params.reshape(-1),
        input_size=input_size,
        hidden_size=hidden,
        num_layers=layers,
        bidirectional=bidirectional,
    )
    entry = node.inputs[2]
    states = [] if entry in cx.zero_states else [cx.input(2)]
    x = cx.input(0)
    lengths = checked_lengths(cx, 3, x, 0) if use_lengths else None
    attrs = {"linear_before_reset": 1, "origin_mode": 1, "layout": "tnc"}
    build = recurrence.fusion_gru_layer(attrs)
    y, finals = recurrence.stack_layers(cx, x, lengths, weights, states, build, node.name)
    if cx.attr("state_outputs", "bool", False):
        cx.define(y, recurrence.concat_layers(cx, finals[0], f"{node.name}/state"))
    else:
        cx.define(y)
