"""SequencePool (one row per LoD sentence, Paddle `sequence_pool`) and SequenceLengths (lengths
of any number type, checked, as int64)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import onnx_ir as ir

from fusebridge import kernels
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.graph.builder import OpBuilder
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_pool import POOLTYPES
from fusebridge.ops.common import OpDef, ReferenceOp, Run
from fusebridge.ops.lod import sentence_bounds
from fusebridge.ops.schema import Attribute, OpSchema


@dataclasses.dataclass(frozen=True)
class SequencePoolAttributes:
    pooltype: str = "AVERAGE"
    pad_value: float = 0.0


@dataclasses.dataclass(frozen=True)
class SequenceLengthsAttributes:
    axis: int = 0
    minimum: int = 0
    source: str = ""


SEQUENCE_POOL_SCHEMA = OpSchema(
    "SequencePool",
    ("X", "offsets"),
    ("Out",),
    (
        Attribute("pooltype", "AVERAGE", POOLTYPES),
        Attribute("pad_value", 0.0, doc="value of an empty sentence's row"),
    ),
    "One row per LoD sentence (Paddle `sequence_pool`); SQRT = sum / sqrt(length).",
    attributes_type=SequencePoolAttributes,
)
SEQUENCE_LENGTHS_SCHEMA = OpSchema(
    "SequenceLengths",
    ("lengths", "X"),
    ("seq_lens",),
    (
        Attribute("axis", 0, (0, 1), "X's time axis: X is [T, N, ...] (0) or [N, T, ...]"),
        Attribute("minimum", 0, (0, 1), "the shortest length allowed"),
        Attribute("source", "", doc="what the lengths are, named in errors"),
    ),
    "Sequence lengths [N] of any real or integer type (MXNet passes them as floats) "
    "as int64, each checked to be a whole number in [minimum, T] (T and N from X): a "
    "NaN, an infinity, a fraction or a length past the data is an error naming "
    "`source`, where a cast would hand a kernel INT64_MIN.",
    ("int64",),
    (1,),
    attributes_type=SequenceLengthsAttributes,
)


def sequence_lengths(
    lengths: np.ndarray, x: np.ndarray, attrs: SequenceLengthsAttributes
) -> np.ndarray:
    """lengths [N] as int64 once each is a whole number in [minimum, T]."""
    where = attrs.source or "fusebridge.SequenceLengths"
    lengths, axis = np.asarray(lengths), attrs.axis
    if np.ndim(x) < 2:
        raise ArgumentError(f"{where}: the data has shape {np.shape(x)}, expected 2 axes or more")
    t, n = x.shape[axis], x.shape[1 - axis]
    if lengths.dtype.kind not in "iuf" and lengths.dtype != ml_dtypes.bfloat16:
        raise ArgumentTypeError(f"{where}: lengths of dtype {lengths.dtype}, expected numbers")
    if lengths.shape != (n,):
        raise ArgumentError(f"{where}: shape {lengths.shape}, expected [{n}] (one per sequence)")
    exact = lengths.astype(np.float64) if lengths.dtype.kind not in "iu" else lengths
    # NaN fails every comparison: it is refused with the values outside the range.
    bad = ~((exact >= attrs.minimum) & (exact <= t) & (np.floor(exact) == exact))
    if bad.any():
        i = int(np.argmax(bad))
        raise ArgumentError(
            f"{where}: length {lengths[i]} at [{i}], expected a whole number in "
            f"[{attrs.minimum}, {t}] ({t} steps in the data)"
        )
    return lengths.astype(np.int64)


def _pool_cpu(node: ir.Node, attrs: SequencePoolAttributes, constants: dict, reuse: bool) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, offsets = inputs
        return [kernels.sequence_pool(x, offsets, attrs.pooltype, attrs.pad_value)]

    return run


def _lengths_cpu(
    node: ir.Node, attrs: SequenceLengthsAttributes, constants: dict, reuse: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [sequence_lengths(inputs[0], inputs[1], attrs)]

    return run


class SequencePool(ReferenceOp):
    schema = SEQUENCE_POOL_SCHEMA

    def _run(self, x, offsets, **_):
        a = self.attrs()
        y = reference.sequence_pool(x, offsets, a.pooltype, a.pad_value)
        return (np.asarray(y, x.dtype),)


class SequenceLengths(ReferenceOp):
    schema = SEQUENCE_LENGTHS_SCHEMA

    def _run(self, lengths, x, **_):
        return (sequence_lengths(lengths, x, self.attrs()),)


# The standard-ONNX form of SequencePool (its lowering below).


def pool_graph(
    op: OpBuilder, x: ir.Value, offsets: ir.Value, pooltype: str, pad_value: float
) -> ir.Value:
    """x [words, C] pooled per sentence into [N, C]: SUM, AVERAGE, SQRT (sum / sqrt(length)),
    MAX, LAST or FIRST; an empty sentence gives pad_value in every column."""
    pooltype = pooltype.upper()
    if pooltype not in POOLTYPES:
        raise ArgumentError(f"sequence_pool: pooltype must be one of {POOLTYPES}, got {pooltype!r}")
    # Paddle's pad_value is a float32 attribute: rounded so, then in x's dtype.
    dtype = x.dtype.numpy() if x.dtype is not None else np.dtype(np.float32)
    pad = np.float32(pad_value).astype(dtype)
    starts, lens = sentence_bounds(op, offsets)
    zero = op.const(np.int64(0), "scalar_zero")
    full = op.Greater(lens, zero)

    if pooltype in ("FIRST", "LAST"):
        # One Gather from x under a pad row: x's row r is row r + 1 there, so FIRST takes
        # starts + 1 and LAST the sentence end; an empty sentence takes the pad row 0.
        pad_row = op.ConstantOfShape(
            op.Concat(op.ints([1], "one"), op.Shape(x, start=1), axis=0),
            value=ir.tensor(pad.reshape(1)),
        )
        row = op.Add(starts, op.ints([1], "one") if pooltype == "FIRST" else lens)
        row = op.Where(full, row, zero)
        return op.Gather(op.Concat(pad_row, x, axis=0), row, axis=0)

    # [T, N] row indices whose padding repeats each sentence's last row: a max as it is, and
    # real rows only for a sum (masked). An empty sentence reads row start - 1 (Gather takes
    # -1 as the last row), replaced by pad_value below; with no words T is 0 and none is read.
    longest = op.ReduceMax(op.Concat(op.ints([0], "zero"), lens, axis=0), keepdims=0)
    steps = op.Range(zero, longest, op.const(np.int64(1), "scalar_one"))
    steps = op.Unsqueeze(steps, op.ints([1], "axis1"))  # [T, 1]
    last_step = op.Sub(lens, op.ints([1], "one"))
    rows = op.Gather(x, op.Add(starts, op.Min(steps, last_step)), axis=0)  # [T, N, C]
    if pooltype == "MAX":
        pooled = op.ReduceMax(rows, axes=[0], keepdims=0)
    else:
        # A float32 sum over each sentence's own rows alone. A CumSum difference would be
        # cheaper, but it mixes in the rounding, and any inf or NaN, of every sentence before.
        real = op.Unsqueeze(op.Less(steps, lens), op.ints([2], "axis2"))  # [T, N, 1]
        rows = op.Where(real, rows, op.const(np.zeros((), dtype), "zero_value"))
        pooled = op.ReduceSum(rows, op.ints([0], "axis0"), keepdims=0)
        if pooltype != "SUM":
            n = op.Unsqueeze(op.CastLike(lens, x), op.ints([1], "axis1"))
            pooled = op.Div(pooled, n if pooltype == "AVERAGE" else op.Sqrt(n))
    # An empty sentence's 0 / 0 above or stray MAX row: the pad replaces both.
    full = op.Unsqueeze(full, op.ints([1], "axis1"))
    return op.Where(full, pooled, op.const(pad, "pad_value"))


def _lower_pool(op, node: ir.Node) -> list[ir.Value]:
    a = SEQUENCE_POOL_SCHEMA.parse(node)
    return [pool_graph(op, *node.inputs, a.pooltype, a.pad_value)]


def _lower_lengths(op, node: ir.Node) -> list[ir.Value]:
    # Plain ONNX has no way to refuse a bad length: the export casts, as MXNet itself does.
    return [op.Cast(node.inputs[0], to=ir.DataType.INT64)]


OPS = (
    OpDef(SEQUENCE_POOL_SCHEMA, SequencePool, {"cpu": _pool_cpu}, _lower_pool),
    OpDef(SEQUENCE_LENGTHS_SCHEMA, SequenceLengths, {"cpu": _lengths_cpu}, _lower_lengths),
)
