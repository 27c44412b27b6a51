"""Paddle's legacy LoD `lstm` op (fluid's dynamic_lstm; Baidu LAC's ranking model) as ONNX's
standard LSTM, which ONNX Runtime runs: the words are padded to [T, N, 4H] (LoDToPadded), run
with sequence_lens, and the real steps taken back (PaddedToLoD).

The op (checked against Paddle 3.3.1's executor): Input [words, 4H] is already projected (an fc
or mul before it); Weight [H, 4H] is the recurrent weight, h_prev @ Weight; Bias [1, 4H], or
[1, 7H] with use_peepholes (the default): the gate biases, then the peephole weights W_ic,
W_fc, W_oc; gate blocks in the order (c, i, f, o); optional H0 and C0 [N, H], row i for
sentence i. is_reverse runs each sentence from its own last word. Hidden [words, H] keeps the
input's LoD; Cell (each step's cell state) has no ONNX counterpart and is refused when read.

ONNX LSTM projects X itself (X @ W^T): W is the permutation that reorders the projected gates
to ONNX's (i, o, f, c), and the fc_lstm / mul_lstm rules then fold the projection before the op
into W, as fc_gru folds it into FusionGRU."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.conventions import DOMAIN
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    define_out,
    one_var,
    optional_var,
)
from fusebridge.integrations.paddle.program_desc import OpDesc
from fusebridge.ops.recurrence import LSTM_CIFO, reorder_gates

# Paddle's activation names -> ONNX's (identity as Affine(1, 0), which ONNX Runtime runs).
_ACTIVATIONS = {
    "sigmoid": ("Sigmoid", None),
    "tanh": ("Tanh", None),
    "relu": ("Relu", None),
    "identity": ("Affine", (1.0, 0.0)),
}


def _activations(cx, op: OpDesc) -> dict[str, object]:
    """ONNX's (f, g, h) = Paddle's gate, candidate and cell activations."""
    names, alpha, beta = [], [], []
    for attr, default in (
        ("gate_activation", "sigmoid"),
        ("candidate_activation", "tanh"),
        ("cell_activation", "tanh"),
    ):
        onnx_name, coefficients = _ACTIVATIONS[choice(cx, op, attr, tuple(_ACTIVATIONS), default)]
        names.append(onnx_name)
        if coefficients is not None:
            alpha.append(coefficients[0])
            beta.append(coefficients[1])
    if names == ["Sigmoid", "Tanh", "Tanh"]:
        return {}  # ONNX's defaults
    attrs: dict[str, object] = {"activations": names}
    if alpha:  # one value per activation that takes one, in order
        attrs |= {"activation_alpha": alpha, "activation_beta": beta}
    return attrs


def _onnx_gates(a: np.ndarray) -> np.ndarray:
    """The (c, i, f, o) blocks of a [..., 4H] array in ONNX's (i, o, f, c) order."""
    return reorder_gates(a, LSTM_CIFO, axis=-1)


def _state(cx, op: OpDesc, slot: str, hidden: int, out: str) -> ir.Value | None:
    """H0 / C0 [N, H] as ONNX's initial state [1, N, H]."""
    var = optional_var(cx, op, slot)
    if var is None:
        return None
    declared = cx.block.vars[var].shape if var in cx.block.vars else None
    if declared is not None and (len(declared) != 2 or declared[1] not in (-1, hidden)):
        raise ModelFormatError(
            f"{cx.where()}: {slot} {var!r} is declared {list(declared)}, expected [N, {hidden}]"
        )
    axis = cx.ints([0], f"{out}/{slot}_axis")
    return cx.add("Unsqueeze", [cx.value(var), axis], name=f"{out}/{slot}")


