"""MXNet's fused RNN op, mode gru, as our FusionGRU: one per layer, the flat parameter vector
unpacked by rnn_params.py."""

from __future__ import annotations

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    dropout_p,
    positive_attribute,
)
from fusebridge.integrations.mxnet.converters.sequence import checked_lengths
from fusebridge.integrations.mxnet.rnn_params import mxnet_rnn_params_to_canonical
from fusebridge.integrations.mxnet.symbol import MXNode


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
    weights = mxnet_rnn_params_to_canonical(
        params.reshape(-1),
        input_size=input_size,
        hidden_size=hidden,
        num_layers=layers,
        bidirectional=bidirectional,
    )
    entry = node.inputs[2]
    state = None if entry in cx.zero_states else cx.input(2)
    x = cx.input(0)
    lengths = checked_lengths(cx, 3, x, 0) if use_lengths else None
    attrs = {
        "direction": "bidirectional" if bidirectional else "forward",
        "linear_before_reset": 1,
        "origin_mode": 1,
        "layout": "tnc",
    }
    lasts = []
    for layer, (wx, wh, b, bh) in enumerate(weights):
        h0 = None
        if state is not None:
            h0 = cx.add(
                "Slice",
                [
                    state,
                    cx.ints([layer * d], "start"),
                    cx.ints([(layer + 1) * d], "end"),
                    cx.ints([0], "axis0"),
                ],
            )
        tensors = [
            cx.const(a, f"{node.name}/l{layer}/{k}")
            for a, k in ((wx, "wx"), (wh, "wh"), (b, "bias"), (bh, "bias_h"))
        ]
        outs = cx.add(
            "FusionGRU",
            [x, lengths, *tensors, h0],
            attrs,
            domain=conventions.DOMAIN,
            num_outputs=2,
            name=f"{node.name}/l{layer}",
        )
        x, last = outs
        lasts.append(last)
    if cx.attr("state_outputs", "bool", False):
        cx.define(x, cx.add("Concat", lasts, {"axis": 0}) if len(lasts) > 1 else lasts[0])
    else:
        cx.define(x)
