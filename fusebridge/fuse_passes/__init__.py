"""Graph fuse passes: onnxscript rewrite rules over the canonical IR, run as named pipelines;
explicit_rng, which makes a model's random state explicit inputs and an output; and
recompute_dropout_mask, which lets a training graph's backward recompute dropout masks."""

from fusebridge.fuse_passes.pipelines import PIPELINES, Pipeline, optimize
from fusebridge.fuse_passes.recompute import RecomputeReport, recompute_dropout_mask
from fusebridge.fuse_passes.report import OptimizeReport, RuleReport
from fusebridge.fuse_passes.rng import RngReport, RngStream, explicit_rng

__all__ = [
    "PIPELINES",
    "OptimizeReport",
    "Pipeline",
    "RecomputeReport",
    "RngReport",
    "RngStream",
    "RuleReport",
    "explicit_rng",
    "optimize",
    "recompute_dropout_mask",
]
