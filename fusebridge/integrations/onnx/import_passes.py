"""The ONNX import as passes: each standard op we run on our kernels (GRU, Dropout) is replaced
by our op, node by node, by its converter. A converter that refuses a node (an attribute our op
does not take, a weight computed in the graph) raises UnsupportedOpError: the node then stays
the standard op, run by ONNX Runtime, and the refusal (node, why) goes into the pass's report.
A malformed node (ModelFormatError) is an error of the file and still raises."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.fuse_passes.passes import FusePass
from fusebridge.fuse_passes.report import PassReport
from fusebridge.graph.builder import OpBuilder, constant_input, model_opset, replace_node
from fusebridge.integrations.converters import ir_node_label

# (builder, node) -> the values that replace the node's outputs, in order; None for an output
# nothing reads, which then goes with the node.
Converter = Callable[[OpBuilder, ir.Node], list[ir.Value | None]]


def where(node: ir.Node) -> str:
    """How the import's errors name a node: `ONNX GRU node 'the_gru'` (ir_node_label)."""
    return ir_node_label(node)


def constant(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    """The data of a constant input (None when absent); UnsupportedOpError for a computed one."""
    where_input = f"{where(node)}: input {what}"
    return constant_input(value, where_input, "importing it as a fused op needs a constant")


def is_used(value: ir.Value | None) -> bool:
    return value is not None and (bool(value.uses()) or value.is_graph_output())


class ImportOp(FusePass):
    """Every standard-domain `op_type` node of the main graph through `convert`; `kept` lists
    op types left to ONNX Runtime by design (LSTM, RNN), named in the report's notes."""

    def __init__(
        self, name: str, op_type: str, convert: Converter, kept: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.op_type = op_type
        self.convert = convert
        self.kept = kept

    def run(self, model: ir.Model) -> PassReport:
        graph = model.graph
        taken = {v.name for v in graph.initializers.values()}
        opset = model_opset(model)
        imported = 0
        refusals = []
        notes = []
        for node in list(graph):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in self.kept:
                notes.append(f"{where(node)} stays a standard op (run by ONNX Runtime)")
            if node.op_type != self.op_type:
                continue
            op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken, opset)
            try:
                outputs = self.convert(op, node)
            except UnsupportedOpError as exc:
                refusals.append((node.name, _reason(node, exc)))
                continue
            replace_node(graph, node, op, outputs)
            imported += 1
        if imported:
            model.opset_imports[conventions.DOMAIN] = conventions.DOMAIN_VERSION
        return PassReport(self.name, imported > 0, imported, tuple(refusals), tuple(notes))


def _reason(node: ir.Node, exc: UnsupportedOpError) -> str:
    """The refusal without the node's name, which the report gives already."""
    text = str(exc)
    prefix = f"{where(node)}: "
    why = text.removeprefix(prefix)
    return f"{why}; the standard {node.op_type} stays (run by ONNX Runtime)"
