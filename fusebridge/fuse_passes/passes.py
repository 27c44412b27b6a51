"""The one pass type: every transform of a pipeline is an onnx_ir in-place pass whose
PassResult carries a PassReport. A pass has a name and the passes it must run after, each
with the reason (checked when a pipeline is built). RulePass runs one fusion rule; IrPass
runs one of onnx_ir's own passes."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import ClassVar

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet

from fusebridge.fuse_passes.report import PassReport
from fusebridge.fuse_passes.rule import FusionRule


@dataclasses.dataclass
class FusePassResult(ir.passes.PassResult):
    report: PassReport


class FusePass(ir.passes.InPlacePass):
    """Rewrites the model in place; `run` says what it did."""

    name: str = ""
    # Passes that must run before this one in a pipeline, each with the reason.
    runs_after: ClassVar[Mapping[str, str]] = {}

    @abc.abstractmethod
    def run(self, model: ir.Model) -> PassReport: ...

    def call(self, model: ir.Model) -> FusePassResult:
        report = self.run(model)
        return FusePassResult(model, report.changed, report)

    def __repr__(self) -> str:
        return self.name


class RulePass(FusePass):
    """One fusion rule over the whole model; its name and order constraints are the rule's."""

    def __init__(self, rule: type[FusionRule]) -> None:
        self.rule = rule
        self.name = rule.name
        self.runs_after = rule.runs_after

    def run(self, model: ir.Model) -> PassReport:
        rule = self.rule()  # a new one each run: it counts its firings and refusals
        RewriteRuleSet([rule.as_rewrite_rule()], commute=rule.commute).apply_to_model(model)
        tidy_after_rewrite(model.graph)
        return PassReport(self.name, rule.fired > 0, rule.fired, tuple(rule.refusals))


def tidy_after_rewrite(graph: ir.Graph) -> None:
    """What every rewrite leaves to be done: an identity left by one rule must not hide a
    pattern from the next, and a rewrite with several outputs may put its nodes before a
    producer of theirs (the rewriter inserts them at the first matched node), while ONNX files
    must be sorted."""
    _remove_identities(graph)
    graph.sort()


def _remove_identities(graph: ir.Graph) -> None:
    """Identity nodes left by rewrites, except those that name a graph output."""
    for node in list(graph):
        if (
            node.op_type == "Identity"
            and node.domain == ""
            and not node.outputs[0].is_graph_output()
        ):
            ir.convenience.replace_all_uses_with(node.outputs[0], node.inputs[0])
            graph.remove(node, safe=True)


class IrPass(FusePass):
    """One of onnx_ir's passes under a name of ours, with its order constraints."""

    def __init__(
        self,
        name: str,
        make: Callable[[], ir.passes.PassBase],
        runs_after: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.make = make
        self.runs_after = runs_after or {}

    def run(self, model: ir.Model) -> PassReport:
        return PassReport(self.name, self.make()(model).modified)
