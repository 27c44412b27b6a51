"""ONNX file -> canonical IR: standard GRU becomes FusionGRU (it carries input weights) and
Dropout becomes our Dropout, so that the fuse passes and kernels see them; everything else
stays standard ONNX, run by ONNX Runtime."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass, ShapeInferencePass

from fusebridge import ir as fir
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.integrations.onnx.lowering import replace_node
from fusebridge.integrations.onnx.standard_ops import OpBuilder, constant_input

_ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu", "Affine": "identity"}


def load_onnx(path: str | os.PathLike) -> ir.Model:
    """An ONNX file as canonical IR (GRU and Dropout imported as fusebridge ops)."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"load: no such ONNX file {str(p)!r}")
    try:
        model = ir.load(p)
    except Exception as exc:  # onnx raises DecodeError and others
        raise ModelFormatError(f"load: {str(p)!r} is not a readable ONNX model: {exc}") from exc
    return import_onnx(model)


def import_onnx(model: ir.Model) -> ir.Model:
    """Rewrites `model` in place: ONNX GRU -> FusionGRU, ONNX Dropout -> Dropout."""
    if fir.DOMAIN in model.opset_imports:
        return model  # written by us: our ops are there already
    # Weights given by Constant nodes (some exporters) become initializers, as torch's are.
    LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    graph = model.graph
    taken = {v.name for v in graph.initializers.values()}
    imported = False
    for node in list(graph):
        if node.domain not in ("", "ai.onnx") or node.op_type not in _IMPORTS:
            continue
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken)
        outputs = _IMPORTS[node.op_type](op, node)
        if outputs is not None:
            replace_node(graph, node, op, outputs)
            imported = True
    if imported:
        model.opset_imports[fir.DOMAIN] = fir.DOMAIN_VERSION
        ShapeInferencePass()(model)  # types for the values the import made
    return model


def _where(node: ir.Node) -> str:
    return f"ONNX {node.op_type} node {node.name!r}"


