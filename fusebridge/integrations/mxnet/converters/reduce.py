"""MXNet's reductions (sum, mean, max, min, prod: one row of REDUCTIONS each) and index
reductions (argmax: a row of INDEX_REDUCTIONS) as ONNX's Reduce and ArgMax ops.

MXNet 1.9.1 (checked with mx.nd): axis () or absent reduces every axis, exclude or not;
exclude=True reduces the axes NOT listed; a reduction to no axes gives shape (1,), not a
scalar; an integer mean truncates, as ONNX Runtime's does; argmax's indices come in the input's
dtype, and with no axis it takes the flattened input's, shape (1,) (keepdims: ones of the
input's rank)."""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir

from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    check_axes,
    dim_of,
    dims_after,
    dims_product,
    shape_of,
    unsupported_attribute,
)
from fusebridge.integrations.mxnet.symbol import MXNode

REDUCTIONS = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "prod": "ReduceProd",
}
INDEX_REDUCTIONS = {"argmax": "ArgMax"}


@CONVERTERS.register(*REDUCTIONS)
def _reduction(cx, node: MXNode) -> None:
    x = cx.input(0)
    axes = list(cx.attr("axis", "ints", ()) or ())
    keepdims = cx.attr("keepdims", "bool", False)
    check_axes(cx, "axis", axes, cx.rank(x), one=False)
    op = REDUCTIONS[node.op]
    if axes and cx.attr("exclude", "bool", False):
        cx.define(_reduce_others(cx, op, x, axes, keepdims))
        return
    y = cx.reduce(op, x, axes or None, keepdims, name=f"{node.name}/{op}")
    # Reduced to no axes, ONNX gives a scalar, MXNet shape (1,): Expand to [1] makes a scalar
    # [1] and leaves any other shape as it is.
    cx.define(y if keepdims else cx.add("Expand", [y, cx.ints([1], "one")]))


def _reduce_others(cx, op: str, x: ir.Value, kept: list[int], keepdims: bool) -> ir.Value:
    """The reduction over every axis but `kept`, rank-agnostic: x viewed as [before k1, d_k1,
    between k1 and k2, d_k2, ..., after kn] (products of dims), reduced over the products."""
    rank = cx.rank(x)
    if rank is not None:
        kept = [a % rank for a in kept]
    elif min(kept) < 0 <= max(kept):  # their order depends on the rank
        unsupported_attribute(
            cx,
            "axis",
            tuple(kept),
            "axes all >= 0 or all < 0 with exclude=True when the input's rank is not known",
        )
    kept = sorted(kept)
    pieces = [dims_product(cx, x, 0, kept[0])]
    for k, after in itertools.pairwise(kept):
        pieces += [dim_of(cx, x, k), dims_product(cx, x, k + 1, after)]
    pieces += [dim_of(cx, x, kept[-1]), dims_after(cx, x, kept[-1])]
    view = cx.add("Reshape", [x, cx.add("Concat", pieces, {"axis": 0})])
    y = cx.reduce(op, view, list(range(0, len(pieces), 2)), False, name=f"{cx.node.name}/{op}")
    if not keepdims:
        return y
    # x's shape with ones but at the kept axes (ONNX's Gather and ScatterElements take
    # negative indices as MXNet's axes are).
    at = cx.ints(kept, "kept")
    kept_dims = cx.add("Gather", [shape_of(cx, x, 0), at])
    return cx.add("Reshape", [y, cx.add("ScatterElements", [_ones_shape(cx, x), at, kept_dims])])


def _ones_shape(cx, x: ir.Value) -> ir.Value:
    """[1, ..., 1], as many as x has axes: the shape keepdims gives a reduction of them all."""
    one = {"value": ir.tensor(np.ones(1, np.int64))}
    rank = cx.add("Shape", [shape_of(cx, x, 0)])
    return cx.add("ConstantOfShape", [rank], one, dtype=ir.DataType.INT64)


@CONVERTERS.register(*INDEX_REDUCTIONS)
def _index_reduction(cx, node: MXNode) -> None:
    x = cx.input(0)
    axis = cx.attr("axis", "int?", None)
    keepdims = cx.attr("keepdims", "bool", False)
    op = INDEX_REDUCTIONS[node.op]
    if axis is None:  # the flattened input's index: shape (1,), with keepdims (1, ..., 1)
        flat = cx.add("Reshape", [x, cx.ints([-1], "flat")])
        index = cx.add(op, [flat], {"axis": 0, "keepdims": 1}, dtype=ir.DataType.INT64)
        if keepdims:
            index = cx.add("Reshape", [index, _ones_shape(cx, x)])
    else:
        check_axes(cx, "axis", [axis], cx.rank(x))
        attrs = {"axis": axis, "keepdims": int(keepdims)}
        index = cx.add(op, [x], attrs, dtype=ir.DataType.INT64)
    cx.define(cx.cast(index, x.dtype or ir.DataType.FLOAT, f"{node.name}/as_input"))
