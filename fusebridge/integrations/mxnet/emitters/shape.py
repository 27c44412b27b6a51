"""save_mxnet's emitters of the ops that move or reshape data, and of the shapes the IR computes
when it runs (Shape, Concat, ReduceProd, Mul, Div of shape vectors: followed symbolically,
shape_codes.py, not written): Constant, Reshape (as MXNet's Reshape codes), Flatten,
Transpose, Squeeze, Unsqueeze, Slice, ConstantOfShape and Gather."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.emitters.common import (
    DTYPES,
    WRITERS,
    Refused,
    has_vector_inputs,
    node_inputs,
    number_text,
    tuple_text,
)

if TYPE_CHECKING:
    from fusebridge.integrations.mxnet.save import Writer

_LARGE = 1 << 62  # a Slice end at least this large means "to the end"


# -- shapes computed at run time: followed, not written -----------------------------------------
@WRITERS.register("Constant")
def _constant(w: Writer, node: ir.Node) -> None:
    tensor = w.attr(node, "value")
    if tensor is None:
        raise Refused("only Constant's 'value' attribute is read")
    w.constants[node.outputs[0]] = tensor.numpy()


@WRITERS.register("Shape")
def _shape(w: Writer, node: ir.Node) -> None:
    (x,) = node_inputs(node, 1)
    start, end = w.attr(node, "start"), w.attr(node, "end")
    w.vectors[node.outputs[0]] = sc.slice_shape(w.shape(x), x, start, end)


@WRITERS.register("Concat")
def _concat(w: Writer, node: ir.Node) -> None:
    if has_vector_inputs(w, node):
        w.vectors[node.outputs[0]] = tuple(p for v in node.inputs for p in w.vector(v))
        return
    axis = w.axis(w.attr(node, "axis"), node.inputs[0])
    inputs = [w.entry(v) for v in node.inputs]
    w.define(w.emit("Concat", inputs, {"dim": axis, "num_args": len(inputs)}))


@WRITERS.register("ReduceProd")
def _reduce_prod(w: Writer, node: ir.Node) -> None:
    (x, axes) = node_inputs(node, 2)
    if x not in w.vectors or axes is not None or w.attr(node, "keepdims") != 1:
        raise Refused("only the product of a shape's dims (keepdims 1, no axes) is written")
    w.vectors[node.outputs[0]] = (sc.product(w.vectors[x]),)


def elementwise_vector(w: Writer, node: ir.Node) -> None:
    a, b = (w.vector(v) for v in node.inputs)
    if len(a) != 1 or len(b) != 1 or any(isinstance(p, sc.Run) for p in a + b):
        raise Refused(f"{node.op_type} of shapes of more than one dim")
    if node.op_type == "Mul":
        w.vectors[node.outputs[0]] = (sc.product(a + b),)
    elif node.op_type == "Div" and isinstance(b[0], sc.Lit) and b[0].n > 0:
        w.vectors[node.outputs[0]] = (sc.quotient(a[0], b[0].n),)
    else:
        raise Refused(f"{node.op_type} of shapes (only Mul, and Div by a constant, are)")


@WRITERS.register("Gather")
def _gather(w: Writer, node: ir.Node) -> None:
    data, indices = node.inputs
    axis = w.axis(w.attr(node, "axis"), data)
    shape = None
    if axis == 0:
        shape = (*w.shape(indices), *sc.slice_shape(w.shape(data), data, 1, None))
    # take wraps negative indices as Gather counts them (from the end).
    attrs = {"axis": axis, "mode": "wrap"}
    w.define(w.emit("take", [w.entry(data), w.entry(indices)], attrs), shape)


@WRITERS.register("Flatten")
def _flatten(w: Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    if w.attr(node, "axis") != 1:
        raise Refused("axis other than 1 (MXNet's Flatten keeps the first axis)")
    known = w.shape(x)
    first = sc.slice_shape(known, x, 0, 1)
    rest = sc.slice_shape(known, x, 1, None)
    w.define(w.emit("Flatten", [w.entry(x)]), (*first, sc.product(rest)))


@WRITERS.register("Transpose")
def _transpose(w: Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    perm = w.attr(node, "perm")
    known, shape = w.shape(x), None
    if perm is not None and w.rank(x) == len(perm):
        shape = tuple(known[p] for p in perm)
    attrs = {"axes": tuple_text(perm)} if perm is not None else {}
    w.define(w.emit("transpose", [w.entry(x)], attrs), shape)


@WRITERS.register("Reshape")
def _reshape(w: Writer, node: ir.Node) -> None:
    x, target = node.inputs
    parts = list(w.vector(target))
    source = w.shape(x)
    out = node.outputs[0]
    for i, p in enumerate(parts):
        if p == sc.Lit(0):
            if w.attr(node, "allowzero"):
                raise Refused("allowzero with a 0 in the shape (MXNet's 0 copies a dim)")
            if any(isinstance(q, sc.Run) for q in parts[:i]):
                raise Refused(f"a 0 (copy dim {i}) after dims of unknown count")
            parts[i] = sc.slice_shape(source, x, i, i + 1)[0]
        elif p == sc.Lit(-1):
            parts[i] = sc.Dim(out, i)  # inferred: known only as this output's dim
        elif isinstance(p, sc.Lit) and p.n < -1:
            raise Refused(f"shape entry {p.n}")
    try:
        codes, unflatten = sc.reshape_codes(source, tuple(parts))
    except ValueError as e:
        raise Refused(f"its shape cannot be written as MXNet Reshape codes: {e}") from None
    y = w.entry(x)
    for step in sc.mxnet_steps(codes):
        y = w.emit("Reshape", [y], {"shape": tuple_text(step)})
    for position, run in reversed(unflatten):  # from the right: the positions stay right
        attrs = {"lhs_begin": position, "lhs_end": position + 1, "rhs_begin": run.start}
        if run.end is not None:
            attrs["rhs_end"] = run.end
        y = w.emit("reshape_like", [y, w.entry(run.value)], attrs, name=f"{node.name}_dims")
    w.define(y, tuple(parts))


@WRITERS.register("Unsqueeze", "Squeeze")
def _squeeze(w: Writer, node: ir.Node) -> None:
    x, axes = node_inputs(node, 2)
    axes = w.ints(axes, "axes")
    if axes is None:
        axes = list(w.attr(node, "axes") or [])
    if node.op_type == "Squeeze":
        attrs = {"axis": tuple_text([w.axis(a, x) for a in axes])} if axes else {}
        w.define(w.emit("squeeze", [w.entry(x)], attrs))
        return
    entry = w.entry(x)
    for a in sorted(w.axis(a, x, len(axes)) for a in axes):
        entry = w.emit("expand_dims", [entry], {"axis": a})
    w.define(entry)


@WRITERS.register("Slice")
def _slice(w: Writer, node: ir.Node) -> None:
    x, starts, ends, axes, steps = node_inputs(node, 5)
    starts, ends = w.ints(starts, "starts"), w.ints(ends, "ends")
    axes = w.ints(axes, "axes") or list(range(len(starts)))
    if any(s != 1 for s in w.ints(steps, "steps") or []):
        raise Refused("steps other than 1")
    entry = w.entry(x)
    for axis, begin, end in zip(axes, starts, ends):
        attrs = {"axis": w.axis(axis, x), "begin": begin, "end": "None" if end >= _LARGE else end}
        entry = w.emit("slice_axis", [entry], attrs)
    w.define(entry)


@WRITERS.register("ConstantOfShape")
def _constant_of_shape(w: Writer, node: ir.Node) -> None:
    parts = w.vector(node.inputs[0])
    if not all(isinstance(p, sc.Lit) and p.n >= 0 for p in parts):
        raise Refused("its shape is known only when the model runs")
    tensor = w.attr(node, "value")
    value = np.zeros(1, np.float32) if tensor is None else tensor.numpy().reshape(-1)
    dtype = ir.DataType.from_numpy(value.dtype)
    if dtype not in DTYPES:
        raise Refused(f"value of type {dtype.name}, which MXNet has not")
    attrs = {"shape": tuple_text([p.n for p in parts]), "value": number_text(value[0])}
    attrs["dtype"] = DTYPES[dtype][0]
    w.define(w.emit("_full", [], attrs), parts)
