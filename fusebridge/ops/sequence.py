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
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_pool import POOLTYPES
from fusebridge.ops.common import OpDef, ReferenceOp, Run
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


def _lower_pool(op, node: ir.Node) -> list[ir.Value]:
    from fusebridge.integrations.onnx import pooling

    a = SEQUENCE_POOL_SCHEMA.parse(node)
    return [pooling.sequence_pool(op, *node.inputs, a.pooltype, a.pad_value)]


def _lower_lengths(op, node: ir.Node) -> list[ir.Value]:
    # Plain ONNX has no way to refuse a bad length: the export casts, as MXNet itself does.
    return [op.Cast(node.inputs[0], to=ir.DataType.INT64)]


OPS = (
    OpDef(SEQUENCE_POOL_SCHEMA, _pool_cpu, SequencePool, _lower_pool),
    OpDef(SEQUENCE_LENGTHS_SCHEMA, _lengths_cpu, SequenceLengths, _lower_lengths),
)
