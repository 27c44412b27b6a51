"""Graph fuse passes: onnxscript rewrite rules over the canonical IR, run as named pipelines,
and explicit_rng, which makes a model's random state explicit inputs and an output."""

from fusebridge.fuse_passes.pipelines import PIPELINES, Pipeline, optimize
from fusebridge.fuse_passes.report import OptimizeReport, RuleReport
from fusebridge.fuse_passes.rng import RngReport, RngStream, explicit_rng

__all__ = [
    "PIPELINES",
    "OptimizeReport",
    "Pipeline",
    "RngReport",
    "RngStream",
    "RuleReport",
    "explicit_rng",
    "optimize",
]
