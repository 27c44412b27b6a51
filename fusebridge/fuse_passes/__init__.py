"""Graph passes, run as named pipelines (pipelines.py): onnxscript rewrite rules over the
canonical IR (the GRU and dropout fusions); explicit_rng, which makes a model's random state
explicit inputs and an output; recompute_dropout_mask, which lets a training graph's backward
recompute dropout masks; and the passes that write a model in standard ONNX ops (portable.py).
Every pass is an onnx_ir pass whose result carries a PassReport (passes.py)."""

from fusebridge.fuse_passes.passes import FusePass, FusePassResult, IrPass, RulePass
from fusebridge.fuse_passes.pipelines import PIPELINES, Pipeline, optimize
from fusebridge.fuse_passes.recompute import (
    RecomputeDropoutMask,
    RecomputeReport,
    recompute_dropout_mask,
)
from fusebridge.fuse_passes.report import OptimizeReport, PassReport
from fusebridge.fuse_passes.rng import ExplicitRng, RngReport, RngStream, explicit_rng

__all__ = [
    "PIPELINES",
    "ExplicitRng",
    "FusePass",
    "FusePassResult",
    "IrPass",
    "OptimizeReport",
    "PassReport",
    "Pipeline",
    "RecomputeDropoutMask",
    "RecomputeReport",
    "RngReport",
    "RngStream",
    "RulePass",
    "explicit_rng",
    "optimize",
    "recompute_dropout_mask",
]
