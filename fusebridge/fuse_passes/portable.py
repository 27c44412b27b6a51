"""The passes that write a model in standard ONNX ops only, for plain ONNX Runtime (the
`lowering` and `portable` pipelines).

`to_padded_recurrences` puts each LoD GRU between a LoDToPadded and a PaddedToLoD (ONNX GRU
takes right-padded [T, N, C] + sequence_lens); `cancel_reorders` removes a PaddedToLoD ->
LoDToPadded pair over the same offsets, so stacked GRUs pass padded data straight on;
`lower_to_standard` writes what is left of ours in standard ops (integrations/onnx/lowering.py,
each op's lowering); then one copy of the offsets arithmetic the lowered ops each built, no
unused weights, no `fusebridge` opset, types for the new values, and onnx.checker."""

from __future__ import annotations

from typing import ClassVar

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import (
    CommonSubexpressionEliminationPass,
    RemoveUnusedNodesPass,
)

from fusebridge import conventions, ops
from fusebridge.errors import ModelFormatError
from fusebridge.fuse_passes.passes import FusePass, IrPass
from fusebridge.fuse_passes.report import PassReport
from fusebridge.graph.builder import OpBuilder, model_opset, replace_node
from fusebridge.graph.contrib_ops import lower_contrib_ops
from fusebridge.graph.type_inference import InferTypes
from fusebridge.ops.lod import LOD_TO_PADDED, PADDED_TO_LOD, seq_lens
from fusebridge.ops.lowering import lower_to_standard


