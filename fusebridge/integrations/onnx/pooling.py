"""Paddle's sequence_pool (one row per LoD sentence) in standard ONNX (opset 17)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError
from fusebridge.integrations.onnx.standard_ops import OpBuilder, sentence_bounds

POOLTYPES = ("SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST")


def sequence_pool(
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
