"""ONNX file -> canonical IR: standard GRU becomes FusionGRU (it carries input weights) and
Dropout becomes our Dropout, so that the fuse passes and kernels see them; everything else
stays standard ONNX, run by ONNX Runtime."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass, ShapeInferencePass

from fusebridge import conventions, ops
from fusebridge.errors import (
    ArgumentError,
    Error,
    ModelFormatError,
    UnsupportedOpError,
    in_model_file,
)
from fusebridge.integrations.onnx.gru_shapes import check_gru_inputs
from fusebridge.integrations.onnx.lowering import replace_node
from fusebridge.integrations.onnx.model_file import read_model_proto
from fusebridge.integrations.onnx.standard_ops import OpBuilder, constant_input, model_opset
from fusebridge.kernels.arguments import is_probability
from fusebridge.ops.gru import ONNX_ACTIVATIONS

_ACTIVATIONS = {onnx_name: ours for ours, onnx_name in ONNX_ACTIVATIONS.items()}


def load_onnx(path: str | os.PathLike) -> ir.Model:
    """An ONNX file as canonical IR (GRU and Dropout imported as fusebridge ops). A malformed
    file raises ModelFormatError, what we cannot take UnsupportedOpError, each naming the file
    and the node, value or attribute (model_file.py lists the checks)."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"load: no such ONNX file {str(p)!r}")
    proto = read_model_proto(p)
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as exc:  # onnx_ir raises ValueError and others
        raise ModelFormatError(f"load: {str(p)!r} is not a readable ONNX model: {exc}") from exc
    try:
        _check_text(model)
        import_onnx(model)
        check_fusebridge_nodes(model.graph)
    except Error as exc:
        raise in_model_file(exc, f"load: {str(p)!r}") from exc
    return model


def _check_text(model: ir.Model) -> None:
    """Names and strings are UTF-8 in ONNX; protobuf's proto2 strings do not check that, and
    onnx_ir hands invalid ones over as bytes, which it then cannot write back."""
    texts = [("model doc_string", model.doc_string), ("producer", model.producer_name)]
    graphs = [
        model.graph,
        *(g for n in model.graph.all_nodes() for _, g in conventions.subgraphs(n)),
    ]
    for graph in graphs:
        texts += [("graph name", graph.name), ("graph doc_string", graph.doc_string)]
        texts += [("value name", v.name) for v in [*graph.inputs, *graph.outputs]]
        texts += [("initializer name", name) for name in graph.initializers]
        for node in graph:
            texts += [("node name", node.name), ("op type", node.op_type)]
            texts += [("domain", node.domain), ("node doc_string", node.doc_string)]
            texts += [("value name", v.name) for v in [*node.inputs, *node.outputs] if v]
    for what, text in texts:
        if text is not None and not isinstance(text, str):
            raise ModelFormatError(f"{what} {text!r} is not valid UTF-8")


def check_fusebridge_nodes(graph: ir.Graph) -> None:
    """Every fusebridge node (subgraphs included) against its schema: a known op, its inputs
    and outputs, its attributes' types and values, a GRU's constant weights' shapes
    (ModelFormatError otherwise)."""
    for node in ir.traversal.RecursiveGraphIterator(graph):
        if not conventions.is_fusebridge(node):
            continue
        if node.op_type not in ops.SCHEMAS:
            raise UnsupportedOpError(
                f"{conventions.DOMAIN}.{node.op_type} node {node.name!r}: unknown op, expected "
                f"one of {sorted(ops.SCHEMAS)}"
            )
        s = ops.SCHEMAS[node.op_type]
        try:
            s.check_arity(node)
            s.attribute_values(node)
        except ArgumentError as exc:
            raise ModelFormatError(str(exc)) from exc
        if node.op_type in ("GRU", "FusionGRU"):
            check_gru_inputs(node)


def import_onnx(model: ir.Model) -> ir.Model:
    """Rewrites `model` in place: ONNX GRU -> FusionGRU, ONNX Dropout -> Dropout."""
    if conventions.DOMAIN in model.opset_imports:
        return model  # written by us: our ops are there already
    # Weights given by Constant nodes (some exporters) become initializers, as torch's are.
    LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    graph = model.graph
    taken = {v.name for v in graph.initializers.values()}
    opset = model_opset(model)
    imported = False
    for node in list(graph):
        if node.domain not in ("", "ai.onnx") or node.op_type not in _IMPORTS:
            continue
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken, opset)
        outputs = _IMPORTS[node.op_type](op, node)
        if outputs is not None:
            replace_node(graph, node, op, outputs)
            imported = True
    if imported:
        model.opset_imports[conventions.DOMAIN] = conventions.DOMAIN_VERSION
        ShapeInferencePass()(model)  # types for the values the import made
    return model


def _where(node: ir.Node) -> str:
    return f"ONNX {node.op_type} node {node.name!r}"


def _constant(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    where = f"{_where(node)}: input {what}"
    return constant_input(value, where, "importing it as a fused op needs a constant")


def _scalar(node: ir.Node, value: ir.Value | None, what: str, kind: type) -> object | None:
    """A one-element constant input of the numpy kind `kind`, as a numpy scalar."""
    array = _constant(node, value, what)
    if array is None:
        return None
    if array.size != 1 or not np.issubdtype(array.dtype, kind):
        raise ModelFormatError(
            f"{_where(node)}: input {what} {value.name!r} is {array.dtype} {list(array.shape)}, "
            f"expected a {np.dtype(kind).name if kind is np.bool_ else 'float'} scalar"
        )
    return array.reshape(-1)[0]


def _used(value: ir.Value | None) -> bool:
    return value is not None and (bool(value.uses()) or value.is_graph_output())


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
            f"{_where(node)}: attribute {name} = {value!r}, expected {kind.__name__}"
        )
    if choices and value not in choices:
        raise ModelFormatError(
            f"{_where(node)}: attribute {name} = {value!r}, expected one of {list(choices)}"
        )
    return value