def to_padded_recurrences(graph: ir.Graph, opset: int = conventions.ONNX_OPSET) -> int:
    """A recurrence (OpDef.recurrence) of layout lod: R(X, offsets, ...) ->
    PaddedToLoD(R(LoDToPadded(X), seq_lens, ..., layout tnc)). Its other outputs (a GRU's
    Y_last [D, N, OC]) are the same either way."""
    taken = {v.name for v in graph.initializers.values()}
    count = 0
    for node in list(graph):
        if not conventions.is_fusebridge(node) or node.op_type not in ops.REGISTRY:
            continue
        d = ops.op(node.op_type)
        if d.recurrence is None:
            continue
        attrs = d.schema.attribute_values(node)
        if attrs[d.recurrence.layout] != "lod":
            continue
        x, offsets = node.inputs[0], d.input(node, d.recurrence.lengths)
        op = OpBuilder(node.name or node.outputs[0].name, taken, opset)
        inputs = list(node.inputs)
        inputs[0] = op.LoDToPadded(x, offsets, _domain=conventions.DOMAIN)
        inputs[d.slots.index(d.recurrence.lengths)] = seq_lens(op, offsets)
        outputs = op.op_multi_out(
            node.op_type,
            inputs,
            {**attrs, d.recurrence.layout: "tnc"},
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
        if not LOD_TO_PADDED.matches(node):
            continue
        source = node.inputs[0].producer()
        if (
            not PADDED_TO_LOD.matches(source)
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


class ToPaddedRecurrences(FusePass):
    name = "to_padded_recurrences"
    runs_after: ClassVar[dict[str, str]] = {
        "shape_inference": "the nodes that replace ours take the types inferred from our schemas"
    }

    def run(self, model: ir.Model) -> PassReport:
        count = to_padded_recurrences(model.graph, model_opset(model))
        return PassReport(self.name, count > 0, count)


class CancelReorders(FusePass):
    name = "cancel_reorders"
    runs_after: ClassVar[dict[str, str]] = {
        "to_padded_recurrences": "it puts the reorder pairs between stacked GRUs"
    }

    def run(self, model: ir.Model) -> PassReport:
        count = cancel_reorders(model.graph)
        return PassReport(self.name, count > 0, count)


class LowerToStandard(FusePass):
    """Every fusebridge node as standard ONNX nodes; UnsupportedOpError (naming the node and
    why) for what ONNX cannot express."""

    name = "lower_to_standard"
    runs_after: ClassVar[dict[str, str]] = {
        "to_padded_recurrences": "a LoD GRU has no ONNX GRU form until it is padded",
        "cancel_reorders": "it cancels our reorder ops, which lowering replaces",
    }

    def run(self, model: ir.Model) -> PassReport:
        counts = lower_to_standard(model.graph, model_opset(model))
        notes = tuple(f"{op} x{n}" for op, n in sorted(counts.items()))
        return PassReport(self.name, bool(counts), sum(counts.values()), notes=notes)


class LowerContribOps(FusePass):
    """ONNX Runtime's contrib ops (FusedMatMul, FusedConv, ...) as standard ONNX nodes, and the
    opsets no node uses dropped; UnsupportedOpError naming every other op of a foreign domain,
    before anything is rewritten (integrations/onnx/contrib_ops.py)."""

    name = "lower_contrib_ops"

    def run(self, model: ir.Model) -> PassReport:
        counts = lower_contrib_ops(model.graph, model_opset(model))
        # The opsets no node uses any more (ONNX Runtime's optimizer declares all of its own).
        used = {n.domain for n in model.graph.all_nodes()} | {"", conventions.DOMAIN}
        for domain in [d for d in model.opset_imports if d not in used]:
            del model.opset_imports[domain]
        notes = tuple(f"{op} x{n}" for op, n in sorted(counts.items()))
        return PassReport(self.name, bool(counts), sum(counts.values()), notes=notes)


class DropFusebridgeOpset(FusePass):
    name = "drop_fusebridge_opset"
    runs_after: ClassVar[dict[str, str]] = {
        "lower_to_standard": "the opset stays while a node of ours does"
    }

    def run(self, model: ir.Model) -> PassReport:
        return PassReport(self.name, model.opset_imports.pop(conventions.DOMAIN, None) is not None)


class OnnxChecker(FusePass):
    """onnx.checker on the model; ModelFormatError with its message when it fails. A model
    whose graph inputs or outputs have no rank (MXNet symbols declare none) runs, but
    onnx.checker refuses it outright: it is left unchecked, the report says so, and save_onnx
    asks for the ranks before it writes a file."""

    name = "onnx_checker"
    runs_after: ClassVar[dict[str, str]] = {
        "drop_fusebridge_opset": "it checks the standard model, our opset gone"
    }

    def run(self, model: ir.Model) -> PassReport:
        graph = model.graph
        io = (*graph.inputs, *graph.outputs)
        rankless = [v.name for v in io if v.type is None or v.shape is None]
        if rankless:
            note = f"not checked: graph inputs/outputs {rankless} have no rank"
            return PassReport(self.name, False, notes=(note,))
        try:
            onnx.checker.check_model(ir.to_proto(model))
        except onnx.checker.ValidationError as exc:
            raise ModelFormatError(f"{self.name}: the model is not valid ONNX: {exc}") from exc
        return PassReport(self.name, False, notes=("valid ONNX",))


def lowering_passes() -> list[FusePass]:
    """The passes from a model with our ops to one in standard ops only, in order."""
    lowered = {"lower_to_standard": "it works on what lowering wrote"}
    return [
        # Types and ranks from our schemas while our ops are still there: the standard nodes
        # that replace them inherit what their outputs were (a graph output needs both).
        IrPass("shape_inference", InferTypes),
        LowerContribOps(),
        ToPaddedRecurrences(),
        CancelReorders(),
        LowerToStandard(),
        # Each lowered op builds its own offsets arithmetic (sentence starts, lengths): one copy.
        IrPass("common_subexpression_elimination", CommonSubexpressionEliminationPass, lowered),
        # And the weights in our layout, now unused.
        IrPass("remove_unused_nodes", RemoveUnusedNodesPass, lowered),
        DropFusebridgeOpset(),
        # Types for the values the rewrites made.
        IrPass(
            "final_shape_inference",
            InferTypes,
            {**lowered, "lower_contrib_ops": "it works on what that wrote"},
        ),
        OnnxChecker(),
    ]