@CONVERTERS.register("lstm", lod="Input")
def _lstm(cx, op: OpDesc) -> None:
    xv = one_var(cx, op, "Input")
    out = one_var(cx, op, "Hidden", outputs=True)
    cell = [v for v in op.outputs.get("Cell", ()) if v in cx.read]
    if cell:
        raise UnsupportedOpError(
            f"{cx.where()}: output Cell {cell[0]!r} (every step's cell state) is read by "
            "another op; ONNX's LSTM gives only the last one"
        )
    wv = one_var(cx, op, "Weight")
    weight = cx.param(wv)
    hidden = weight.shape[0] if weight.ndim == 2 else 0
    if weight.ndim != 2 or weight.shape[1] != 4 * hidden or weight.dtype != np.float32:
        raise ModelFormatError(
            f"{cx.where()}: Weight {wv!r} is {weight.dtype} {list(weight.shape)}, expected "
            "float32 [H, 4H]"
        )
    peepholes = attribute(cx, op, "use_peepholes", "bool", True)
    bv = one_var(cx, op, "Bias")
    bias = cx.param(bv)
    size = 7 * hidden if peepholes else 4 * hidden
    if bias.shape not in ((1, size), (size,)):
        raise ModelFormatError(
            f"{cx.where()}: Bias {bv!r} is {list(bias.shape)}, expected [1, {size}] "
            f"(use_peepholes {peepholes})"
        )
    bias = bias.reshape(-1).astype(np.float32)
    declared = cx.block.vars[xv].shape if xv in cx.block.vars else None
    if declared is not None and (len(declared) != 2 or declared[1] not in (-1, 4 * hidden)):
        raise ModelFormatError(
            f"{cx.where()}: Input {xv!r} is declared {list(declared)}, expected [words, "
            f"{4 * hidden}] (the projected gates)"
        )
    offsets = cx.offsets_of(xv, "Input")
    padded = cx.add("LoDToPadded", [cx.value(xv), offsets], name=f"{out}/padded", domain=DOMAIN)
    # X @ W^T with W's rows the gates picked out of the projection; R likewise for h @ Weight.
    w = _onnx_gates(np.eye(4 * hidden, dtype=np.float32)).T
    gate_bias = _onnx_gates(bias[: 4 * hidden])
    inputs = [
        padded,
        cx.const(w[None], f"{out}/W"),
        cx.const(_onnx_gates(weight).T[None], f"{out}/R"),
        cx.const(np.concatenate([gate_bias, np.zeros_like(gate_bias)])[None], f"{out}/B"),
        _sentence_lengths(cx, offsets, out),
        _state(cx, op, "H0", hidden, out),
        _state(cx, op, "C0", hidden, out),
    ]
    if peepholes:  # Paddle (W_ic, W_fc, W_oc) -> ONNX P (i, o, f)
        ic, fc, oc = np.split(bias[4 * hidden :], 3)
        inputs.append(cx.const(np.concatenate([ic, oc, fc])[None], f"{out}/P"))
    attrs = {
        "hidden_size": hidden,
        "direction": "reverse" if attribute(cx, op, "is_reverse", "bool", False) else "forward",
        **_activations(cx, op),
    }
    y = cx.add("LSTM", inputs, attrs, name=f"{out}/onnx")
    y = cx.add("Squeeze", [y, cx.ints([1], f"{out}/directions")], name=f"{out}/tnh")
    define_out(cx, op, cx.add("PaddedToLoD", [y, offsets], name=out, domain=DOMAIN), "Hidden")


def _sentence_lengths(cx, offsets: ir.Value, out: str) -> ir.Value:
    """int32 [N] from the offsets [N + 1]: ONNX LSTM's sequence_lens."""
    one, zero, last = (cx.ints([k], f"{out}/at{k}") for k in (1, 0, -1))
    ends = cx.add("Slice", [offsets, one, cx.ints([2**62], f"{out}/end")], name=f"{out}/ends")
    starts = cx.add("Slice", [offsets, zero, last], name=f"{out}/starts")
    lengths = cx.add("Sub", [ends, starts], name=f"{out}/lengths")
    return cx.cast(lengths, ir.DataType.INT32, f"{out}/lengths32")
