"""Graph passes, run as named pipelines (pipelines.py): onnxscript rewrite rules over the
canonical IR (the GRU and dropout fusions); explicit_rng, which makes a model's random state
explicit inputs and an output; recompute_dropout_mask, which lets a training graph's backward
recompute dropout masks; quantize_gru (optimize's precision=); and the passes that write a
model in standard ONNX ops (portable.py).
Every pass is an onnx_ir pass whose result carries a PassReport (passes.py)."""

from fusebridge.fuse_passes.passes import FusePass, FusePassResult, IrPass, RulePass
from fusebridge.fuse_passes.pipelines import PIPELINES, PRECISIONS, Pipeline, optimize
from fusebridge.fuse_passes.quantize import QuantizeGRU
from fusebridge.fuse_passes.recompute import (
    RecomputeDropoutMask,
    RecomputeReport,
    recompute_dropout_mask,
)
from fusebridge.fuse_passes.report import OptimizeReport, PassReport
from fusebridge.fuse_passes.rng import ExplicitRng, RngReport, RngStream, explicit_rng

__all__ = [
    "PIPELINES",
    "PRECISIONS",
    "ExplicitRng",
    "FusePass",
    "FusePassResult",
    "IrPass",
    "OptimizeReport",
    "PassReport",
    "Pipeline",
    "QuantizeGRU",
    "RecomputeDropoutMask",
    "RecomputeReport",
    "RngReport",
    "RngStream",
    "RulePass",
    "explicit_rng",
    "optimize",
    "recompute_dropout_mask",
]
