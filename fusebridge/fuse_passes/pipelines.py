"""Named pipelines: explicit ordered lists of fusion rules. The order constraints each rule
declares (runs_after) are checked when a pipeline is built, so that a rule can never run before
one whose result it needs (Paddle suffers from a small fusion eating the ops a larger one
needs, because its pass order is implicit)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet

from fusebridge.errors import ArgumentError
from fusebridge.fuse_passes.dropout import (
    InferenceDropout,
    MatMulAddDropout,
    MatMulDropout,
    SoftmaxDropout,
    SoftmaxDropoutTraining,
)
from fusebridge.fuse_passes.graph_checks import check_graph
from fusebridge.fuse_passes.gru import (
    BiGRU,
    CanonicalUpdateGate,
    FcGRU,
    MatMulAddFusionGRU,
    MatMulFusionGRU,
    MulGRU,
    ZeroInitialState,
)
from fusebridge.fuse_passes.report import OptimizeReport, RuleReport
from fusebridge.fuse_passes.rule import FusionRule


class Pipeline:
    def __init__(self, name: str, rules: Sequence[type[FusionRule]]) -> None:
        names = [r.name for r in rules]
        for i, rule in enumerate(rules):
            for earlier, why in rule.runs_after.items():
                if earlier in names and names.index(earlier) > i:
                    raise ArgumentError(
                        f"pipeline {name!r}: {rule.name} must run after {earlier} ({why}), "
                        f"but the order is {names}"
                    )
        if len(set(names)) != len(names):
            raise ArgumentError(f"pipeline {name!r}: a rule appears twice in {names}")
        self.name = name
        self.rules = tuple(rules)

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, {[r.name for r in self.rules]})"

    def apply(self, model: ir.Model) -> OptimizeReport:
        """Rewrites `model` in place, rule by rule, in order."""
        check_graph(model, f"pipeline {self.name!r}")
        reports = []
        for rule_class in self.rules:
            rule = rule_class()
            RewriteRuleSet([rule.as_rewrite_rule()], commute=rule.commute).apply_to_model(model)
            # An identity left by one rule must not hide a pattern from the next.
            _remove_identities(model.graph)
            reports.append(RuleReport(rule.name, rule.fired, tuple(rule.refusals)))
        # A rewrite with several outputs may put its nodes before a producer of theirs (the
        # rewriter inserts them at the first matched node); ONNX files must be sorted.
        model.graph.sort()
        return OptimizeReport(self.name, tuple(reports))


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


PIPELINES = {
    "inference": Pipeline(
        "inference",
        [
            InferenceDropout,
            FcGRU,
            MulGRU,
            ZeroInitialState,
            MatMulAddFusionGRU,
            MatMulFusionGRU,
            CanonicalUpdateGate,
            BiGRU,
        ],
    ),
    # Training graphs, after explicit_rng (fuse_passes/rng.py) gave every dropout its stream.
    "training": Pipeline(
        "training", [MatMulAddDropout, MatMulDropout, SoftmaxDropoutTraining, SoftmaxDropout]
    ),
    "none": Pipeline("none", []),
}


def optimize(
    model: ir.Model, pipeline: str | Pipeline = "inference"
) -> tuple[ir.Model, OptimizeReport]:
    """A rewritten copy of `model` (the input is left as it was) and what each rule did."""
    if isinstance(pipeline, str):
        if pipeline not in PIPELINES:
            raise ArgumentError(
                f"optimize: pipeline must be one of {sorted(PIPELINES)}, got {pipeline!r}"
            )
        pipeline = PIPELINES[pipeline]
    check_graph(model, f"optimize {pipeline.name!r}")  # before the copy, which needs it too
    model = ir.from_proto(ir.to_proto(model))
    report = pipeline.apply(model)
    return model, report
