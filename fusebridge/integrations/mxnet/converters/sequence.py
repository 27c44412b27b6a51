"""MXNet's sequence ops, SequenceMask and SequenceLast, and the sequence lengths they and RNN take
(checked when the model runs: MXNet takes them as floats)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    shape_of,
    swap_axes,
    typed_scalar,
)
from fusebridge.integrations.mxnet.symbol import MXNode


def checked_lengths(cx, slot: int, x: ir.Value, axis: int, minimum: int = 0) -> ir.Value:
    """Input `slot`, the sequence lengths of x ([T, N, ...] for axis 0, [N, T, ...] for 1), as
    int64 checked when the model runs: MXNet takes them as floats, and a NaN, an infinity, a
    fraction or a length past T must be refused naming the model's input, not be cast."""
    lengths = cx.input(slot)
    node, output = cx.node.inputs[slot]
    producer = cx.symbol.nodes[node]
    source = (
        f"model input {producer.name!r}"
        if producer.op == "null"
        else f"output {output} of {producer.op} node {producer.name!r}"
    )
    attrs = {"axis": axis, "minimum": minimum, "source": f"{cx.where()}: lengths ({source})"}
    return cx.add(
        "SequenceLengths",
        [lengths, x],
        attrs,
        domain=conventions.DOMAIN,
        name=f"{cx.node.name}/lengths",
        dtype=ir.DataType.INT64,
    )


def _steps_grid(cx, x: ir.Value, axis: int) -> tuple[ir.Value, ir.Value]:
    """(x as [T, N, rest] or [N, T, rest], a bool [T, N, 1] / [N, T, 1] of the real steps)."""
    t = shape_of(cx, x, axis, axis + 1)
    steps = cx.add(
        "Range",
        [
            cx.const(np.int64(0), "zero"),
            cx.add("Squeeze", [t, cx.ints([0], "axis0")]),
            cx.const(np.int64(1), "one"),
        ],
    )
    lens = checked_lengths(cx, 1, x, axis)
    if axis == 0:
        real = cx.add(
            "Less",
            [
                cx.add("Unsqueeze", [steps, cx.ints([1], "a")]),
                cx.add("Unsqueeze", [lens, cx.ints([0], "a")]),
            ],
        )
    else:
        real = cx.add(
            "Less",
            [
                cx.add("Unsqueeze", [steps, cx.ints([0], "a")]),
                cx.add("Unsqueeze", [lens, cx.ints([1], "a")]),
            ],
        )
    three = cx.add(
        "Reshape",
        [x, cx.add("Concat", [shape_of(cx, x, 0, 2), cx.ints([-1], "rest")], {"axis": 0})],
    )
    return three, cx.add("Unsqueeze", [real, cx.ints([2], "a")], dtype=ir.DataType.BOOL)


@CONVERTERS.register("SequenceMask")
def _sequence_mask(cx, node: MXNode) -> None:
    x = cx.input(0)
    if not cx.attr("use_sequence_length", "bool", False):
        cx.define(cx.add("Identity", [x]))
        return
    axis = cx.attr("axis", "int", 0)
    if axis not in (0, 1):
        raise UnsupportedOpError(f"{cx.where()}: axis {axis}, expected 0 or 1")
    three, real = _steps_grid(cx, x, axis)
    dtype = x.dtype.numpy() if x.dtype is not None else np.float32
    value = typed_scalar(cx, "value", cx.attr("value", "float", 0.0), np.dtype(dtype))
    fill = cx.const(value, f"{node.name}/value")
    masked = cx.add("Where", [real, three, fill], dtype=x.dtype)
    cx.define(cx.add("Reshape", [masked, shape_of(cx, x, 0)]))


@CONVERTERS.register("SequenceLast")
def _sequence_last(cx, node: MXNode) -> None:
    x = cx.input(0)
    axis = cx.attr("axis", "int", 0)
    if axis not in (0, 1):
        raise UnsupportedOpError(f"{cx.where()}: axis {axis}, expected 0 or 1")
    if not cx.attr("use_sequence_length", "bool", False):
        cx.define(cx.add("Gather", [x, cx.const(np.int64(-1), "last")], {"axis": axis}))
        return
    lens = checked_lengths(cx, 1, x, axis, minimum=1)
    last = cx.add("Sub", [lens, cx.ints([1], "one")])  # [N]
    # x as [N, T, rest]; the row of sentence n is n * T + last[n].
    batch_major = x if axis == 1 else swap_axes(cx, x, 0, 1)
    t = shape_of(cx, batch_major, 1, 2)
    n = shape_of(cx, batch_major, 0, 1)
    rows = cx.add(
        "Add",
        [
            cx.add(
                "Mul",
                [
                    cx.add(
                        "Range",
                        [
                            cx.const(np.int64(0), "zero"),
                            cx.add("Squeeze", [n, cx.ints([0], "a")]),
                            cx.const(np.int64(1), "one"),
                        ],
                    ),
                    t,
                ],
            ),
            last,
        ],
    )
    flat = cx.add(
        "Reshape",
        [
            batch_major,
            cx.add("Concat", [cx.ints([-1], "rest"), shape_of(cx, batch_major, 2)], {"axis": 0}),
        ],
    )
    cx.define(cx.add("Gather", [flat, rows], {"axis": 0}))