def _gru_activation(node: ir.Node, d: int) -> tuple[str, str]:
    """(gate_activation, activation), one pair for every direction."""
    names = _attribute(node, "activations", ["Sigmoid", "Tanh"] * d)
    alphas = _attribute(node, "activation_alpha", None)
    betas = _attribute(node, "activation_beta", None)
    if len(names) != 2 * d:
        raise ModelFormatError(
            f"{_where(node)}: activations {names}: {len(names)} names, expected {2 * d} (a gate "
            f"and a candidate activation for each of {d} direction(s))"
        )
    if names[:2] * d != names:
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


def _float_weight(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    """A weight input as a constant of a floating type (ONNX GRU's T)."""
    array = _constant(node, value, what)
    if array is not None and not np.issubdtype(array.dtype, np.floating):
        raise ModelFormatError(
            f"{_where(node)}: input {what} {value.name!r} is {array.dtype}, expected a float type"
        )
    return array


def _gru_weights(node: ir.Node, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """W [D, 3H, I], R [D, 3H, H] and B [D, 6H] (or None), their shapes checked."""
    inputs = list(node.inputs) + [None] * 3
    w, r, b = (_float_weight(node, inputs[i], what) for i, what in ((1, "W"), (2, "R"), (3, "B")))
    if w is None or r is None:
        raise ModelFormatError(f"{_where(node)}: inputs W and R are required")
    oc = r.shape[-1] if r.ndim == 3 else 0
    if oc == 0 or r.shape != (d, 3 * oc, oc):
        raise ModelFormatError(
            f"{_where(node)}: R {list(r.shape)}, expected [{d}, 3 * hidden, hidden] with hidden "
            f">= 1 ({d} direction(s))"
        )
    if w.ndim != 3 or w.shape[:2] != (d, 3 * oc):
        raise ModelFormatError(
            f"{_where(node)}: W {list(w.shape)}, expected [{d}, {3 * oc}, input size] for "
            f"{d} direction(s) of hidden size {oc} (from R)"
        )
    if b is not None and b.shape != (d, 6 * oc):
        raise ModelFormatError(
            f"{_where(node)}: B {list(b.shape)}, expected [{d}, {6 * oc}] for {d} "
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
            f"{_where(node)}: input X {dims}, expected [steps, batch, {input_size}] (the input "
            "size from W)"
        )


def _import_gru(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """ONNX GRU (z, r, h gates = our update, reset, candidate; h = (1 - z) * h~ + z * h_prev =
    origin_mode 1) -> FusionGRU in the same padded layout: Wx = W^T, Wh = R^T per direction,
    bias = Wb, bias_h = Rb. Y and Y_h are put back into ONNX's layouts by standard nodes."""
    inputs = list(node.inputs) + [None] * (6 - len(node.inputs))
    x, lens, h0 = inputs[0], inputs[4], inputs[5]
    direction = _attribute(node, "direction", "forward", ("forward", "reverse", "bidirectional"))
    layout = _attribute(node, "layout", 0, (0, 1))
    linear_before_reset = _attribute(node, "linear_before_reset", 0, (0, 1))
    if node.attributes.get("clip") is not None:
        raise UnsupportedOpError(f"{_where(node)}: clip is not supported by the fused GRU")
    d = 2 if direction == "bidirectional" else 1
    w, r, b = _gru_weights(node, d)
    oc = r.shape[-1]
    hidden = _attribute(node, "hidden_size", oc)
    if hidden != oc:
        raise ModelFormatError(f"{_where(node)}: hidden_size {hidden}, but R has {oc} columns")
    _check_gru_input(node, x, w.shape[2])
    b = np.zeros((d, 6 * oc), np.float32) if b is None else b
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
        [x, lens, *weights, *biases, h0],
        attrs,
        domain=conventions.DOMAIN,
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
    ratio = _scalar(node, inputs[1], "ratio", np.floating)
    training = _scalar(node, inputs[2], "training_mode", np.bool_)
    p = 0.5 if ratio is None else float(ratio)
    if not is_probability(p):
        raise ModelFormatError(f"{_where(node)}: ratio {p}, expected a probability in [0, 1]")
    is_test = 0 if training is not None and bool(training) else 1
    seed = node.attributes.get("seed")
    seed_v = None
    if seed is not None and not is_test:
        # An int by the spec; a float from some exporters (an in-memory model: a file's types
        # are checked already).
        value = seed.value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and -(2**63) <= value < 2**63)
        ):
            raise ModelFormatError(
                f"{_where(node)}: attribute seed = {value!r}, expected an int64 value"
            )
        seed_v = op.const(np.array([int(value)], np.int64), "seed")
    y = op.Dropout(
        inputs[0], seed_v, _domain=conventions.DOMAIN, _name=node.name, p=p, is_test=is_test
    )
    return [y]


_IMPORTS = {"GRU": _import_gru, "Dropout": _import_dropout}
