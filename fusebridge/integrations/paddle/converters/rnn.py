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
import onnx_ir as ir

from fusebridge import conventions
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

_GATES = {"GRU": 3, "LSTM": 4, "RNN_TANH": 1, "RNN_RELU": 1}
# Paddle's gate blocks -> ours / ONNX's: GRU (r, z, c) -> (u = z, r, c); LSTM (i, f, c, o) ->
# ONNX (i, o, f, c).
_GATE_ORDER = {"GRU": (1, 0, 2), "LSTM": (0, 3, 1, 2), "RNN_TANH": (0,), "RNN_RELU": (0,)}


def reorder_gates(a: np.ndarray, order: tuple[int, ...], axis: int = 0) -> np.ndarray:
    """a's len(order) equal gate blocks along `axis`, in the order `order` picks them."""
    blocks = np.split(a, len(order), axis=axis)
    return np.concatenate([blocks[g] for g in order], axis=axis)


def _gates(a: np.ndarray, mode: str) -> np.ndarray:
    """The gate blocks of a [G*H, ...] weight or [G*H] bias in our / ONNX's order."""
    return reorder_gates(a, _GATE_ORDER[mode])


class _Layer:
    """The parameters of one layer, checked against the op's sizes: w, r [D, G*H, in / H] and
    b, bh [D, G*H], gates in our / ONNX's order."""

    def __init__(self, cx, op: OpDesc, names: tuple[str, ...], layer: int, sizes: tuple) -> None:
        mode, d, layers, hidden, in_size = sizes
        g = _GATES[mode]
        per = 2 * layers * d  # weights, then biases
        parts: dict[str, list[np.ndarray]] = {"w": [], "r": [], "b": [], "bh": []}
        for direction in range(d):
            k = 2 * (layer * d + direction)
            for slot, offset, shape in (
                ("w", k, (g * hidden, in_size)),
                ("r", k + 1, (g * hidden, hidden)),
                ("b", per + k, (g * hidden,)),
                ("bh", per + k + 1, (g * hidden,)),
            ):
                var = names[offset]
                value = cx.param(var)
                if value.shape != shape or value.dtype != np.float32:
                    raise ModelFormatError(
                        f"{cx.where()}: WeightList[{offset}] {var!r} is {value.dtype} "
                        f"{list(value.shape)}, expected float32 {list(shape)} (layer {layer}, "
                        f"direction {direction})"
                    )
                parts[slot].append(_gates(value, mode))
        self.w, self.r, self.b, self.bh = (np.stack(parts[s]) for s in ("w", "r", "b", "bh"))


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
    y = cx.value(xv)
    finals: list[list[ir.Value]] = [[] for _ in states]
    for layer in range(layers):
        sizes = (mode, d, layers, hidden, in_size if layer == 0 else d * hidden)
        params = _Layer(cx, op, weights, layer, sizes)
        initial = [
            _layer_state(cx, cx.value(s), layer, d, hidden, f"{out}/l{layer}s{k}")
            for k, s in enumerate(states)
        ]
        name = out if layer == layers - 1 else f"{out}/l{layer}"
        build = _gru_layer if mode == "GRU" else _onnx_layer
        y, last = build(cx, mode, y, lengths, params, initial, d, hidden, name)
        for k, value in enumerate(last):
            finals[k].append(value)
    cx.define(out, y)
    state_vars = slot_names(op, "State", outputs=True)
    for k, var in enumerate(state_vars[: len(finals)]):
        if var in cx.read and finals[k]:
            parts = finals[k]
            value = parts[0] if len(parts) == 1 else cx.add("Concat", parts, {"axis": 0}, name=var)
            cx.define(var, value)


def _layer_state(cx, state: ir.Value, layer: int, d: int, hidden: int, name: str) -> ir.Value:
    """Rows layer*d .. layer*d + d of a [L*D, N, H] state, typed [D, N, H]: the zero-state rule
    needs H0's shape, which ONNX's inference cannot tell through nn.GRU's ConstantOfShape of a
    computed shape."""
    begin, end = cx.ints([layer * d], f"{name}/b"), cx.ints([layer * d + d], f"{name}/e")
    rows = cx.add("Slice", [state, begin, end, cx.ints([0], f"{name}/axis")], name=name)
    rows.shape = ir.Shape([d, None, hidden])
    return rows


def _gru_layer(cx, mode, x, lengths, p: _Layer, initial, d, hidden, name):
    wx = cx.const(np.ascontiguousarray(p.w.transpose(0, 2, 1)), f"{name}/wx")
    wh = cx.const(np.ascontiguousarray(p.r.transpose(0, 2, 1)), f"{name}/wh")
    attrs = {
        "direction": "bidirectional" if d == 2 else "forward",
        "linear_before_reset": 1,
        "origin_mode": 1,
        "layout": "tnc",
    }
    inputs = [x, lengths, wx, wh, cx.const(p.b, f"{name}/b"), cx.const(p.bh, f"{name}/bh")]
    inputs.append(initial[0] if initial else None)
    y, last = cx.add(
        "FusionGRU", inputs, attrs, name=name, domain=conventions.DOMAIN, num_outputs=2
    )
    return y, [last]


def _onnx_layer(cx, mode, x, lengths, p: _Layer, initial, d, hidden, name):
    """ONNX LSTM / RNN: Y [T, D, N, H] back to Paddle's [T, N, D*H]."""
    attrs = {"hidden_size": hidden, "direction": "bidirectional" if d == 2 else "forward"}
    if mode != "LSTM":
        attrs["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"] * d
    lens = cx.cast(lengths, ir.DataType.INT32, f"{name}/lens") if lengths is not None else None
    bias = cx.const(np.concatenate([p.b, p.bh], axis=1), f"{name}/B")
    inputs = [x, cx.const(p.w, f"{name}/W"), cx.const(p.r, f"{name}/R"), bias, lens, *initial]
    outputs = cx.add(
        "LSTM" if mode == "LSTM" else "RNN",
        inputs,
        attrs,
        name=f"{name}/onnx",
        num_outputs=3 if mode == "LSTM" else 2,
    )
    y4 = cx.add("Transpose", [outputs[0]], {"perm": [0, 2, 1, 3]}, name=f"{name}/tnd")
    y = cx.add("Reshape", [y4, cx.ints([0, 0, d * hidden], f"{name}/shape")], name=name)
    return y, list(outputs[1:])
