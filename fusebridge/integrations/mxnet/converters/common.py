"""What the MXNet converters share: the table CONVERTERS (op type -> converter), the checks of a
node's attribute values (each error names the attribute, what it holds and what MXNet takes),
and the rank-agnostic shape pieces (MXNet binds shapes only when it runs, so every reorder is
built from Shape slices).

A converter takes the SymbolConverter (load.py) and the node, and defines the node's outputs;
every error it raises starts with `cx.where()`, which names the node (node_label: `MXNet RNN
node 'rnn'`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NoReturn

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.converters import ConverterRegistry
from fusebridge.kernels.arguments import as_probability

CONVERTERS = ConverterRegistry("MXNet converter")


def bad_attribute(cx, key: str, value: object, expected: str) -> NoReturn:
    """A value MXNet itself refuses: the file is malformed."""
    raise ModelFormatError(f"{cx.where()}: attribute {key} = {value!r}, expected {expected}")


def unsupported_attribute(cx, key: str, value: object, expected: str) -> NoReturn:
    """A value MXNet takes but fusebridge does not convert."""
    raise UnsupportedOpError(f"{cx.where()}: attribute {key} = {value!r}, expected {expected}")


def positive_attribute(cx, key: str, *default: int) -> int:
    value = cx.attr(key, "int", *default)
    if value < 1:
        bad_attribute(cx, key, value, "a positive integer")
    return value


def finite_attribute(cx, key: str, *default: float) -> float:
    value = cx.attr(key, "float", *default)
    if not math.isfinite(value):
        bad_attribute(cx, key, value, "a finite number")
    return value


def dropout_p(cx, default: float) -> float:
    """Attribute p, a dropout probability: in [0, 1], as MXNet requires; NaN is refused too."""
    return as_probability(cx.attr("p", "float", default), cx.where())


def check_axes(
    cx,
    key: str,
    axes: Sequence[int],
    rank: int | None,
    negative: bool = True,
    one: bool | None = None,
) -> None:
    """Refuses repeated axes, negative ones where MXNet refuses them, and any outside the rank
    when the rank is known at load (else the op refuses it when it runs). `one`: whether the
    attribute holds one axis, not a tuple (default: all but `axes` do)."""
    low = -rank if negative and rank is not None else 0
    shown = axes[0] if (key != "axes" if one is None else one) else tuple(axes)
    seen = set()
    for a in axes:
        if not negative and a < 0:
            bad_attribute(cx, key, shown, "axes >= 0 (MXNet takes no negative axis here)")
        if rank is not None and not low <= a < rank:
            bad_attribute(cx, key, shown, f"an axis in [{low}, {rank}) for an input of rank {rank}")
        if (a % rank if rank else a) in seen:
            bad_attribute(cx, key, shown, "each axis once")
        seen.add(a % rank if rank else a)


def typed_scalar(cx, key: str, value: float, dtype: np.dtype) -> np.ndarray:
    """value as a 0-d array of dtype; MXNet casts a scalar to an integer tensor's type by
    truncation, which a NaN, an infinity or a value outside the type cannot survive."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not (math.isfinite(value) and info.min <= math.trunc(value) <= info.max):
            bad_attribute(cx, key, value, f"a number that {dtype} can hold")
    return np.asarray(value).astype(dtype)


def shape_of(cx, x: ir.Value, start: int, end: int | None = None) -> ir.Value:
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    return cx.add("Shape", [x], attrs, dtype=ir.DataType.INT64)


def dim_of(cx, x: ir.Value, axis: int) -> ir.Value:
    """x's dim `axis` (negative: from the end) as a 1-element shape."""
    return shape_of(cx, x, axis, axis + 1 if axis != -1 else None)  # end 0 would be empty


def dims_product(cx, x: ir.Value, start: int, end: int | None = None) -> ir.Value:
    """The product of x's dims start..end as a 1-element shape (1 for none): the rank-agnostic
    way to view x with fewer axes."""
    dims = cx.add("Concat", [cx.ints([1], "one"), shape_of(cx, x, start, end)], {"axis": 0})
    return cx.add("ReduceProd", [dims], {"keepdims": 1})


def dims_after(cx, x: ir.Value, axis: int) -> ir.Value:
    """The product of x's dims after `axis` (negative: from the end) as a 1-element shape."""
    return dims_product(cx, x, axis + 1) if axis != -1 else cx.ints([1], "one")


def swap_axes(cx, x: ir.Value, a: int, b: int) -> ir.Value:
    """MXNet SwapAxis for non-negative axes a < b, rank-agnostic: x as [A, s_a, B, s_b, C]
    (products of the dims between), Transpose [0, 3, 2, 1, 4], then the swapped shape."""
    if a == b:
        return cx.add("Identity", [x])

    pieces = [
        dims_product(cx, x, 0, a),
        shape_of(cx, x, a, a + 1),
        dims_product(cx, x, a + 1, b),
        shape_of(cx, x, b, b + 1),
        dims_product(cx, x, b + 1),
    ]
    five = cx.add("Reshape", [x, cx.add("Concat", pieces, {"axis": 0})])
    swapped = cx.add("Transpose", [five], {"perm": [0, 3, 2, 1, 4]})
    target = [
        shape_of(cx, x, 0, a),
        shape_of(cx, x, b, b + 1),
        shape_of(cx, x, a + 1, b),
        shape_of(cx, x, a, a + 1),
        shape_of(cx, x, b + 1),
    ]
    return cx.add("Reshape", [swapped, cx.add("Concat", target, {"axis": 0})])