def _constant(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    where = f"{_where(node)}: input {what}"
    return constant_input(value, where, "importing it as a fused op needs a constant")


def _used(value: ir.Value | None) -> bool:
    return value is not None and (bool(value.uses()) or value.is_graph_output())


def _gru_activation(node: ir.Node, d: int) -> tuple[str, str]:
    """(gate_activation, activation), one pair for every direction."""
    names = list(node.attributes.get_strings("activations", ["Sigmoid", "Tanh"] * d))
    alphas = node.attributes.get_floats("activation_alpha", None)
    betas = node.attributes.get_floats("activation_beta", None)
    if len(names) != 2 * d or names[:2] * d != names:
        raise UnsupportedOpError(
            f"{_where(node)}: activations {names}: the fused GRU takes one (gate, "
            "candidate) pair for all directions"
        )
    unknown = [a for a in names[:2] if a not in _ACTIVATIONS]
    if unknown:
        raise UnsupportedOpError(
            f"{_where(node)}: activation(s) {unknown} not supported, expected among "
            f"{sorted(_ACTIVATIONS)}"
        )
    if "Affine" in names and (
        alphas is None or set(alphas) != {1.0} or betas is None or set(betas) != {0.0}
    ):
        # Runtimes differ on Affine's defaults and on which activations consume the lists;
        # only an explicit identity (1, 0) means the same everywhere.
        raise UnsupportedOpError(
            f"{_where(node)}: Affine is supported as the identity only, with explicit "
            f"activation_alpha 1.0 and activation_beta 0.0 (got {alphas} and {betas})"
        )
    return _ACTIVATIONS[names[0]], _ACTIVATIONS[names[1]]


def _import_gru(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """ONNX GRU (z, r, h gates = our update, reset, candidate; h = (1 - z) * h~ + z * h_prev =
    origin_mode 1) -> FusionGRU in the same padded layout: Wx = W^T, Wh = R^T per direction,
    bias = Wb, bias_h = Rb. Y and Y_h are put back into ONNX's layouts by standard nodes."""
    inputs = list(node.inputs) + [None] * (6 - len(node.inputs))
    x, w_v, r_v, b_v, lens, h0 = inputs[:6]
    direction = node.attributes.get_string("direction", "forward")
    layout = node.attributes.get_int("layout", 0)
    if node.attributes.get("clip") is not None:
        raise UnsupportedOpError(f"{_where(node)}: clip is not supported by the fused GRU")
    d = 2 if direction == "bidirectional" else 1
    w, r = _constant(node, w_v, "W"), _constant(node, r_v, "R")
    oc = r.shape[-1]
    if w.ndim != 3 or w.shape[:2] != (d, 3 * oc) or r.shape != (d, 3 * oc, oc):
        raise UnsupportedOpError(
            f"{_where(node)}: W {w.shape} and R {r.shape} do not fit {d} direction(s) of "
            f"hidden size {oc}"
        )
    hidden = node.attributes.get_int("hidden_size", oc)
    if hidden != oc:
        raise ModelFormatError(f"{_where(node)}: hidden_size {hidden}, but R has {oc} columns")
    b = _constant(node, b_v, "B")
    b = np.zeros((d, 6 * oc), np.float32) if b is None else b.reshape(d, 6 * oc)
    gate, act = _gru_activation(node, d)
    weights = [
        op.const(np.ascontiguousarray(a.transpose(0, 2, 1), np.float32), hint)
        for a, hint in ((w, "wx"), (r, "wh"))
    ]
    biases = [
        op.const(np.ascontiguousarray(half, np.float32), hint)
        for half, hint in ((b[:, : 3 * oc], "bias"), (b[:, 3 * oc :], "bias_h"))
    ]
    y_onnx, yh_onnx = (list(node.outputs) + [None, None])[:2]
    attrs = {
        "direction": direction,
        "linear_before_reset": node.attributes.get_int("linear_before_reset", 0),
        "origin_mode": 1,
        "activation": act,
        "gate_activation": gate,
        "layout": "ntc" if layout else "tnc",
    }
    if layout and h0 is not None:
        h0 = op.Transpose(h0, perm=[1, 0, 2])
    outs = op.op_multi_out(
        "FusionGRU",
        [x, lens, *weights, *biases, h0],
        attrs,
        domain=fir.DOMAIN,
        num_outputs=2 if _used(yh_onnx) else 1,
        name=node.name,
    )
    # ours [T, N, D*OC] (tnc) / [N, T, D*OC] (ntc) -> ONNX [T, D, N, OC] / [N, T, D, OC]
    y = outs[0]
    if _used(y_onnx):
        y = op.Reshape(y, op.ints([0, 0, d, oc], "y_shape"))
        if not layout:
            y = op.Transpose(y, perm=[0, 2, 1, 3])
    y_h = outs[1] if len(outs) > 1 else y
    if len(outs) > 1 and layout:
        y_h = op.Transpose(y_h, perm=[1, 0, 2])
    return [y, y_h][: len(node.outputs)]


def _import_dropout(op: OpBuilder, node: ir.Node) -> list[ir.Value] | None:
    """ONNX Dropout(data, ratio, training_mode) -> Dropout(p, is_test). The seed attribute
    becomes the seed input; without it the dropout draws from no explicit key (the explicit_rng
    pass gives it one). A used mask output (bool, one byte an element) keeps the ONNX op."""
    if _used(node.outputs[1] if len(node.outputs) > 1 else None):
        return None
    inputs = list(node.inputs) + [None, None]
    ratio = _constant(node, inputs[1], "ratio")
    training = _constant(node, inputs[2], "training_mode")
    p = 0.5 if ratio is None else float(ratio)
    is_test = 0 if training is not None and bool(training) else 1
    seed = node.attributes.get("seed")
    seed_v = None
    if seed is not None and not is_test:
        seed_v = op.const(np.array([int(seed.value)], np.int64), "seed")
    y = op.Dropout(inputs[0], seed_v, _domain=fir.DOMAIN, _name=node.name, p=p, is_test=is_test)
    return [y]


_IMPORTS = {"GRU": _import_gru, "Dropout": _import_dropout}
