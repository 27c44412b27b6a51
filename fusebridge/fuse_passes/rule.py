"""FusionRule: an onnxscript rewrite rule (pattern, check, rewrite) that says why it refuses.

Rules are built with remove_nodes=False so that the matcher does not reject a match whose
inner values have other consumers with a generic message: `check` tests that itself and
records the precise reason (the rewriter removes the replaced nodes once they are unused)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern
from onnxscript.rewriter._basics import MatchResult

from fusebridge import conventions
from fusebridge.ops import recurrence


class FusionRule(pattern.RewriteRuleClassBase):
    name: str = ""
    # Rules that must run before this one in a pipeline, each with the reason.
    runs_after: ClassVar[dict[str, str]] = {}
    # Match commutative ops (Add, Mul) with their inputs either way round.
    commute: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__(self.name, remove_nodes=False)
        self.fired = 0
        self.refusals: list[tuple[str, str]] = []
        self._graph: ir.Graph | None = None

    # -- used by check ---------------------------------------------------------------------
    def begin(self, context) -> None:
        """Called first by every check: the graph that new initializers must not clash with."""
        self._graph = context.graph_or_function

    @staticmethod
    def accept() -> MatchResult:
        return MatchResult()

    def refuse(self, at: ir.Node, reason: str) -> MatchResult:
        """A near miss: recorded for the report."""
        self.refusals.append((at.outputs[0].name or at.op_type, reason))
        return MatchResult().fail(reason)

    @staticmethod
    def skip(reason: str) -> MatchResult:
        """Not a candidate at all (not reported)."""
        return MatchResult().fail(reason)

    @staticmethod
    def consumers(value: ir.Value) -> list[ir.Node]:
        return [u.node for u in value.uses()]

    def second_consumer(self, value: ir.Value, what: str) -> str | None:
        """The refusal reason when `value` has a consumer besides the pattern's one, or is a
        graph output."""
        users = self.consumers(value)
        if value.is_graph_output():
            return f"the {what} {value.name!r} is a graph output"
        if len(users) > 1:
            others = ", ".join(f"{n.op_type} {n.name!r}" for n in users)
            return f"the {what} {value.name!r} has a second consumer ({others})"
        return None

    @staticmethod
    def constant(value: ir.Value | None) -> np.ndarray | None:
        if value is None or value.const_value is None or value.is_graph_input():
            return None
        return value.const_value.numpy()

    def projection_refusal(
        self, w1: np.ndarray, weights: tuple[int, int, int], names: tuple[str, str], projected,
        b=None, fc_out=None,
    ) -> str | None:  # fmt: skip
        """Why MatMul(x, w1) [+ b] cannot fold into a recurrence's input weights of
        `weights` = (directions, inputs, gate columns), or None. names: (the weight, the op)."""
        reason = recurrence.projection_refusal(w1.shape, weights, names)
        if reason:
            return reason
        ic = weights[1]
        reason = self.second_consumer(projected, "projection output")
        if fc_out is not None:
            reason = reason or self.second_consumer(fc_out, "projection output (after the bias)")
            bias = self.constant(b)
            if bias is None or bias.size != ic:
                return f"the bias {b.name!r} is not a constant of {ic} values"
        return reason

    # -- used by rewrite -------------------------------------------------------------------
    def new_initializer(self, op, array: np.ndarray, hint: str) -> ir.Value:
        """A new initializer with a name no other value has: never a changed shared tensor."""
        taken = set(self._graph.initializers) if self._graph is not None else set()
        name = conventions.unique_name(hint, taken)
        return op.initializer(ir.tensor(np.ascontiguousarray(array), name=name), name=name)

    def fusebridge_node(
        self,
        op,
        op_type: str,
        inputs: list,
        attrs: dict,
        num_outputs: int = 1,
        name: str = "",
        fires: bool = True,
    ) -> ir.Value | tuple[ir.Value, ...]:
        """The new node; `name` keeps the name of the node it replaces (the one reports and
        explicit_rng's streams call it by), instead of the rewriter's node_<op>_<k>. A rewrite
        that makes several nodes counts one firing (fires=False for the others)."""
        while inputs and inputs[-1] is None:
            inputs.pop()
        self.fired += int(fires)
        outputs = getattr(op, op_type)(
            *inputs,
            _domain=conventions.DOMAIN,
            _version=conventions.DOMAIN_VERSION,
            _outputs=num_outputs,
            **attrs,
        )
        if name:
            (outputs[0] if num_outputs > 1 else outputs).producer().name = name
        return outputs

    @staticmethod
    def second_output_moved(old: ir.Node, outputs: ir.Value | tuple[ir.Value, ...]) -> ir.Value:
        """The replacement's first output. Patterns name the first output only, so a used
        second one (a GRU's Y_last, a dropout's mask) moves to the replacement here; the old
        node is then unused and goes."""
        if len(old.outputs) == 1:
            return outputs
        second = old.outputs[1]
        outputs[1].type, outputs[1].shape = second.type, second.shape
        ir.convenience.replace_all_uses_with(second, outputs[1], replace_graph_outputs=True)
        outputs[1].name, second.name = second.name, None  # a graph output keeps its name
        return outputs[0]

    def as_rewrite_rule(self) -> pattern.RewriteRule:
        """This instance as an onnxscript rule (the classmethod `rule()` would make a new
        instance, whose counts and refusals we would not see)."""
        return pattern.RewriteRule(
            self.pattern, self.rewrite, self.check, name=self.name, remove_nodes=False
        )
