"""Paddle's `sequence_pool` over LoD input, in NumPy: one reduceat over the non-empty sentences,
so the cost is a few passes over the data whatever the number of sentences."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.arguments import as_choice, new_array
from fusebridge.kernels.sequence_layout import as_offsets

OP = "sequence_pool"
POOLTYPES = ("SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST")


def _pad(pad_value: object, dtype: np.dtype) -> np.floating:
    if isinstance(pad_value, bool) or not isinstance(
        pad_value, (int, float, np.integer, np.floating)
    ):
        raise ArgumentTypeError(
            f"{OP}: pad_value must be a real number, got {type(pad_value).__name__}"
        )
    # Paddle's pad_value is a float32 attribute: float64 output gets the float32 rounding too.
    return dtype.type(np.float32(pad_value))


def sequence_pool(
    x: np.ndarray, offsets: np.ndarray, pooltype: str, pad_value: float = 0.0
) -> np.ndarray:
    """Each sentence of x [words, ...] (split by offsets [N+1]) pooled into one row of
    [N, ...], in x's dtype (float32 or float64).

    pooltype is SUM, AVERAGE, SQRT (sum / sqrt(length)), MAX, LAST or FIRST, upper- or
    lower-case. An empty sentence gives pad_value (rounded to float32, as Paddle's attribute
    is) in every pooltype.
    """
    pooltype = as_choice(
        pooltype, POOLTYPES + tuple(p.lower() for p in POOLTYPES), OP, "pooltype"
    ).upper()
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise ArgumentTypeError(f"{OP}: x must be float32 or float64, got {x.dtype}")
    if x.ndim < 1:
        raise ArgumentError(f"{OP}: x must be [words, ...], got a scalar")
    pad = _pad(pad_value, x.dtype)
    offsets = as_offsets(offsets, OP, x.shape[0])
    lens = np.diff(offsets)
    flat = x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))
    out = new_array((len(lens), flat.shape[1]), x.dtype, OP, "the output")
    out.fill(pad)

    full = lens > 0
    starts, n = offsets[:-1][full], lens[full].astype(x.dtype)[:, None]
    if starts.size:
        # Empty sentences take no rows, so the next non-empty start is where each one ends:
        # reduceat over the non-empty starts alone reduces exactly each sentence's rows.
        if pooltype == "MAX":
            pooled = np.maximum.reduceat(flat, starts, axis=0)
        elif pooltype == "LAST":
            pooled = flat[offsets[1:][full] - 1]
        elif pooltype == "FIRST":
            pooled = flat[starts]
        else:
            pooled = np.add.reduceat(flat, starts, axis=0)
            if pooltype == "AVERAGE":
                pooled /= n
            elif pooltype == "SQRT":
                pooled /= np.sqrt(n)
        out[full] = pooled
    return out.reshape((len(lens),) + x.shape[1:])
