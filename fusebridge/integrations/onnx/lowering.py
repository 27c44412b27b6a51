"""fusebridge ops -> standard ONNX (opset 17) subgraphs, for the portable file.

Each lowering takes the builder and the node and returns the values that replace the node's
outputs. What ONNX cannot express raises UnsupportedOpError naming the node and why."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.onnx import pooling, standard_ops, viterbi
from fusebridge.integrations.onnx.gru_shapes import check_gru_inputs
from fusebridge.integrations.onnx.standard_ops import OpBuilder
from fusebridge.kernels import negate_update_gate
from fusebridge.op_kernels import inference_dropout_scale

# Identity is ONNX's Affine(alpha 1, beta 0); ONNX Runtime's Affine defaults are not that.
_ONNX_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "identity": "Affine"}


def _where(node: ir.Node) -> str:
    return f"{fir.DOMAIN}.{node.op_type} node {node.name!r}"


def _inputs(node: ir.Node) -> list[ir.Value | None]:
    return list(node.inputs) + [None] * (len(fir.schema(node.op_type).inputs) - len(node.inputs))


def _constant(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    why = "the portable export needs it as a constant (it converts it to ONNX GRU's layout)"
    return standard_ops.constant_input(value, f"{_where(node)}: {what}", why)


def lower_gru(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """A padded (tnc/ntc) GRU or FusionGRU as ONNX GRU: W = Wx^T and R = Wh^T per direction,
    B = [bias | bias_h] (the same two biases in the same places), sequence_lens int32,
    initial_h; origin_mode 0 by update-gate negation. ONNX Runtime runs only layout 0, so ntc
    is transposed around it."""
    attrs = fir.schema(node.op_type).attribute_values(node)
    check_gru_inputs(node)
    if attrs["layout"] == "lod":
        raise UnsupportedOpError(
            f"{_where(node)}: layout lod has no ONNX GRU form; the portable export pads it first"
        )
    if node.op_type == "GRU":
        x, lengths, wh_v, b_v, bh_v, h0 = _inputs(node)
        wx_v = None
    else:
        x, lengths, wx_v, wh_v, b_v, bh_v, h0 = _inputs(node)
    d = 2 if attrs["direction"] == "bidirectional" else 1
    wh = _constant(node, wh_v, "Wh")
    oc = wh.shape[-2]
    wh = wh.reshape(d, oc, 3 * oc)
    wx = _constant(node, wx_v, "Wx")
    # The GRU op's input is projected already: an identity W hands it through.
    wx = (
        np.broadcast_to(np.eye(3 * oc, dtype=np.float32), (d, 3 * oc, 3 * oc)) if wx is None else wx
    )
    wx = wx.reshape(d, -1, 3 * oc)
    zeros = np.zeros((d, 3 * oc), np.float32)
    bias = _constant(node, b_v, "B")
    bias_h = _constant(node, bh_v, "B_h")
    bias = zeros if bias is None else bias.reshape(d, 3 * oc)
    bias_h = zeros if bias_h is None else bias_h.reshape(d, 3 * oc)
    if attrs["origin_mode"] == 0:
        if attrs["gate_activation"] != "sigmoid":
            raise UnsupportedOpError(
                f"{_where(node)}: origin_mode 0 with gate_activation {attrs['gate_activation']} "
                "cannot be written as ONNX GRU, which computes h = (1 - z) * h~ + z * h_prev; "
                "only a sigmoid gate turns into that by negating its weights "
                "(sigmoid(-a) = 1 - sigmoid(a))"
            )
        wx, wh, bias, bias_h = negate_update_gate(wx, wh, bias, bias_h)
    w = op.const(np.ascontiguousarray(wx.transpose(0, 2, 1), np.float32), "W")
    r = op.const(np.ascontiguousarray(wh.transpose(0, 2, 1), np.float32), "R")
    b = op.const(np.concatenate([bias, bias_h], axis=1).astype(np.float32), "B")
    if attrs["layout"] == "ntc":
        x = op.Transpose(x, perm=[1, 0, 2])
    if h0 is not None:
        h0 = op.Reshape(h0, op.ints([d, -1, oc], "h0_shape"))
    if lengths is not None and lengths.dtype != ir.DataType.INT32:
        lengths = op.Cast(lengths, to=ir.DataType.INT32)
    pair = [_ONNX_ACTIVATIONS[attrs["gate_activation"]], _ONNX_ACTIVATIONS[attrs["activation"]]]
    gru_attrs: dict[str, object] = {
        "hidden_size": oc,
        "direction": attrs["direction"],
        "linear_before_reset": attrs["linear_before_reset"],
        "activations": pair * d,
    }
    if "Affine" in pair:
        # One (1, 0) per activation: right whether a runtime gives the list to every
        # activation in order or only to those that take parameters.
        gru_attrs["activation_alpha"] = [1.0] * (2 * d)
        gru_attrs["activation_beta"] = [0.0] * (2 * d)
    y, y_h = op.GRU(x, w, r, b, lengths, h0, _outputs=2, **gru_attrs)
    # Y [T, D, N, OC] -> ours: [T, N, D*OC] (tnc) or [N, T, D*OC] (ntc), forward half first.
    perm = [0, 2, 1, 3] if attrs["layout"] == "tnc" else [2, 0, 1, 3]
    y = op.Reshape(op.Transpose(y, perm=perm), op.ints([0, 0, -1], "y_shape"))
    return [y, y_h][: len(node.outputs)]


def lower_lod_to_padded(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    layout = fir.schema(node.op_type).attribute_values(node)["layout"]
    return [standard_ops.lod_to_padded(op, node.inputs[0], node.inputs[1], layout)]


def lower_padded_to_lod(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    layout = fir.schema(node.op_type).attribute_values(node)["layout"]
    return [standard_ops.padded_to_lod(op, node.inputs[0], node.inputs[1], layout)]


def lower_dropout(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    attrs = fir.schema(node.op_type).attribute_values(node)
    if not attrs["is_test"]:
        raise UnsupportedOpError(
            f"{_where(node)}: a training dropout (is_test 0) draws its mask from Philox "
            "(seed, offset); ONNX Dropout's generator is the runtime's own, so the bits would "
            "differ: export the inference graph"
        )
    if len(node.outputs) > 1:
        raise UnsupportedOpError(f"{_where(node)}: an inference dropout has no mask output")
    scale = inference_dropout_scale(attrs)
    x = node.inputs[0]
    if scale == 1.0:
        return [op.Identity(x)]
    return [op.Mul(x, op.CastLike(op.const(np.float32(scale), "keep_scale"), x))]


def lower_crf_decoding(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    emission, offsets, transition, label = _inputs(node)
    return [viterbi.crf_decoding(op, emission, offsets, transition, label)]


def lower_sequence_pool(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    attrs = fir.schema(node.op_type).attribute_values(node)
    return [pooling.sequence_pool(op, *node.inputs, attrs["pooltype"], attrs["pad_value"])]


def lower_sequence_lengths(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    # Plain ONNX has no way to refuse a bad length: the export casts, as MXNet itself does.
    return [op.Cast(node.inputs[0], to=ir.DataType.INT64)]


LOWERINGS: dict[str, Callable[[OpBuilder, ir.Node], list[ir.Value]]] = {
    "GRU": lower_gru,
    "FusionGRU": lower_gru,
    "LoDToPadded": lower_lod_to_padded,
    "PaddedToLoD": lower_padded_to_lod,
    "Dropout": lower_dropout,
    "CRFDecoding": lower_crf_decoding,
    "SequencePool": lower_sequence_pool,
    "SequenceLengths": lower_sequence_lengths,
}


def replace_node(graph: ir.Graph, node: ir.Node, op: OpBuilder, outputs: list[ir.Value]) -> None:
    """Puts the builder's nodes and initializers where `node` was; its outputs (names, types,
    graph outputs) pass to `outputs`."""
    for value in op.initializers:
        graph.register_initializer(value)
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], list(op.nodes), list(node.outputs)[: len(outputs)], outputs
    )


def lower_to_standard(graph: ir.Graph) -> dict[str, int]:
    """Every fusebridge node of `graph` replaced by standard ONNX nodes; how many of each."""
    taken = {v.name for v in graph.initializers.values()}
    counts: dict[str, int] = {}
    for node in list(graph):
        if not fir.is_fusebridge(node):
            continue
        if node.op_type not in LOWERINGS:
            raise UnsupportedOpError(f"{_where(node)}: no standard ONNX form")
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken)
        replace_node(graph, node, op, LOWERINGS[node.op_type](op, node))
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
