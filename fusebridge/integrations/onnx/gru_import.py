"""ONNX GRU -> FusionGRU (it carries the input weights), for the import_gru pass. What the fused
GRU does not take (clip, an activation pair per direction, a non-identity Affine, weights
computed in the graph) raises UnsupportedOpError: the node then stays ONNX's GRU, run by ONNX
Runtime. A malformed GRU raises ModelFormatError."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.graph.builder import OpBuilder
from fusebridge.integrations.onnx.import_passes import constant, is_used, where
from fusebridge.ops.gru import ONNX_ACTIVATIONS
from fusebridge.ops.recurrence import LayerWeights

_ACTIVATIONS = {onnx_name: ours for ours, onnx_name in ONNX_ACTIVATIONS.items()}


def _attribute(node: ir.Node, name: str, default: object, choices: tuple = ()) -> object:
    """An attribute's value, of the default's type (a list: of strings or floats) and among
    `choices` if given (ModelFormatError naming the node otherwise)."""
    attr = node.attributes.get(name)
    value = default if attr is None else attr.value
    if value is None:
        return None
    kind = type(default) if default is not None else list
    if isinstance(value, (list, tuple)) and kind is list:
        value = list(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ModelFormatError(
            f"{where(node)}: attribute {name} = {value!r}, expected {kind.__name__}"
        )
    if choices and value not in choices:
        raise ModelFormatError(
            f"{where(node)}: attribute {name} = {value!r}, expected one of {list(choices)}"
        )
    return value


def _gru_activation(node: ir.Node, d: int) -> tuple[str, str]:
    """(gate_activation, activation), one pair for every direction."""
    names = _attribute(node, "activations", ["Sigmoid", "Tanh"] * d)
    alphas = _attribute(node, "activation_alpha", None)
    betas = _attribute(node, "activation_beta", None)
    if len(names) != 2 * d:
        raise ModelFormatError(
            f"{where(node)}: activations {names}: {len(names)} names, expected {2 * d} (a gate "
            f"and a candidate activation for each of {d} direction(s))"
        )
    if names[:2] * d != names:
        raise UnsupportedOpError(
            f"{where(node)}: activations {names}: the fused GRU takes one (gate, "
            "candidate) pair for all directions"
        )
    unknown = [a for a in names[:2] if a not in _ACTIVATIONS]
    if unknown:
        raise UnsupportedOpError(
            f"{where(node)}: activation(s) {unknown} not supported, expected among "
            f"{sorted(_ACTIVATIONS)}"
        )
    if "Affine" in names and (
        alphas is None or set(alphas) != {1.0} or betas is None or set(betas) != {0.0}
    ):
        # Runtimes differ on Affine's defaults and on which activations consume the lists;
        # only an explicit identity (1, 0) means the same everywhere.
        raise UnsupportedOpError(
            f"{where(node)}: Affine is supported as the identity only, with explicit "
            f"activation_alpha 1.0 and activation_beta 0.0 (got {alphas} and {betas})"
        )
    return _ACTIVATIONS[names[0]], _ACTIVATIONS[names[1]]


def _float_weight(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    """A weight input as a constant of a floating type (ONNX GRU's T)."""
    array = constant(node, value, what)
    if array is not None and not np.issubdtype(array.dtype, np.floating):
        raise ModelFormatError(
            f"{where(node)}: input {what} {value.name!r} is {array.dtype}, expected a float type"
        )
    return array


def _gru_weights(node: ir.Node, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """W [D, 3H, I], R [D, 3H, H] and B [D, 6H] (or None), their shapes checked."""
    inputs = list(node.inputs) + [None] * 3
    w, r, b = (_float_weight(node, inputs[i], what) for i, what in ((1, "W"), (2, "R"), (3, "B")))
    if w is None or r is None:
        raise ModelFormatError(f"{where(node)}: inputs W and R are required")
    oc = r.shape[-1] if r.ndim == 3 else 0
    if oc == 0 or r.shape != (d, 3 * oc, oc):
        raise ModelFormatError(
            f"{where(node)}: R {list(r.shape)}, expected [{d}, 3 * hidden, hidden] with hidden "
            f">= 1 ({d} direction(s))"
        )
    if w.ndim != 3 or w.shape[:2] != (d, 3 * oc):
        raise ModelFormatError(
            f"{where(node)}: W {list(w.shape)}, expected [{d}, {3 * oc}, input size] for "
            f"{d} direction(s) of hidden size {oc} (from R)"
        )
    if b is not None and b.shape != (d, 6 * oc):
        raise ModelFormatError(
            f"{where(node)}: B {list(b.shape)}, expected [{d}, {6 * oc}] for {d} "
            f"direction(s) of hidden size {oc}"
        )
    return w, r, b


def _check_gru_input(node: ir.Node, x: ir.Value | None, input_size: int) -> None:
    """X is given and, where its shape is known, [steps, batch, input_size]."""
    if x is not None and x.shape is None:
        return
    dims = None if x is None else [d if isinstance(d, int) else str(d) for d in x.shape]
    if dims is None or len(dims) != 3 or (isinstance(dims[2], int) and dims[2] != input_size):
        raise ModelFormatError(
            f"{where(node)}: input X {dims}, expected [steps, batch, {input_size}] (the input "
            "size from W)"
        )


def import_gru(op: OpBuilder, node: ir.Node) -> list[ir.Value | None]:
    """ONNX GRU (z, r, h gates = our update, reset, candidate; h = (1 - z) * h~ + z * h_prev =
    origin_mode 1) -> FusionGRU in the same padded layout: Wx = W^T, Wh = R^T per direction,
    bias = Wb, bias_h = Rb. Y and Y_h are put back into ONNX's layouts by standard nodes."""
    inputs = list(node.inputs) + [None] * (6 - len(node.inputs))
    x, lens, h0 = inputs[0], inputs[4], inputs[5]
    direction = _attribute(node, "direction", "forward", ("forward", "reverse", "bidirectional"))
    layout = _attribute(node, "layout", 0, (0, 1))
    linear_before_reset = _attribute(node, "linear_before_reset", 0, (0, 1))
    d = 2 if direction == "bidirectional" else 1
    w, r, b = _gru_weights(node, d)
    oc = r.shape[-1]
    hidden = _attribute(node, "hidden_size", oc)
    if hidden != oc:
        raise ModelFormatError(f"{where(node)}: hidden_size {hidden}, but R has {oc} columns")
    _check_gru_input(node, x, w.shape[2])
    b = np.zeros((d, 6 * oc), np.float32) if b is None else b
    gate, act = _gru_activation(node, d)
    # Refused only once the node is known well formed: a malformed file is an error.
    if node.attributes.get("clip") is not None:
        raise UnsupportedOpError(f"{where(node)}: clip is not supported by the fused GRU")
    # ONNX's gates (z, r, h) are the canonical ones: the toolkit only lays them out.
    layer = LayerWeights(w, r, b[:, : 3 * oc], b[:, 3 * oc :])
    weights = [
        op.const(np.ascontiguousarray(a, np.float32), hint)
        for a, hint in zip(layer.fusion_gru(), ("wx", "wh", "bias", "bias_h"))
    ]
    y_onnx, yh_onnx = (list(node.outputs) + [None, None])[:2]
    attrs = {
        "direction": direction,
        "linear_before_reset": linear_before_reset,
        "origin_mode": 1,
        "activation": act,
        "gate_activation": gate,
        "layout": "ntc" if layout else "tnc",
    }
    if layout and h0 is not None:
        h0 = op.Transpose(h0, perm=[1, 0, 2])
    outs = op.op_multi_out(
        "FusionGRU",
        [x, lens, *weights, h0],
        attrs,
        domain=conventions.DOMAIN,
        num_outputs=2 if is_used(yh_onnx) else 1,
        name=node.name,
    )
    # ours [T, N, D*OC] (tnc) / [N, T, D*OC] (ntc) -> ONNX [T, D, N, OC] / [N, T, D, OC];
    # an output nothing reads goes with the node (its name and type are the file's, for a
    # value the import does not make).
    y = None
    if is_used(y_onnx):
        y = op.Reshape(outs[0], op.ints([0, 0, d, oc], "y_shape"))
        if not layout:
            y = op.Transpose(y, perm=[0, 2, 1, 3])
    y_h = None
    if len(outs) > 1:
        y_h = op.Transpose(outs[1], perm=[1, 0, 2]) if layout else outs[1]
    return [y, y_h]
