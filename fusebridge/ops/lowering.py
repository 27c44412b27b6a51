"""fusebridge ops -> standard ONNX subgraphs at the model's opset (the portable file, and the
nodes the Session's placement puts in ONNX Runtime): each op's own lowering (OpDef.lower, in
its module) builds the subgraph; this puts it in the graph. What ONNX cannot express raises
UnsupportedOpError naming the node and why."""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.builder import OpBuilder, replace_node
from fusebridge.graph.checks import describe


def lower_to_standard(
    graph: ir.Graph,
    opset: int = conventions.ONNX_OPSET,
    only: Callable[[ir.Node], bool] | None = None,
) -> dict[str, int]:
    """Every fusebridge node of `graph` (those `only` accepts, when given: the Session's
    placement lowers the nodes it puts in ONNX Runtime) replaced by standard ONNX nodes of
    standard opset `opset` (the model's); how many of each."""
    taken = {v.name for v in graph.initializers.values()}
    counts: dict[str, int] = {}
    for node in list(graph):
        if not conventions.is_fusebridge(node) or (only is not None and not only(node)):
            continue
        lower = ops.op(node.op_type).lower
        if lower is None:
            raise UnsupportedOpError(f"{describe(node)}: no standard ONNX form")
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken, opset)
        replace_node(graph, node, op, lower(op, node))
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
