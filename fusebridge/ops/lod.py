"""LoDToPadded and PaddedToLoD: the explicit reorders between LoD words and right-padded
batches, used around padded recurrences (the portable ONNX export)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.cuda.sequence import to_host
from fusebridge.graph.builder import OpBuilder
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_layout import as_offsets
from fusebridge.ops.common import OpDef, ReferenceOp, Run, per_engine
from fusebridge.ops.schema import Attribute, OpSchema

PADDED_LAYOUTS = ("tnc", "ntc")
_INT64_MAX = np.iinfo(np.int64).max


@dataclasses.dataclass(frozen=True)
class ReorderAttributes:
    layout: str = "tnc"


_LAYOUT = Attribute("layout", "tnc", PADDED_LAYOUTS, "the padded layout")
LOD_TO_PADDED_SCHEMA = OpSchema(
    "LoDToPadded",
    ("X", "offsets"),
    ("Padded",),
    (_LAYOUT,),
    "LoD words [words, C...] to right-padded [T, N, C...] (tnc) or [N, T, C...] (ntc), "
    "T the longest sentence, zeros after each sentence. Used around padded recurrences "
    "(the portable ONNX export).",
    output_ranks=("X+1",),
    attributes_type=ReorderAttributes,
)
PADDED_TO_LOD_SCHEMA = OpSchema(
    "PaddedToLoD",
    ("Padded", "offsets"),
    ("Y",),
    (_LAYOUT,),
    "The inverse of LoDToPadded: each sentence's real steps stacked into [words, C...]. "
    "The pass cancel_reorders removes a PaddedToLoD -> LoDToPadded pair over the same "
    "offsets (between stacked GRUs).",
    output_ranks=("X-1",),
    attributes_type=ReorderAttributes,
)


def _to_padded(
    engine, node: ir.Node, attrs: ReorderAttributes, constants: dict, reuse: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [engine.lod_to_padded(inputs[0], inputs[1], attrs.layout)[0]]

    return run


def _to_lod(engine, node: ir.Node, attrs: ReorderAttributes, constants: dict, reuse: bool) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        padded, offsets = inputs
        # No data array here says how many words the offsets split: their own last entry does
        # (padded_to_lod checks each length against the padded steps). The lengths are host
        # integers on either engine: offsets on a device are downloaded.
        arr = np.asarray(to_host(offsets, "padded_to_lod", "offsets"))
        words = int(arr[-1]) if arr.ndim == 1 and arr.size and arr.dtype.kind in "iu" else 0
        lengths = np.diff(as_offsets(arr, "padded_to_lod", words))
        return [engine.padded_to_lod(padded, lengths, attrs.layout)[0]]

    return run


class LoDToPadded(ReferenceOp):
    schema = LOD_TO_PADDED_SCHEMA

    def _run(self, x, offsets, **_):
        return (reference.lod_to_padded(x, offsets, self.attrs().layout)[0],)


class PaddedToLoD(ReferenceOp):
    schema = PADDED_TO_LOD_SCHEMA

    def _run(self, padded, offsets, **_):
        return (reference.padded_to_lod(padded, offsets, self.attrs().layout),)


# Standard-ONNX forms of the reorders (the lowerings below, and the crf and sequence ops').


def sentence_bounds(op: OpBuilder, offsets: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(starts, lengths), int64 [N] each, from offsets [N+1]."""
    starts = op.Slice(offsets, op.ints([0], "zero"), op.ints([-1], "minus_one"))
    ends = op.Slice(offsets, op.ints([1], "one"), op.ints([_INT64_MAX], "end"))
    return starts, op.Sub(ends, starts)


def seq_lens(op: OpBuilder, offsets: ir.Value) -> ir.Value:
    """int32 [N] sentence lengths: what ONNX GRU's sequence_lens takes."""
    return op.Cast(sentence_bounds(op, offsets)[1], to=ir.DataType.INT32)


