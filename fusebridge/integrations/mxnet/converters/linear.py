"""MXNet's weight layers and products: FullyConnected, Embedding (ids clipped to the table as
MXNet does), dot and batch_dot."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    positive_attribute,
    shape_of,
)
from fusebridge.integrations.mxnet.symbol import MXNode


@CONVERTERS.register("FullyConnected")
def _fully_connected(cx, node: MXNode) -> None:
    x, w = cx.input(0), cx.input(1)
    if cx.attr("flatten", "bool", True):
        x = cx.add("Flatten", [x], {"axis": 1})
    hidden = positive_attribute(cx, "num_hidden")
    weight = cx.array(w)
    if weight is not None and (weight.ndim != 2 or weight.shape[0] != hidden):
        raise ModelFormatError(
            f"{cx.where()}: weight has shape {weight.shape}, expected [num_hidden = {hidden}, "
            "input size]"
        )
    wt = (
        cx.fold("weight_t", w, np.transpose)
        if weight is not None
        else cx.add("Transpose", [w], {"perm": [1, 0]})
    )
    y = cx.add("MatMul", [x, wt])
    if not cx.attr("no_bias", "bool", False):
        y = cx.add("Add", [y, cx.input(2)])
    cx.define(y)


@CONVERTERS.register("Embedding")
def _embedding(cx, node: MXNode) -> None:
    """Gather of rows. As MXNet's Embedding does, the ids are truncated to integers and clipped
    to [0, rows - 1]: an id past either end takes the first or the last row (Gather alone would
    take a row from the end for a negative id)."""
    weight = cx.input(1)
    known = cx.array(weight)
    if known is not None:
        dims = (cx.attr("input_dim", "int", known.shape[0]), cx.attr("output_dim", "int", -1))
        if known.ndim != 2 or known.shape[0] != dims[0] or dims[1] not in (-1, known.shape[1]):
            raise ModelFormatError(
                f"{cx.where()}: weight has shape {known.shape}, expected [input_dim, "
                f"output_dim] = [{dims[0]}, {'?' if dims[1] == -1 else dims[1]}]"
            )
        last = cx.const(np.int64(known.shape[0] - 1), f"{node.name}/last_row")
    else:
        rows = cx.add("Squeeze", [shape_of(cx, weight, 0, 1), cx.ints([0], "axis0")])
        last = cx.add("Sub", [rows, cx.const(np.int64(1), "one")])
    ids = cx.cast(cx.input(0), ir.DataType.INT64, f"{node.name}/ids")
    ids = cx.add("Clip", [ids, cx.const(np.int64(0), "zero"), last])
    cx.define(cx.add("Gather", [weight, ids], {"axis": 0}))


def _transpose_last_two(cx, x: ir.Value) -> ir.Value:
    """x [..., m, n] -> [..., n, m] for any rank >= 2 (the rank is not known at load time)."""
    m, n = shape_of(cx, x, -2, -1), shape_of(cx, x, -1)
    three = cx.add(
        "Reshape", [x, cx.add("Concat", [cx.ints([-1], "minus_one"), m, n], {"axis": 0})]
    )
    swapped = cx.add("Transpose", [three], {"perm": [0, 2, 1]})
    back = cx.add("Concat", [shape_of(cx, x, 0, -2), n, m], {"axis": 0})
    return cx.add("Reshape", [swapped, back])


@CONVERTERS.register("dot")
def _dot(cx, node: MXNode) -> None:
    """MXNet dot contracts a's last axis with b's first: MatMul when b is 2-D."""
    a, b = cx.input(0), cx.input(1)
    if cx.attr("transpose_a", "bool", False):
        a = cx.add("Transpose", [a])  # dot's transpose_a reverses all of a's axes
    if cx.attr("transpose_b", "bool", False):
        b = cx.add("Transpose", [b])
    if b.shape is not None and len(b.shape) != 2:
        raise UnsupportedOpError(f"{cx.where()}: dot with a rhs of rank {len(b.shape)}")
    cx.define(cx.add("MatMul", [a, b]))


@CONVERTERS.register("batch_dot")
def _batch_dot(cx, node: MXNode) -> None:
    a, b = cx.input(0), cx.input(1)
    if cx.attr("transpose_a", "bool", False):
        a = _transpose_last_two(cx, a)
    if cx.attr("transpose_b", "bool", False):
        b = _transpose_last_two(cx, b)
    cx.define(cx.add("MatMul", [a, b]))
