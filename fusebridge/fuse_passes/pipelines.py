"""Named pipelines: explicit ordered lists of passes (fusion rules and the other passes). The
order constraints each pass declares (runs_after) are checked when a pipeline is built, so that
a pass can never run before one whose result it needs (Paddle suffers from a small fusion eating
the ops a larger one needs, because its pass order is implicit); the graph is checked after
each pass, so that a broken rewrite is named where it happened. A fusebridge error a pass raises
reaches the caller naming the pipeline and the pass (`pass_name`), whichever pass it was."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import onnx_ir as ir

from fusebridge.errors import ArgumentError, Error, ModelFormatError
from fusebridge.fuse_passes.dropout import (
    InferenceDropout,
    MatMulAddDropout,
    MatMulDropout,
    SoftmaxDropout,
    SoftmaxDropoutTraining,
)
from fusebridge.fuse_passes.gru import (
    BiGRU,
    CanonicalUpdateGate,
    FcGRU,
    MatMulAddFusionGRU,
    MatMulFusionGRU,
    MulGRU,
    ZeroInitialState,
)
from fusebridge.fuse_passes.gru_layout import (
    GRUOutputRoundTrip,
    GRUOutputSqueeze,
    ReshapePairs,
    TransposedGRUInput,
    TransposePairs,
)
from fusebridge.fuse_passes.lstm import FcLSTM, MulLSTM
from fusebridge.fuse_passes.passes import FusePass, RulePass
from fusebridge.fuse_passes.portable import lowering_passes
from fusebridge.fuse_passes.quantize import QuantizeGRU
from fusebridge.fuse_passes.recompute import RecomputeDropoutMask
from fusebridge.fuse_passes.report import OptimizeReport
from fusebridge.fuse_passes.rng import ExplicitRng
from fusebridge.fuse_passes.rule import FusionRule
from fusebridge.graph.checks import check_graph
from fusebridge.kernels.qgru_weights import PRECISIONS


class Pipeline:
    """`steps`: passes, or fusion rule classes (each run as a RulePass)."""

    def __init__(
        self, name: str, steps: Sequence[FusePass | type[FusionRule]], doc: str = ""
    ) -> None:
        passes = tuple(s if isinstance(s, FusePass) else RulePass(s) for s in steps)
        names = [p.name for p in passes]
        for i, step in enumerate(passes):
            for earlier, why in step.runs_after.items():
                if earlier in names and names.index(earlier) > i:
                    raise ArgumentError(
                        f"pipeline {name!r}: {step.name} must run after {earlier} ({why}), "
                        f"but the order is {names}"
                    )
        if len(set(names)) != len(names):
            raise ArgumentError(f"pipeline {name!r}: a pass appears twice in {names}")
        self.name = name
        self.passes = passes
        self.doc = doc

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, {[p.name for p in self.passes]})"

    def apply(self, model: ir.Model) -> OptimizeReport:
        """Rewrites `model` in place, pass by pass, in order, checking the graph after each."""
        check_graph(model.graph, f"pipeline {self.name!r}")
        reports = []
        for step in self.passes:
            try:
                reports.append(step(model).report)
            except Error as exc:
                raise _raised_by_pass(exc, self.name, step.name) from exc
            try:
                check_graph(model.graph, f"pipeline {self.name!r}, after {step.name}")
            except ModelFormatError as exc:  # named already; the broken graph is the pass's
                exc.pipeline, exc.pass_name = self.name, step.name
                raise
        return OptimizeReport(self.name, tuple(reports))


def _raised_by_pass(exc: Error, pipeline: str, pass_name: str) -> Error:
    """`exc`, raised by pass `pass_name` of `pipeline`, as the error its caller gets: of the same
    type and attributes (a copy), the message starting "pipeline 'NAME', pass PASS: " (a message
    that started with the pass's name says it once), the pipeline and the pass as attributes
    `pipeline` and `pass_name`. The caller raises it from `exc`, which stays its __cause__."""
    message = str(exc).removeprefix(f"{pass_name}: ")
    named = copy.copy(exc)
    named.args = (f"pipeline {pipeline!r}, pass {pass_name}: {message}",)
    named.pipeline, named.pass_name = pipeline, pass_name
    return named


INFERENCE_RULES = (
    InferenceDropout,
    FcGRU,
    MulGRU,
    FcLSTM,
    MulLSTM,
    ZeroInitialState,
    # The exporters' layout round trips around GRUs (gru_layout.py)
    TransposePairs("transpose_pairs"),
    GRUOutputSqueeze,
    GRUOutputRoundTrip,
    ReshapePairs(
        "reshape_pairs",
        {"gru_output_round_trip": "it drops the import's Reshape pair where that gives Y back"},
    ),
    TransposedGRUInput,
    TransposePairs(
        "gru_layout_transposes",
        {
            "gru_input_layout": "it cancels the Transpose that gru_input_layout puts after a GRU "
            "against a batch_first output Transpose"
        },
    ),
    MatMulAddFusionGRU,
    MatMulFusionGRU,
    CanonicalUpdateGate,
    BiGRU,
)
TRAINING_FUSIONS = (MatMulAddDropout, MatMulDropout, SoftmaxDropoutTraining, SoftmaxDropout)

PIPELINES = {
    p.name: p
    for p in [
        Pipeline("inference", INFERENCE_RULES, "GRU fusions, inference dropout folded (default)"),
        Pipeline(
            "training",
            [ExplicitRng(), *TRAINING_FUSIONS, RecomputeDropoutMask()],
            "explicit RNG streams, matmul/softmax + dropout fusions, masks recomputed in the "
            "backward",
        ),
        Pipeline(
            "portable",
            [*INFERENCE_RULES, *lowering_passes()],
            "the inference fusions, then standard ONNX ops only (plain ONNX Runtime runs the file)",
        ),
        Pipeline(
            "lowering",
            lowering_passes(),
            "standard ONNX ops only, no fusions (what save_onnx(portable=True) does)",
        ),
        Pipeline("none", [], "convert only"),
    ]
}


def optimize(
    model: ir.Model, pipeline: str | Pipeline = "inference", precision: str = "float32"
) -> tuple[ir.Model, OptimizeReport]:
    """A rewritten copy of `model` (the input is left as it was) and what each pass did.

    precision "int8" or "bf16" adds quantize_gru after the pipeline: every GRU with constant
    weights gets them quantized once (docs/gru.md, "Quantized GRU"); float32 (the default)
    changes no arithmetic. The arithmetic a precision means is the same on every CPU."""
    if isinstance(pipeline, str):
        if pipeline not in PIPELINES:
            raise ArgumentError(
                f"optimize: pipeline must be one of {sorted(PIPELINES)}, got {pipeline!r}"
            )
        pipeline = PIPELINES[pipeline]
    if precision not in PRECISIONS:
        raise ArgumentError(f"optimize: precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "float32":
        if any(p.name == "lower_to_standard" for p in pipeline.passes):
            raise ArgumentError(
                f"optimize: pipeline {pipeline.name!r} writes standard ONNX ops only, which have "
                f"no quantized GRU; precision {precision!r} goes with 'inference'"
            )
        pipeline = Pipeline(
            f"{pipeline.name}+{precision}", [*pipeline.passes, QuantizeGRU(precision)],
            pipeline.doc,
        )  # fmt: skip
    check_graph(model.graph, f"optimize {pipeline.name!r}")  # before the copy, which needs it too
    model = ir.from_proto(ir.to_proto(model))
    report = pipeline.apply(model)
    return model, report
