"""The portable export: a model of standard ONNX ops only, for plain ONNX Runtime.

Three passes after the inference fusions: `to_padded_recurrences` puts each LoD GRU between a
LoDToPadded and a PaddedToLoD (ONNX GRU takes right-padded [T, N, C] + sequence_lens);
`cancel_reorders` removes a PaddedToLoD -> LoDToPadded pair over the same offsets, so stacked
GRUs pass padded data straight on; `lower_to_standard` writes what is left of ours in standard
ops (lowering.py)."""

from __future__ import annotations

import dataclasses

import onnx_ir as ir
from onnx_ir.passes.common import (
    CommonSubexpressionEliminationPass,
    RemoveUnusedNodesPass,
    ShapeInferencePass,
)

from fusebridge import conventions, ops
from fusebridge.fuse_passes import OptimizeReport, optimize
from fusebridge.integrations.onnx import standard_ops
from fusebridge.integrations.onnx.lowering import lower_to_standard, replace_node
from fusebridge.integrations.onnx.standard_ops import OpBuilder


@dataclasses.dataclass(frozen=True)
class PortableReport:
    optimize: OptimizeReport
    padded: int  # LoD GRUs put between reorders
    cancelled: int  # PaddedToLoD -> LoDToPadded pairs removed
    lowered: dict[str, int]  # fusebridge op type -> nodes written in standard ops

    def text(self) -> str:
        lowered = ", ".join(f"{k} x{v}" for k, v in sorted(self.lowered.items())) or "nothing"
        return (
            f"{self.optimize.text()}\nportable: {self.padded} LoD GRU(s) padded, "
            f"{self.cancelled} reorder pair(s) cancelled, lowered to standard ONNX: {lowered}"
        )


def to_padded_recurrences(graph: ir.Graph) -> int:
    """GRU/FusionGRU(X, offsets, layout lod) -> PaddedToLoD(GRU(LoDToPadded(X), seq_lens,
    layout tnc)). Y_last is the same either way ([D, N, OC])."""
    taken = {v.name for v in graph.initializers.values()}
    count = 0
    for node in list(graph):
        if node.op_type not in ("GRU", "FusionGRU") or not conventions.is_fusebridge(node):
            continue
        attrs = ops.schema(node.op_type).attribute_values(node)
        if attrs["layout"] != "lod":
            continue
        x, offsets, *rest = node.inputs
        op = OpBuilder(node.name or node.outputs[0].name, taken)
        padded = op.LoDToPadded(x, offsets, _domain=conventions.DOMAIN)
        lens = standard_ops.seq_lens(op, offsets)
        outputs = op.op_multi_out(
            node.op_type,
            [padded, lens, *rest],
            {**attrs, "layout": "tnc"},
            domain=conventions.DOMAIN,
            num_outputs=len(node.outputs),
            name=node.name,  # errors later on name the node the user had
        )
        y = op.PaddedToLoD(outputs[0], offsets, _domain=conventions.DOMAIN)
        replace_node(graph, node, op, [y, *outputs[1:]])
        count += 1
    return count


def cancel_reorders(graph: ir.Graph) -> int:
    """LoDToPadded(PaddedToLoD(P, offsets), offsets) -> P, when both use the same offsets value
    and layout. P's padding may differ from zeros: padded consumers (GRU with sequence_lens)
    never read it. A PaddedToLoD with other consumers stays for them."""
    count = 0
    for node in list(graph):
        if node.op_type != "LoDToPadded" or not conventions.is_fusebridge(node):
            continue
        source = node.inputs[0].producer()
        if (
            source is None
            or source.op_type != "PaddedToLoD"
            or not conventions.is_fusebridge(source)
            or source.inputs[1] is not node.inputs[1]
            or _layout(source) != _layout(node)
        ):
            continue
        ir.convenience.replace_all_uses_with(
            node.outputs[0], source.inputs[0], replace_graph_outputs=False
        )
        if node.outputs[0].is_graph_output():
            continue  # a graph output keeps its own node
        graph.remove(node, safe=True)
        if not source.outputs[0].uses() and not source.outputs[0].is_graph_output():
            graph.remove(source, safe=True)
        count += 1
    return count


def _layout(node: ir.Node) -> str:
    return ops.schema(node.op_type).attribute_values(node)["layout"]


def portable(model: ir.Model) -> tuple[ir.Model, PortableReport]:
    """A copy of `model` in standard ONNX ops only, and what was done to get there. Raises
    UnsupportedOpError (naming the node and why) for what ONNX cannot express."""
    model, report = optimize(model, "inference")
    # Types and ranks from our schemas while our ops are still there: the standard nodes that
    # replace them inherit what their outputs were (a graph output needs both in a file).
    ShapeInferencePass()(model)
    graph = model.graph
    padded = to_padded_recurrences(graph)
    cancelled = cancel_reorders(graph)
    lowered = lower_to_standard(graph)
    # Each lowered op builds its own offsets arithmetic (sentence starts, lengths): one copy.
    CommonSubexpressionEliminationPass()(model)
    RemoveUnusedNodesPass()(model)  # and the weights in our layout, now unused
    model.opset_imports.pop(conventions.DOMAIN, None)
    ShapeInferencePass()(model)  # types for the values the rewrites made
    return model, PortableReport(report, padded, cancelled, lowered)
