"""ONNX Loop bodies built with an OpBuilder: their inputs, the body as a graph whose values are
named apart from the outer graph's, and a Loop's scan output in one shape on every runtime. Used
by the lowerings that need a recurrence (crf.py's Viterbi, quantized_gru.py's GRU)."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import conventions
from fusebridge.graph.builder import OpBuilder


def _unique(body: OpBuilder, hint: str) -> str:
    return conventions.unique_name(f"{body.prefix}/{hint}", body.taken)


def body_input(body: OpBuilder, hint: str, dtype: ir.DataType, shape: list) -> ir.Value:
    return ir.Value(name=_unique(body, hint), type=ir.TensorType(dtype), shape=ir.Shape(shape))


def body_graph(body: OpBuilder, inputs: list[ir.Value], outputs: list[ir.Value]) -> ir.Graph:
    """The body as a graph, its values named apart from every outer value: a subgraph names its
    own values from val_0 on, as the outer graph does (an SSA clash for onnx.checker), and
    onnx.reference lets an outer value override a body input of the same name."""
    for node in body.nodes:
        for value in node.outputs:
            value.name = value.name or _unique(body, node.op_type)
    return ir.Graph(inputs, outputs, nodes=body.nodes, name=body.prefix)


def stacked_scan(op: OpBuilder, scan: ir.Value, trips: ir.Value, step_shape: ir.Value) -> ir.Value:
    """A Loop's scan output as [trips, step shape...]: onnxruntime stacks the steps on a new
    axis, onnx.reference concatenates them on axis 0 (np.vstack). allowzero: N may be 0."""
    # Below opset 14 (no allowzero) a 0 copies the scan's own dim, which onnxruntime's
    # stacked scan output has already.
    allowzero = {"allowzero": 1} if op.opset >= 14 else {}
    return op.Reshape(scan, op.Concat(trips, step_shape, axis=0), **allowzero)