def _step_grid(
    op: OpBuilder, steps: ir.Value, per_sentence: ir.Value, layout: str
) -> tuple[ir.Value, ir.Value]:
    """steps [T] and a per-sentence vector [N] broadcast to the padded grid: [T, N] for tnc,
    [N, T] for ntc."""
    if layout == "tnc":
        return op.Unsqueeze(steps, op.ints([1], "axis1")), op.Unsqueeze(
            per_sentence, op.ints([0], "axis0")
        )
    return op.Unsqueeze(steps, op.ints([0], "axis0")), op.Unsqueeze(
        per_sentence, op.ints([1], "axis1")
    )


def lod_to_padded(
    op: OpBuilder, x: ir.Value, offsets: ir.Value, layout: str = "tnc", min_steps: int = 0
) -> ir.Value:
    """x [words, C...] -> right-padded [T, N, C...] (tnc) or [N, T, C...] (ntc), zeros after
    each sentence: one Gather from x with a zero row appended, padding pointing at that row.
    T is the longest sentence, or min_steps if that is more (a Loop over T that must run)."""
    starts, lens = sentence_bounds(op, offsets)
    floor = op.ints([min_steps], "zero" if min_steps == 0 else "min_steps")
    longest = op.ReduceMax(op.Concat(floor, lens, axis=0), keepdims=0)
    steps = op.Range(op.const(np.int64(0), "scalar_zero"), longest, op.const(np.int64(1), "step"))
    step_grid, start_grid = _step_grid(op, steps, starts, layout)
    _, len_grid = _step_grid(op, steps, lens, layout)
    words = op.Shape(x, start=0, end=1)
    index = op.Where(op.Less(step_grid, len_grid), op.Add(step_grid, start_grid), words)
    zero_row = op.CastLike(
        op.ConstantOfShape(op.Concat(op.ints([1], "one"), op.Shape(x, start=1), axis=0)), x
    )
    return op.Gather(op.Concat(x, zero_row, axis=0), index, axis=0)


def padded_to_lod(
    op: OpBuilder, padded: ir.Value, offsets: ir.Value, layout: str = "tnc"
) -> ir.Value:
    """The inverse of lod_to_padded: NonZero over the [N, T] grid of real steps lists them in
    word order (sentence, then step); one Gather takes those rows."""
    _, lens = sentence_bounds(op, offsets)
    t_axis = 0 if layout == "tnc" else 1
    longest = op.Squeeze(op.Shape(padded, start=t_axis, end=t_axis + 1), op.ints([0], "axis0"))
    steps = op.Range(op.const(np.int64(0), "scalar_zero"), longest, op.const(np.int64(1), "step"))
    real = op.Less(
        op.Unsqueeze(steps, op.ints([0], "axis0")), op.Unsqueeze(lens, op.ints([1], "axis1"))
    )
    where = op.NonZero(real)  # [2, words]: sentence, step
    sentence = op.Gather(where, op.const(np.int64(0), "scalar_zero"), axis=0)
    step = op.Gather(where, op.const(np.int64(1), "scalar_one"), axis=0)
    if layout == "tnc":
        row = op.Add(op.Mul(step, op.Shape(padded, start=1, end=2)), sentence)
    else:
        row = op.Add(op.Mul(sentence, op.Shape(padded, start=1, end=2)), step)
    flat = op.Reshape(
        padded, op.Concat(op.ints([-1], "minus_one"), op.Shape(padded, start=2), axis=0)
    )
    return op.Gather(flat, row, axis=0)


def _lower_to_padded(op, node: ir.Node) -> list[ir.Value]:
    layout = LOD_TO_PADDED_SCHEMA.parse(node).layout
    return [lod_to_padded(op, node.inputs[0], node.inputs[1], layout)]


def _lower_to_lod(op, node: ir.Node) -> list[ir.Value]:
    layout = PADDED_TO_LOD_SCHEMA.parse(node).layout
    return [padded_to_lod(op, node.inputs[0], node.inputs[1], layout)]


LOD_TO_PADDED = OpDef(LOD_TO_PADDED_SCHEMA, LoDToPadded, per_engine(_to_padded), _lower_to_padded)
PADDED_TO_LOD = OpDef(PADDED_TO_LOD_SCHEMA, PaddedToLoD, per_engine(_to_lod), _lower_to_lod)
OPS = (LOD_TO_PADDED, PADDED_TO_LOD)
