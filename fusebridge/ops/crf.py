"""CRFDecoding: Viterbi decoding per LoD sentence (Paddle `crf_decoding`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.graph.builder import OpBuilder
from fusebridge.graph.loops import body_graph, body_input, stacked_scan
from fusebridge.kernels import reference
from fusebridge.ops.common import OpDef, ReferenceOp, Run, per_engine
from fusebridge.ops.lod import lod_to_padded, padded_to_lod, sentence_bounds
from fusebridge.ops.schema import OpSchema


@dataclasses.dataclass(frozen=True)
class CRFDecodingAttributes:
    pass


CRF_DECODING_SCHEMA = OpSchema(
    "CRFDecoding",
    ("Emission", "offsets", "Transition", "Label?"),
    ("ViterbiPath",),
    (),
    "Viterbi decoding per LoD sentence (Paddle `crf_decoding`). Emission [words, tags], "
    "Transition [tags + 2, tags] (start row, end row, then from-to weights). "
    "ViterbiPath int64 [words, 1]: tags, or with Label 1 where the tag equals the label.",
    ("int64",),
    (2,),
    attributes_type=CRFDecodingAttributes,
)


def _binding(
    engine, node: ir.Node, attrs: CRFDecodingAttributes, constants: dict, reuse: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        emission, offsets, transition, label = inputs
        return [engine.crf_decoding(emission, transition, offsets, label)]

    return run


class CRFDecoding(ReferenceOp):
    schema = CRF_DECODING_SCHEMA

    def _run(self, emission, offsets, transition, label=None, **_):
        return (reference.crf_decoding(emission, transition, offsets, label),)


# The standard-ONNX form (the lowering below): the emission is padded to [T, N, tags]; a
# forward Loop over the steps carries the best scores alpha [N, tags] and emits the back
# pointers of each step; a backward Loop follows them from each sentence's best last tag; the
# [T, N] tag grid goes back to LoD order. The float32 arithmetic and the tie rule (the first
# maximum wins) are those of Paddle's kernel and ours (kernels/csrc/crf_decoding.cpp), so the
# paths agree exactly, not just in score.
_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max
# The C++ kernels start each maximum at -FLT_MAX and take only strictly greater scores: a
# maximum over nothing but -inf is -FLT_MAX at tag 0. Clamping the scores to -FLT_MAX first
# gives ReduceMax and ArgMax exactly that.
_LOWEST = np.float32(np.finfo(np.float32).min)


def viterbi_graph(
    op: OpBuilder,
    emission: ir.Value,
    offsets: ir.Value,
    transition: ir.Value,
    label: ir.Value | None = None,
) -> ir.Value:
    """The Viterbi path int64 [words, 1] of emission [words, tags] (float32) under transition
    [tags + 2, tags] (start row, end row, then w[from, to]); with label int64 [words, 1], 1
    where the path equals it and 0 elsewhere."""
    # Two steps at least: both Loops then run at least once. onnx.reference cannot build the
    # scan outputs of a Loop that never ran (np.vstack of nothing), and step 0 always exists.
    padded = lod_to_padded(op, emission, offsets, min_steps=2)  # [T, N, tags]
    _, lens = sentence_bounds(op, offsets)
    lens = op.Unsqueeze(lens, op.ints([1], "axis1"))  # [N, 1]
    zero, one = op.const(np.int64(0), "scalar_zero"), op.const(np.int64(1), "scalar_one")
    start = op.Gather(transition, zero, axis=0)
    end = op.Gather(transition, one, axis=0)
    w = op.Slice(transition, op.ints([2], "two"), op.ints([_INT64_MAX], "end"))
    alpha0 = op.Add(start, op.Gather(padded, zero, axis=0))  # [N, tags]

    trips_1d = op.Sub(op.Shape(padded, start=0, end=1), op.ints([1], "one"))  # [1]: T - 1
    trips = op.Squeeze(trips_1d, op.ints([0], "axis0"))
    # onnx.reference runs no iteration at all when the cond input is left out.
    true = op.const(np.bool_(True), "true")
    alpha, backs = op.Loop(trips, true, alpha0, body=_forward(op, padded, w, lens), _outputs=2)
    backs = stacked_scan(op, backs, trips_1d, op.Shape(alpha0))  # [T-1, N, tags]: steps 1..T-1
    best_end = op.Max(op.Add(alpha, end), op.const(_LOWEST, "lowest"))
    last = op.ArgMax(best_end, axis=1, keepdims=1)  # [N, 1]

    back_of = op.Sub(trips, one)  # index in backs of step T-1's back pointers
    first, tags = op.Loop(
        trips, true, last, body=_backward(op, backs, back_of, op.Sub(lens, one)), _outputs=2
    )
    tags = stacked_scan(op, tags, trips_1d, op.Shape(last))  # [T-1, N, 1]: steps T-1 down to 1
    tags = op.Slice(
        tags,
        op.ints([-1], "minus_one"),
        op.ints([_INT64_MIN], "int64_min"),
        op.ints([0], "axis0"),
        op.ints([-1], "minus_one"),
    )
    grid = op.Concat(op.Unsqueeze(first, op.ints([0], "axis0")), tags, axis=0)  # [T, N, 1]
    path = padded_to_lod(op, grid, offsets)
    if label is None:
        return path
    return op.Cast(op.Equal(path, label), to=ir.DataType.INT64)


def _forward(op: OpBuilder, padded: ir.Value, w: ir.Value, lens: ir.Value) -> ir.Graph:
    """Iteration k computes step t = k + 1: alpha_t[j] = max_i(alpha[i] + w[i, j]) + x_t[j],
    in that float32 order; sentences of length <= t keep their alpha. Emits the argmaxes."""
    body = OpBuilder(f"{op.prefix}/viterbi_forward", op.taken, op.opset)
    k = body_input(body, "k", ir.DataType.INT64, [])
    cond = body_input(body, "cond", ir.DataType.BOOL, [])
    alpha = body_input(body, "alpha", ir.DataType.FLOAT, ["N", "tags"])
    t = body.Add(k, op.const(np.int64(1), "scalar_one"))
    scores = body.Add(body.Unsqueeze(alpha, op.ints([2], "axis2")), w)  # [N, from, to]
    scores = body.Max(scores, op.const(_LOWEST, "lowest"))
    best = body.ReduceMax(scores, axes=[1], keepdims=0)
    back = body.ArgMax(scores, axis=1, keepdims=0)  # first maximum: Paddle's tie rule
    new = body.Add(best, body.Gather(padded, t, axis=0))
    alpha_out = body.Where(body.Less(t, lens), new, alpha)
    cond_out = body.Identity(cond)
    return body_graph(body, [k, cond, alpha], [cond_out, alpha_out, back])


def _backward(op: OpBuilder, backs: ir.Value, back_of: ir.Value, lens_m1: ir.Value) -> ir.Graph:
    """Iteration k carries the tags at step t = T-1-k and emits them; the carried tags move to
    step t-1 by the back pointers of step t where t is a word of the sentence (t < len), and
    stay where it is not, so each sentence starts from its own last tag."""
    body = OpBuilder(f"{op.prefix}/viterbi_backward", op.taken, op.opset)
    k = body_input(body, "k", ir.DataType.INT64, [])
    cond = body_input(body, "cond", ir.DataType.BOOL, [])
    tag = body_input(body, "tag", ir.DataType.INT64, ["N", 1])
    index = body.Sub(back_of, k)  # step t's back pointers are backs[t - 1]
    prev = body.GatherElements(body.Gather(backs, index, axis=0), tag, axis=1)
    tag_out = body.Where(body.Less(index, lens_m1), prev, tag)
    cond_out = body.Identity(cond)
    return body_graph(body, [k, cond, tag], [cond_out, tag_out, tag])


def lower(op, node: ir.Node) -> list[ir.Value]:
    emission, offsets, transition, label = (list(node.inputs) + [None])[:4]
    return [viterbi_graph(op, emission, offsets, transition, label)]


OPS = (OpDef(CRF_DECODING_SCHEMA, CRFDecoding, per_engine(_binding), lower),)
