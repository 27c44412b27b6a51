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
from fusebridge.ops.lowering import lower_to_standard

# value name -> check(the value's array): raises ModelFormatError naming the node
Checks = dict[str, Callable[[np.ndarray], None]]


def _deferred(node: ir.Node) -> Callable[[np.ndarray], None] | None:
    """The node's check at run (OpDef.run_check), None where it needs none."""
    if not conventions.is_fusebridge(node):
        return None
    run_check = ops.op(node.op_type).run_check
    return None if run_check is None else run_check(node)


def defer_run_checks(model: ir.Model) -> tuple[ir.Model, Checks]:
    """`model` (a copy, where it changes) with every node of its main graph that needs a check
    at run (today: an inference dropout of unknown input rank) lowered to its standard form,
    and those checks by the name of the node's first input. (One inside an If or Loop body
    stays a step, which checks itself.)"""
    if not any(_deferred(n) for n in model.graph):
        return model, {}
    model = ir.from_proto(ir.to_proto(model))
    checks = {n.inputs[0].name: check for n in model.graph if (check := _deferred(n))}
    lower_to_standard(model.graph, model_opset(model), lambda n: _deferred(n) is not None)
    return model, checks
