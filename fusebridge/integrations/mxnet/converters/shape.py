"""MXNet's ops that move or reshape data: Concat (and gluon's _rnn_param_concat, folded at load),
Reshape with MXNet's special codes, transpose, SwapAxis, expand_dims, Flatten and slice_axis."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    check_axes,
    shape_of,
    swap_axes,
)
from fusebridge.integrations.mxnet.symbol import MXNode

_INT64_MAX = np.iinfo(np.int64).max


@CONVERTERS.register("_rnn_param_concat", "Concat", "concat")
def _concat(cx, node: MXNode) -> None:
    axis = cx.attr("dim", "int", 1)
    count = cx.attr("num_args", "int", len(node.inputs))
    if count != len(node.inputs) or not count:
        bad_attribute(
            cx, "num_args", count, f"the number of inputs ({len(node.inputs)}), at least 1"
        )
    inputs = [cx.input(i) for i in range(len(node.inputs))]
    arrays = [cx.array(v) for v in inputs]
    if all(a is not None for a in arrays):  # gluon's packed RNN parameters: folded at load
        if len({a.dtype for a in arrays}) > 1:
            raise ModelFormatError(
                f"{cx.where()}: inputs of dtypes {', '.join(str(a.dtype) for a in arrays)}, "
                "expected one dtype"
            )
        cx.spend(sum(a.nbytes for a in arrays))
        try:
            joined = np.concatenate(arrays, axis=axis)
        except ValueError as e:  # the shapes do not join, or the axis is not theirs
            raise ModelFormatError(
                f"{cx.where()}: cannot join the inputs on dim {axis}: {e}"
            ) from None
        cx.define(cx.const(joined, node.name))
        return
    cx.define(cx.add("Concat", inputs, {"axis": axis}))


@CONVERTERS.register("Reshape", "reshape")
def _reshape(cx, node: MXNode) -> None:
    """MXNet's special codes, from the input's run-time shape: 0 copies the dim, -1 infers one,
    -2 copies all the rest, -3 merges two, -4 splits one into the next two codes."""
    if cx.attr("reverse", "bool", False):
        raise UnsupportedOpError(f"{cx.where()}: reverse=True is not supported")
    x = cx.input(0)
    codes = list(cx.attr("shape", "ints") or ())
    _check_reshape_codes(cx, codes)
    known = cx.array(x)
    if known is not None:
        cx.spend(known.nbytes)
        cx.define(cx.const(_fold_reshape(cx, known, codes), node.name))
        return
    pieces, j, i = [], 0, 0
    while i < len(codes):
        c = codes[i]
        if c > 0 or c == -1:
            pieces.append(cx.ints([c], "dim"))
            j += 1
        elif c == 0:
            pieces.append(shape_of(cx, x, j, j + 1))
            j += 1
        elif c == -2:
            pieces.append(shape_of(cx, x, j))
        elif c == -3:
            pieces.append(cx.add("Mul", [shape_of(cx, x, j, j + 1), shape_of(cx, x, j + 1, j + 2)]))
            j += 2
        elif c == -4:
            a, b = codes[i + 1], codes[i + 2]
            dim = shape_of(cx, x, j, j + 1)
            if a == -1:
                pieces += [cx.add("Div", [dim, cx.ints([b], "dim")]), cx.ints([b], "dim")]
            elif b == -1:
                pieces += [cx.ints([a], "dim"), cx.add("Div", [dim, cx.ints([a], "dim")])]
            else:
                pieces += [cx.ints([a], "dim"), cx.ints([b], "dim")]
            i += 2
            j += 1
        i += 1
    cx.define(cx.add("Reshape", [x, cx.add("Concat", pieces, {"axis": 0})]))


def _check_reshape_codes(cx, codes: list[int]) -> None:
    """MXNet's codes: dims > 0, and 0, -1, -2, -3, -4 (followed by the two dims it splits one
    into: > 0, or one of them -1); one dim at most inferred (-1). A 0 to split by would divide
    by zero when the shape is computed."""
    if not codes:
        bad_attribute(cx, "shape", tuple(codes), "at least one dim")
    inferred, i = 0, 0
    while i < len(codes):
        c = codes[i]
        if c < -4:
            bad_attribute(cx, "shape", tuple(codes), "dims > 0 or the codes 0, -1, -2, -3, -4")
        if c == -4:
            split = codes[i + 1 : i + 3]
            if len(split) < 2 or not all(d > 0 or d == -1 for d in split) or split == [-1, -1]:
                bad_attribute(
                    cx, "shape", tuple(codes), "-4 followed by two dims > 0 (one may be -1)"
                )
            inferred += -1 in split
            i += 2
        inferred += c == -1
        i += 1
    if inferred > 1:
        bad_attribute(cx, "shape", tuple(codes), "at most one dim inferred (-1)")


def _fold_reshape(cx, a: np.ndarray, codes: list[int]) -> np.ndarray:
    if not all(c > 0 or c == -1 for c in codes):
        raise UnsupportedOpError(f"{cx.where()}: reshape of a parameter by {codes}")
    try:
        return a.reshape(codes)
    except ValueError:
        bad_attribute(
            cx, "shape", tuple(codes), f"a shape of {a.size} elements (the input's {a.shape})"
        )


@CONVERTERS.register("transpose")
def _transpose(cx, node: MXNode) -> None:
    x = cx.input(0)
    axes = list(cx.attr("axes", "ints", ()) or ())
    rank = cx.rank(x)
    if axes and (sorted(axes) != list(range(len(axes))) or rank not in (None, len(axes))):
        bad_attribute(cx, "axes", tuple(axes), f"a permutation of 0..{(rank or len(axes)) - 1}")
    cx.define(cx.add("Transpose", [x], {"perm": axes} if axes else {}))


@CONVERTERS.register("SwapAxis", "swapaxes")
def _swap_axis(cx, node: MXNode) -> None:
    x = cx.input(0)
    a, b = sorted((cx.attr("dim1", "int", 0), cx.attr("dim2", "int", 0)))
    if a < 0:
        raise UnsupportedOpError(f"{cx.where()}: negative axes need the rank, unknown at load")
    for key in ("dim1", "dim2"):
        check_axes(cx, key, [cx.attr(key, "int", 0)], cx.rank(x))
    cx.define(swap_axes(cx, x, a, b))


@CONVERTERS.register("expand_dims")
def _expand_dims(cx, node: MXNode) -> None:
    x, axis = cx.input(0), cx.attr("axis", "int")
    rank = cx.rank(x)
    check_axes(cx, "axis", [axis], None if rank is None else rank + 1)
    cx.define(cx.add("Unsqueeze", [x, cx.ints([axis], "axis")]))


@CONVERTERS.register("Flatten", "flatten")
def _flatten(cx, node: MXNode) -> None:
    cx.define(cx.add("Flatten", [cx.input(0)], {"axis": 1}))


@CONVERTERS.register("slice_axis")
def _slice_axis(cx, node: MXNode) -> None:
    x, axis, end = cx.input(0), cx.attr("axis", "int"), cx.attr("end", "int?", None)
    check_axes(cx, "axis", [axis], cx.rank(x))
    inputs = [
        x,
        cx.ints([cx.attr("begin", "int")], "begin"),
        cx.ints([_INT64_MAX if end is None else end], "end"),
        cx.ints([axis], "axis"),
    ]
    cx.define(cx.add("Slice", inputs))
