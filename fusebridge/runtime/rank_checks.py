"""Axes of inference dropouts whose input rank is unknown until the model runs.

An MXNet symbol declares no shapes, so `Dropout(axes=(99,))` on a rank-3 input cannot be refused at
load, and the `inference_dropout` pass leaves such a dropout in the graph rather than fold its axes
away unchecked. Run as a kernel step it would cut the ONNX Runtime partition around it, a slower run
(docs/performance.md, "Measurements behind the code"), so the Session lowers it to what it computes
(Identity, or Mul for downgrade_in_infer) inside that partition and checks its axes against the rank
its input has: in the first run of each signature of input ranks of the step that makes it
(onnx_partition.py asks ONNX Runtime for the value then), or at every run where a step of ours or an
alias makes it (a dict look-up)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.graph.builder import model_opset
from fusebridge.graph.checks import describe
from fusebridge.ops.dropout import check_axes_fit
from fusebridge.ops.lowering import lower_to_standard

# value name -> check(the value's array): raises ModelFormatError naming the dropout
Checks = dict[str, Callable[[np.ndarray], None]]


def _unranked_dropout(node: ir.Node) -> bool:
    if not conventions.is_fusebridge(node) or node.op_type != "Dropout":
        return False
    attrs = ops.schema("Dropout").parse(node)
    return bool(attrs.is_test and attrs.axes) and node.inputs[0].shape is None


def _check(node: ir.Node, axes: tuple[int, ...]) -> Callable[[np.ndarray], None]:
    where = f"Session: {describe(node)}: "
    return lambda x: check_axes_fit(axes, x, where)


def defer_axes_checks(model: ir.Model) -> tuple[ir.Model, Checks]:
    """`model` (a copy, where it changes) with every inference dropout of unknown input rank in
    its main graph lowered to its standard form, and the checks of their axes by the name of
    their input. (One inside an If or Loop body stays a step, which checks its axes itself.)"""
    if not any(_unranked_dropout(n) for n in model.graph):
        return model, {}

    model = ir.from_proto(ir.to_proto(model))
    checks = {
        n.inputs[0].name: _check(n, ops.schema("Dropout").parse(n).axes)
        for n in model.graph
        if _unranked_dropout(n)
    }
    lower_to_standard(model.graph, model_opset(model), _unranked_dropout)
    return model, checks
