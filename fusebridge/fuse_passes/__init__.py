"""Graph fuse passes: onnxscript rewrite rules over the canonical IR, run as named pipelines."""

from fusebridge.fuse_passes.pipelines import PIPELINES, Pipeline, optimize
from fusebridge.fuse_passes.report import OptimizeReport, RuleReport

__all__ = ["PIPELINES", "OptimizeReport", "Pipeline", "RuleReport", "optimize"]
