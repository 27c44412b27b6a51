"""quantize_gru: FusionGRU and GRU nodes with constant weights -> QuantizedFusionGRU, the
weights quantized once, here (int8 with a scale per gate column, or bf16). What
`optimize(model, precision=...)` appends to its pipeline; the file it saves holds the quantized
weights, and a Session loading it runs them as they are."""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.fuse_passes.passes import FusePass
from fusebridge.fuse_passes.report import PassReport
from fusebridge.graph.builder import OpBuilder, replace_node
from fusebridge.kernels.qgru_weights import quantize_gru_weights
from fusebridge.ops.gru import FUSION_GRU, GRU_OP


def _constant(op: OpBuilder, precision: str, a: np.ndarray | None, hint: str) -> ir.Value | None:
    return None if a is None else op.const(a, f"{hint}/{precision}")


class QuantizeGRU(FusePass):
    """One pass per precision ("int8", "bf16"), named quantize_gru_<precision>."""

    runs_after: ClassVar[dict[str, str]] = {
        name: "it makes or rewrites the FusionGRU weights that quantize_gru quantizes"
        for name in ("fc_gru", "mul_gru", "canonical_update_gate", "bigru")
    }

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self.name = f"quantize_gru_{precision}"

    @staticmethod
    def _inputs(node: ir.Node) -> dict[str, ir.Value | None]:
        d = FUSION_GRU if FUSION_GRU.matches(node) else GRU_OP
        given = d.inputs(node)
        return {k: given.get(k) for k in ("X", "lengths", "Wx", "Wh", "B", "B_h", "H0")}

    def check(self, node: ir.Node) -> str | None:
        """Why `node` stays float32, or None."""
        for name, value in self._inputs(node).items():
            if name in ("Wx", "Wh", "B", "B_h") and value is not None:
                if value.const_value is None or value.is_graph_input():
                    return f"{name} {value.name!r} is not a constant"
                if not np.all(np.isfinite(value.const_value.numpy())):
                    return f"{name} {value.name!r} holds a value that is not finite"
        return None

    def run(self, model: ir.Model) -> PassReport:
        graph = model.graph
        fired, refusals = 0, []
        taken = {v.name for v in graph.initializers.values()}
        for node in list(graph):
            if not (FUSION_GRU.matches(node) or GRU_OP.matches(node)):
                continue
            why = self.check(node)
            if why:
                refusals.append((node.outputs[0].name or node.op_type, why))
                continue
            given = self._inputs(node)
            arrays = {
                k: None if given[k] is None else given[k].const_value.numpy()
                for k in ("Wx", "Wh", "B", "B_h")
            }
            q = quantize_gru_weights(
                arrays["Wx"], arrays["Wh"], arrays["B"], arrays["B_h"], self.precision
            )
            op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken)
            const = functools.partial(_constant, op, self.precision)
            outputs = op.QuantizedFusionGRU(
                given["X"], given["lengths"],
                const(q.wx, "Wx"), const(q.wx_scale, "Wx_scale"),
                const(q.wh, "Wh"), const(q.wh_scale, "Wh_scale"),
                const(q.bias, "B"), const(q.bias_h, "B_h"), given["H0"],
                _outputs=len(node.outputs), _domain=conventions.DOMAIN, _name=node.name,
                **{a.name: a.value for a in node.attributes.values()},
            )  # fmt: skip
            replace_node(graph, node, op, list(outputs) if len(node.outputs) > 1 else [outputs])
            fired += 1
        return PassReport(self.name, fired > 0, fired, tuple(refusals))
