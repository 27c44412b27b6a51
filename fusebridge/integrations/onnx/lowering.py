"""fusebridge ops -> standard ONNX subgraphs at the model's opset, for the portable file: each
op's own lowering (its module in fusebridge/ops/) builds the subgraph; this puts it in the
graph. What ONNX cannot express raises UnsupportedOpError naming the node and why."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.onnx.standard_ops import OpBuilder
from fusebridge.ops.common import where


def replace_node(graph: ir.Graph, node: ir.Node, op: OpBuilder, outputs: list[ir.Value]) -> None:
    """Puts the builder's nodes and initializers where `node` was; its outputs (names, types,
    graph outputs) pass to `outputs`."""
    for value in op.initializers:
        graph.register_initializer(value)
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], list(op.nodes), list(node.outputs)[: len(outputs)], outputs
    )


def lower_to_standard(graph: ir.Graph, opset: int = conventions.ONNX_OPSET) -> dict[str, int]:
    """Every fusebridge node of `graph` replaced by standard ONNX nodes of standard opset
    `opset` (the model's); how many of each."""
    taken = {v.name for v in graph.initializers.values()}
    counts: dict[str, int] = {}
    for node in list(graph):
        if not conventions.is_fusebridge(node):
            continue
        lower = ops.op(node.op_type).lower
        if lower is None:
            raise UnsupportedOpError(f"{where(node)}: no standard ONNX form")
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken, opset)
        replace_node(graph, node, op, lower(op, node))
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
