"""`save_mxnet(model, prefix)`: a fusebridge model (loaded from any format, optimized or not)
written as an MXNet symbol + params, so that it runs in MXNet with fusebridge's native ops
(op_library.py).

The writer walks the model's graph: FusionGRU becomes `fusebridge_fusion_gru`, Dropout
`fusebridge_dropout`, every standard op the MXNet op that computes the same thing. Every
parameter written is one of the model's initializers, under its own name. MXNet symbols carry
no shapes and take static shape attributes, so the shapes the IR computes at run time (Shape
slices, Concat, Mul, ...) are followed symbolically (shape_codes.py) and a Reshape becomes
MXNet's Reshape codes. A node that cannot be written raises UnsupportedOpError naming it, its
op and why, before any file is written."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.params import write_params

# ONNX element types MXNet has: its dtype name and its __dtype__ code.
_DTYPES = {
    ir.DataType.FLOAT: ("float32", 0),
    ir.DataType.DOUBLE: ("float64", 1),
    ir.DataType.FLOAT16: ("float16", 2),
    ir.DataType.UINT8: ("uint8", 3),
    ir.DataType.INT32: ("int32", 4),
    ir.DataType.INT8: ("int8", 5),
    ir.DataType.INT64: ("int64", 6),
}
_UNARY = {
    "Relu": ("Activation", {"act_type": "relu"}),
    "Sigmoid": ("Activation", {"act_type": "sigmoid"}),
    "Tanh": ("Activation", {"act_type": "tanh"}),
    "Softplus": ("Activation", {"act_type": "softrelu"}),
    "Softsign": ("Activation", {"act_type": "softsign"}),
    "Exp": ("exp", {}),
    "Log": ("log", {}),
    "Sqrt": ("sqrt", {}),
    "Abs": ("abs", {}),
    "Neg": ("negative", {}),
    "Erf": ("erf", {}),
    "Identity": ("_copy", {}),
}
# ONNX binary op -> (MXNet broadcast op, scalar op, scalar op with the scalar first).
_BINARY = {
    "Add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
    "Sub": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "Mul": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "Div": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "Pow": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
    "Max": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
    "Min": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar"),
}
_LARGE = 1 << 62  # a Slice end at least this large means "to the end"


class _Refused(Exception):
    """Why the node being written cannot be (turned into UnsupportedOpError naming it)."""


def _tuple(values) -> str:
    values = [int(v) for v in values]
    return f"({values[0]},)" if len(values) == 1 else f"({', '.join(map(str, values))})"


def _number(value: float) -> str:
    return repr(float(value))


class _Writer:
    def __init__(self, model: ir.Model) -> None:
        self.graph = model.graph
        self.nodes: list[dict] = []
        self.names: set[str] = set()
        self.entries: dict[ir.Value, list[int]] = {}  # IR value -> MXNet (node, output, 0)
        self.shapes: dict[ir.Value, sc.Shape] = {}  # what is known of a tensor's shape
        self.vectors: dict[ir.Value, sc.Shape] = {}  # int64 shapes computed at run time
        self.constants: dict[ir.Value, np.ndarray] = {}  # Constant nodes' outputs
        self.params: dict[str, np.ndarray] = {}
        self.node: ir.Node | None = None
        self.live = _live_nodes(model.graph)

    # -- MXNet nodes --------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        candidate, k = name, 1
        while candidate in self.names:
            candidate, k = f"{name}_{k}", k + 1
        self.names.add(candidate)
        return candidate

    def emit(self, op: str, inputs: list[list[int]], attrs: dict | None = None, name=None):
        """Adds an MXNet node (named after the IR node being written); its first entry."""
        node = {"op": op, "name": self.unique(name or self.node.name or op), "inputs": inputs}
        if attrs:
            node["attrs"] = {k: str(v) for k, v in attrs.items()}
        self.nodes.append(node)
        return [len(self.nodes) - 1, 0, 0]

    def variable(self, name: str, attrs: dict | None = None) -> list[int]:
        node = {"op": "null", "name": self.unique(name), "inputs": []}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        return [len(self.nodes) - 1, 0, 0]

    def param(self, name: str, array: np.ndarray) -> list[int]:
        if array.ndim == 0:
            raise _Refused(f"constant {name!r} is a scalar (0-d), which MXNet 1.x has no form for")
        entry = self.variable(name)
        self.params[self.nodes[entry[0]]["name"]] = array
        return entry

    # -- values -------------------------------------------------------------------------------
    def constant(self, value: ir.Value | None) -> np.ndarray | None:
        if value is None:
            return None
        if value in self.constants:
            return self.constants[value]
        if value.const_value is not None and value.is_initializer():
            return value.const_value.numpy()
        return None

    def entry(self, value: ir.Value) -> list[int]:
        if value in self.entries:
            return self.entries[value]
        if value in self.vectors:
            raise _Refused(
                f"input {value.name!r} is a shape computed when the model runs; MXNet takes "
                "shapes only as static attributes"
            )
        array = self.constant(value)
        if array is None:
            raise _Refused(f"input {value.name!r} is neither a graph input nor computed before")
        self.entries[value] = self.param(value.name, array)
        return self.entries[value]

    def shape(self, value: ir.Value) -> sc.Shape:
        array = self.constant(value)
        if array is not None:
            return tuple(sc.Lit(d) for d in array.shape)
        return self.shapes.get(value, sc.own(value))

    def vector(self, value: ir.Value | None) -> sc.Shape:
        """An int64 shape vector (an input of Reshape, ConstantOfShape, ...) as parts."""
        if value is None:
            raise _Refused("a shape input is missing")
        if value in self.vectors:
            return self.vectors[value]
        array = self.constant(value)
        if array is None or array.dtype.kind not in "iu" or array.ndim > 1:
            raise _Refused(
                f"shape input {value.name!r} is neither a constant of integers nor made of "
                "the model's shapes"
            )
        return tuple(sc.Lit(int(d)) for d in array.reshape(-1))

    def ints(self, value: ir.Value | None, what: str) -> list[int] | None:
        if value is None:
            return None
        array = self.constant(value)
        if array is None or array.dtype.kind not in "iu":
            raise _Refused(f"{what} ({value.name!r}) must be a constant of integers")
        return [int(v) for v in array.reshape(-1)]

    def define(self, entry: list[int], shape: sc.Shape | None = None, k: int = 0) -> None:
        out = self.node.outputs[k]
        self.entries[out] = entry
        self.shapes[out] = shape if shape is not None else sc.own(out)

    def used(self, value: ir.Value) -> bool:
        """Whether a node written, or the graph's outputs, use value."""
        return value.is_graph_output() or any(u in self.live for u, _ in value.uses())

    def rank(self, value: ir.Value) -> int | None:
        shape = self.shape(value)
        return None if any(isinstance(p, sc.Run) for p in shape) else len(shape)

    def axis(self, axis: int, value: ir.Value, extra: int = 0) -> int:
        """A non-negative axis of value (of rank + extra): a negative one needs the rank."""
        if axis >= 0:
            return axis
        rank = self.rank(value)
        if rank is None:
            raise _Refused(f"axis {axis} is negative and the rank of {value.name!r} is unknown")
        return axis + rank + extra

    # -- the walk -----------------------------------------------------------------------------
    def write(self) -> dict:
        for value in self.graph.inputs:
            attrs = {}
            if value.dtype is not None and value.dtype != ir.DataType.FLOAT:
                if value.dtype not in _DTYPES:
                    raise UnsupportedOpError(
                        f"save_mxnet: graph input {value.name!r} has type {value.dtype.name}, "
                        f"which MXNet has not (known: {', '.join(n for n, _ in _DTYPES.values())})"
                    )
                attrs["__dtype__"] = str(_DTYPES[value.dtype][1])
            self.entries[value] = self.variable(value.name, attrs)
        for node in self.graph:
            if node not in self.live:  # computes nothing the outputs use: not written
                continue
            self.node = node
            key = node.op_type if node.domain in ("", "ai.onnx") else (node.domain, node.op_type)
            writer = _WRITERS.get(key)
            where = f"save_mxnet: node {node.name!r} ({node.domain or 'ai.onnx'}.{node.op_type})"
            if writer is None:
                known = sorted(k if isinstance(k, str) else f"{k[0]}.{k[1]}" for k in _WRITERS)
                raise UnsupportedOpError(
                    f"{where}: no MXNet form is written for this op (written: {', '.join(known)})"
                )
            try:
                writer(self, node)
            except _Refused as e:
                raise UnsupportedOpError(f"{where}: {e}") from None
        self.node = None
        heads = []
        for k, value in enumerate(self.graph.outputs):
            if value in self.vectors:
                raise UnsupportedOpError(
                    f"save_mxnet: graph output {value.name!r} is a shape computed at run time"
                )
            try:
                entry = self.entry(value)
            except _Refused as e:
                raise UnsupportedOpError(f"save_mxnet: graph output {value.name!r}: {e}") from None
            if self.nodes[entry[0]]["op"] == "null" or entry in heads:
                entry = self.emit("_copy", [entry], name=f"output{k}")
            heads.append(entry)
        return self.symbol(heads)

    def symbol(self, heads: list[list[int]]) -> dict:
        """The nodes the heads use, in order, inputs renumbered."""
        keep, stack = set(), [h[0] for h in heads]
        while stack:
            i = stack.pop()
            if i not in keep:
                keep.add(i)
                stack += [e[0] for e in self.nodes[i]["inputs"]]
        order = sorted(keep)
        new = {old: k for k, old in enumerate(order)}
        nodes = [
            {**self.nodes[i], "inputs": [[new[e[0]], e[1], 0] for e in self.nodes[i]["inputs"]]}
            for i in order
        ]
        return {
            "nodes": nodes,
            "arg_nodes": [k for k, n in enumerate(nodes) if n["op"] == "null"],
            "heads": [[new[h[0]], h[1], 0] for h in heads],
            "attrs": {"mxnet_version": ["int", 10901]},
        }


def _live_nodes(graph: ir.Graph) -> set[ir.Node]:
    """The nodes the graph's outputs depend on."""
    live, stack = set(), [v.producer() for v in graph.outputs]
    while stack:
        node = stack.pop()
        if node is not None and node not in live:
            live.add(node)
            stack += [v.producer() for v in node.inputs if v is not None]
    return live


_WRITERS: dict[object, Callable[[_Writer, ir.Node], None]] = {}


def writes(*keys) -> Callable:
    def register(fn: Callable) -> Callable:
        for key in keys:
            _WRITERS[key] = fn
        return fn

    return register


def _attr(node: ir.Node, name: str, default=None):
    attr = node.attributes.get(name)
    return default if attr is None else attr.value


def _inputs(node: ir.Node, count: int) -> list[ir.Value | None]:
    return [*node.inputs, *[None] * count][:count]


# -- shapes computed at run time: followed, not written -----------------------------------------
@writes("Constant")
def _constant(w: _Writer, node: ir.Node) -> None:
    tensor = _attr(node, "value")
    if tensor is None:
        raise _Refused("only Constant's 'value' attribute is read")
    w.constants[node.outputs[0]] = tensor.numpy()


@writes("Shape")
def _shape(w: _Writer, node: ir.Node) -> None:
    (x,) = _inputs(node, 1)
    start, end = _attr(node, "start", 0), _attr(node, "end")
    w.vectors[node.outputs[0]] = sc.slice_shape(w.shape(x), x, start, end)


def _vector_inputs(w: _Writer, node: ir.Node) -> bool:
    return any(v in w.vectors for v in node.inputs if v is not None)


def _concat(w: _Writer, node: ir.Node) -> None:
    if _vector_inputs(w, node):
        w.vectors[node.outputs[0]] = tuple(p for v in node.inputs for p in w.vector(v))
        return
    axis = w.axis(_attr(node, "axis"), node.inputs[0])
    inputs = [w.entry(v) for v in node.inputs]
    w.define(w.emit("Concat", inputs, {"dim": axis, "num_args": len(inputs)}))


writes("Concat")(_concat)


@writes("ReduceProd")
def _reduce_prod(w: _Writer, node: ir.Node) -> None:
    (x, axes) = _inputs(node, 2)
    if x not in w.vectors or axes is not None or _attr(node, "keepdims", 1) != 1:
        raise _Refused("only the product of a shape's dims (keepdims 1, no axes) is written")
    w.vectors[node.outputs[0]] = (sc.product(w.vectors[x]),)


def _elementwise_vector(w: _Writer, node: ir.Node) -> None:
    a, b = (w.vector(v) for v in node.inputs)
    if len(a) != 1 or len(b) != 1 or any(isinstance(p, sc.Run) for p in a + b):
        raise _Refused(f"{node.op_type} of shapes of more than one dim")
    if node.op_type == "Mul":
        w.vectors[node.outputs[0]] = (sc.product(a + b),)
    elif node.op_type == "Div" and isinstance(b[0], sc.Lit) and b[0].n > 0:
        w.vectors[node.outputs[0]] = (sc.quotient(a[0], b[0].n),)
    else:
        raise _Refused(f"{node.op_type} of shapes (only Mul, and Div by a constant, are)")


# -- elementwise --------------------------------------------------------------------------------
def _unary(w: _Writer, node: ir.Node) -> None:
    op, attrs = _UNARY[node.op_type]
    x = node.inputs[0]
    w.define(w.emit(op, [w.entry(x)], attrs), w.shape(x))


for _op in _UNARY:
    writes(_op)(_unary)


def _binary(w: _Writer, node: ir.Node) -> None:
    if _vector_inputs(w, node):
        _elementwise_vector(w, node)
        return
    if len(node.inputs) != 2:
        raise _Refused(f"{len(node.inputs)} inputs; only two are written")
    a, b = node.inputs
    broadcast, scalar, reverse = _BINARY[node.op_type]
    for x, c, op in ((a, b, scalar), (b, a, reverse)):
        array = w.constant(c)
        if array is not None and array.size == 1 and array.ndim <= 1 and w.constant(x) is None:
            value = array.reshape(-1)[0]
            w.define(w.emit(op, [w.entry(x)], {"scalar": _number(value)}), w.shape(x))
            return
    shape = None
    for x, c in ((a, b), (b, a)):
        array = w.constant(c)
        known = w.shape(x)
        if array is not None and array.ndim == 1 and known and known[-1] == sc.Lit(array.size):
            shape = known
    if w.shape(a) == w.shape(b):
        shape = w.shape(a)
    w.define(w.emit(broadcast, [w.entry(a), w.entry(b)]), shape)


for _op in _BINARY:
    writes(_op)(_binary)


@writes("LeakyRelu", "Elu", "Selu")
def _leaky(w: _Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    if node.op_type == "Selu":
        # MXNet's selu has ONNX's default constants and no others.
        alpha, gamma = (
            _attr(node, "alpha", 1.67326319217681884765625),
            _attr(node, "gamma", 1.05070102214813232421875),
        )
        if not (
            math.isclose(alpha, 1.6732632423543772) and math.isclose(gamma, 1.0507009873554805)
        ):
            raise _Refused(f"alpha {alpha} and gamma {gamma}; MXNet's selu has the defaults only")
        attrs = {"act_type": "selu"}
    else:
        default = 0.01 if node.op_type == "LeakyRelu" else 1.0
        act = "leaky" if node.op_type == "LeakyRelu" else "elu"
        attrs = {"act_type": act, "slope": _number(_attr(node, "alpha", default))}
    w.define(w.emit("LeakyReLU", [w.entry(x)], attrs), w.shape(x))


@writes("PRelu")
def _prelu(w: _Writer, node: ir.Node) -> None:
    """relu(x) + slope * min(x, 0), with ONNX's broadcasting of the slope (MXNet's prelu
    scales axis 1 whatever the slope's shape)."""
    x, slope = node.inputs
    negative = w.emit("_minimum_scalar", [w.entry(x)], {"scalar": "0.0"}, name=f"{node.name}_neg")
    scaled = w.emit("broadcast_mul", [negative, w.entry(slope)], name=f"{node.name}_scaled")
    positive = w.emit("Activation", [w.entry(x)], {"act_type": "relu"}, name=f"{node.name}_pos")
    w.define(w.emit("broadcast_add", [positive, scaled]), w.shape(x))


@writes("Softmax", "LogSoftmax")
def _softmax(w: _Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    op = "softmax" if node.op_type == "Softmax" else "log_softmax"
    w.define(w.emit(op, [w.entry(x)], {"axis": _attr(node, "axis", -1)}), w.shape(x))


@writes("Cast")
def _cast(w: _Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    to = ir.DataType(_attr(node, "to"))
    if to not in _DTYPES:
        raise _Refused(f"to {to.name}, a type MXNet has not")
    w.define(w.emit("Cast", [w.entry(x)], {"dtype": _DTYPES[to][0]}), w.shape(x))


@writes("Clip")
def _clip(w: _Writer, node: ir.Node) -> None:
    x, low, high = _inputs(node, 3)
    bounds = []
    for value, default in ((low, -math.inf), (high, math.inf)):
        array = w.constant(value)
        if value is not None and (array is None or array.size != 1):
            raise _Refused(f"bound {value.name!r} must be a constant scalar (MXNet's clip)")
        bounds.append(default if value is None else array.reshape(-1)[0].item())
    attrs = {"a_min": _number(bounds[0]), "a_max": _number(bounds[1])}
    w.define(w.emit("clip", [w.entry(x)], attrs), w.shape(x))


# -- layers and shapes --------------------------------------------------------------------------
@writes("MatMul")
def _matmul(w: _Writer, node: ir.Node) -> None:
    a, b = node.inputs
    weight = w.constant(b)
    rank_a, rank_b = w.rank(a), w.rank(b)
    if weight is not None and weight.ndim == 2:  # dot contracts a's last axis with b's first
        shape = (*sc.slice_shape(w.shape(a), a, 0, -1), sc.Lit(weight.shape[1]))
        w.define(w.emit("dot", [w.entry(a), w.entry(b)]), shape)
    elif rank_a == rank_b == 2:
        w.define(w.emit("dot", [w.entry(a), w.entry(b)]), (w.shape(a)[0], w.shape(b)[1]))
    elif rank_a == rank_b == 3:
        shape = (*w.shape(a)[:2], w.shape(b)[2])
        w.define(w.emit("batch_dot", [w.entry(a), w.entry(b)]), shape)
    else:
        raise _Refused(
            f"ranks {rank_a} and {rank_b} (None: unknown); written are a constant 2-D right "
            "side (dot) and two tensors of rank 2 (dot) or 3 (batch_dot)"
        )


@writes("Gather")
def _gather(w: _Writer, node: ir.Node) -> None:
    data, indices = node.inputs
    axis = w.axis(_attr(node, "axis", 0), data)
    shape = None
    if axis == 0:
        shape = (*w.shape(indices), *sc.slice_shape(w.shape(data), data, 1, None))
    # take wraps negative indices as Gather counts them (from the end).
    attrs = {"axis": axis, "mode": "wrap"}
    w.define(w.emit("take", [w.entry(data), w.entry(indices)], attrs), shape)


@writes("Flatten")
def _flatten(w: _Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    if _attr(node, "axis", 1) != 1:
        raise _Refused("axis other than 1 (MXNet's Flatten keeps the first axis)")
    known = w.shape(x)
    first = sc.slice_shape(known, x, 0, 1)
    rest = sc.slice_shape(known, x, 1, None)
    w.define(w.emit("Flatten", [w.entry(x)]), (*first, sc.product(rest)))


@writes("Transpose")
def _transpose(w: _Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    perm = _attr(node, "perm")
    known, shape = w.shape(x), None
    if perm is not None and w.rank(x) == len(perm):
        shape = tuple(known[p] for p in perm)
    attrs = {"axes": _tuple(perm)} if perm is not None else {}
    w.define(w.emit("transpose", [w.entry(x)], attrs), shape)


@writes("Reshape")
def _reshape(w: _Writer, node: ir.Node) -> None:
    x, target = node.inputs
    parts = list(w.vector(target))
    source = w.shape(x)
    out = node.outputs[0]
    for i, p in enumerate(parts):
        if p == sc.Lit(0):
            if _attr(node, "allowzero", 0):
                raise _Refused("allowzero with a 0 in the shape (MXNet's 0 copies a dim)")
            if any(isinstance(q, sc.Run) for q in parts[:i]):
                raise _Refused(f"a 0 (copy dim {i}) after dims of unknown count")
            parts[i] = sc.slice_shape(source, x, i, i + 1)[0]
        elif p == sc.Lit(-1):
            parts[i] = sc.Dim(out, i)  # inferred: known only as this output's dim
        elif isinstance(p, sc.Lit) and p.n < -1:
            raise _Refused(f"shape entry {p.n}")
    try:
        codes, unflatten = sc.reshape_codes(source, tuple(parts))
    except ValueError as e:
        raise _Refused(f"its shape cannot be written as MXNet Reshape codes: {e}") from None
    y = w.entry(x)
    for step in sc.mxnet_steps(codes):
        y = w.emit("Reshape", [y], {"shape": _tuple(step)})
    for position, run in reversed(unflatten):  # from the right: the positions stay right
        attrs = {"lhs_begin": position, "lhs_end": position + 1, "rhs_begin": run.start}
        if run.end is not None:
            attrs["rhs_end"] = run.end
        y = w.emit("reshape_like", [y, w.entry(run.value)], attrs, name=f"{node.name}_dims")
    w.define(y, tuple(parts))


@writes("Unsqueeze", "Squeeze")
def _squeeze(w: _Writer, node: ir.Node) -> None:
    x, axes = _inputs(node, 2)
    axes = w.ints(axes, "axes")
    if axes is None:
        axes = list(_attr(node, "axes", []) or [])
    if node.op_type == "Squeeze":
        attrs = {"axis": _tuple([w.axis(a, x) for a in axes])} if axes else {}
        w.define(w.emit("squeeze", [w.entry(x)], attrs))
        return
    entry = w.entry(x)
    for a in sorted(w.axis(a, x, len(axes)) for a in axes):
        entry = w.emit("expand_dims", [entry], {"axis": a})
    w.define(entry)


@writes("Slice")
def _slice(w: _Writer, node: ir.Node) -> None:
    x, starts, ends, axes, steps = _inputs(node, 5)
    starts, ends = w.ints(starts, "starts"), w.ints(ends, "ends")
    axes = w.ints(axes, "axes") or list(range(len(starts)))
    if any(s != 1 for s in w.ints(steps, "steps") or []):
        raise _Refused("steps other than 1")
    entry = w.entry(x)
    for axis, begin, end in zip(axes, starts, ends):
        attrs = {"axis": w.axis(axis, x), "begin": begin, "end": "None" if end >= _LARGE else end}
        entry = w.emit("slice_axis", [entry], attrs)
    w.define(entry)


@writes("ConstantOfShape")
def _constant_of_shape(w: _Writer, node: ir.Node) -> None:
    parts = w.vector(node.inputs[0])
    if not all(isinstance(p, sc.Lit) and p.n >= 0 for p in parts):
        raise _Refused("its shape is known only when the model runs")
    tensor = _attr(node, "value")
    value = np.zeros(1, np.float32) if tensor is None else tensor.numpy().reshape(-1)
    dtype = ir.DataType.from_numpy(value.dtype)
    if dtype not in _DTYPES:
        raise _Refused(f"value of type {dtype.name}, which MXNet has not")
    attrs = {"shape": _tuple([p.n for p in parts]), "value": _number(value[0])}
    attrs["dtype"] = _DTYPES[dtype][0]
    w.define(w.emit("_full", [], attrs), parts)


# -- fusebridge ops ---------------------------------------------------------------------------
@writes((conventions.DOMAIN, "SequenceLengths"))
def _sequence_lengths(w: _Writer, node: ir.Node) -> None:
    """fusebridge_fusion_gru checks its lengths itself (whole numbers in [0, T]): the lengths
    go to it as they are. No MXNet op makes that check for any other use."""
    out = node.outputs[0]
    users = {(u.domain, u.op_type, i) for u, i in out.uses()}
    if not users <= {(conventions.DOMAIN, "FusionGRU", 1)}:
        raise _Refused("its lengths feed an op other than FusionGRU, which would not check them")
    w.entries[out] = w.entry(node.inputs[0])


@writes((conventions.DOMAIN, "FusionGRU"))
def _fusion_gru(w: _Writer, node: ir.Node) -> None:
    attrs = ops.schema("FusionGRU").attribute_values(node)
    if attrs["layout"] == "lod":
        raise _Refused("layout lod; fusebridge_fusion_gru takes padded tnc or ntc")
    if len(node.outputs) > 1 and w.used(node.outputs[1]):
        raise _Refused("its Y_last output is used; fusebridge_fusion_gru returns Y only")
    x, lengths, wx, wh, bias, bias_h, h0 = _inputs(node, 7)
    d = 2 if attrs["direction"] == "bidirectional" else 1
    recurrent = w.constant(wh)
    hidden = recurrent.shape[1] if recurrent is not None and recurrent.ndim == 3 else None
    inputs = [w.entry(x), _lengths(w, node, x, lengths, attrs["layout"])]
    inputs += [w.entry(wx), w.entry(wh)]
    for value, name in ((bias, "bias"), (bias_h, "bias_h")):
        if value is None:
            if hidden is None:
                raise _Refused(f"{name} is left out and Wh is not a constant of rank 3")
            inputs.append(w.param(f"{node.name}/{name}", np.zeros((d, 3 * hidden), np.float32)))
        else:
            inputs.append(w.entry(value))
    if h0 is not None:
        inputs.append(w.entry(h0))
    mx_attrs = {
        "direction": attrs["direction"],
        "layout": attrs["layout"],
        "linear_before_reset": bool(attrs["linear_before_reset"]),
        "origin_mode": bool(attrs["origin_mode"]),
        "activation": attrs["activation"],
        "gate_activation": attrs["gate_activation"],
        "has_h0": h0 is not None,
    }
    shape = None
    if hidden is not None:
        shape = (*sc.slice_shape(w.shape(x), x, 0, 2), sc.Lit(d * hidden))
    w.define(w.emit("fusebridge_fusion_gru", inputs, mx_attrs), shape)


def _lengths(w: _Writer, node: ir.Node, x, lengths, layout: str) -> list[int]:
    """The sentence lengths; without them every sentence is T long: T summed from ones."""
    if lengths is not None:
        return w.entry(lengths)
    ones = w.emit("ones_like", [w.entry(x)], name=f"{node.name}_ones")
    column = w.emit(
        "slice_axis", [ones], {"axis": 2, "begin": 0, "end": 1}, name=f"{node.name}_column"
    )
    axes = "(0, 2)" if layout == "tnc" else "(1, 2)"
    return w.emit("sum", [column], {"axis": axes}, name=f"{node.name}_steps")


@writes((conventions.DOMAIN, "Dropout"))
def _dropout(w: _Writer, node: ir.Node) -> None:
    attrs = ops.schema("Dropout").attribute_values(node)
    x, seed, offset = _inputs(node, 3)
    mask_used = len(node.outputs) > 1 and w.used(node.outputs[1])
    mx_attrs = {"p": _number(attrs["p"]), "axes": _tuple(attrs["axes"]) if attrs["axes"] else "()"}
    if attrs["is_test"] or seed is not None:
        seeds = [w.ints(v, name) for v, name in ((seed, "seed"), (offset, "offset"))]
        mx_attrs |= {
            "mode": attrs["mode"],
            "is_test": bool(attrs["is_test"]),
            "seed": seeds[0][0] if seeds[0] else 0,
            "offset": seeds[1][0] if seeds[1] else 0,
        }
        y = w.emit("fusebridge_dropout", [w.entry(x)], mx_attrs)
        w.define(y, w.shape(x))
        if len(node.outputs) > 1:
            w.define([y[0], 1, 0], k=1)
        return
    # A training dropout without a seed (an MXNet Dropout of mode 'always'): MXNet's own,
    # which draws from MXNet's generator as the model it came from did.
    if attrs["mode"] != "upscale_in_train" or mask_used:
        raise _Refused("a dropout without a seed is written as MXNet's Dropout, which has "
                       "mode upscale_in_train only and no packed mask")  # fmt: skip
    mx_attrs["mode"] = "always"
    w.define(w.emit("Dropout", [w.entry(x)], mx_attrs), w.shape(x))


def save_mxnet(model: ir.Model, prefix: str | os.PathLike) -> tuple[Path, Path]:
    """Writes `prefix-symbol.json` and `prefix-0000.params`: `model`'s graph as MXNet ops (our
    `fusebridge_fusion_gru` and `fusebridge_dropout` for FusionGRU and Dropout), and the
    parameters `model` holds. Load them in MXNet after
    fusebridge.integrations.mxnet.register(), e.g. mx.gluon.SymbolBlock.imports
    (docs/mxnet.md). Returns the two paths; raises UnsupportedOpError naming the first node it
    cannot write, before writing anything."""
    writer = _Writer(model)
    symbol = writer.write()
    used = {n["name"] for n in symbol["nodes"] if n["op"] == "null"}
    arrays = {name: ("arg", a) for name, a in writer.params.items() if name in used}
    base = Path(prefix)
    base.parent.mkdir(parents=True, exist_ok=True)
    symbol_path = base.with_name(base.name + "-symbol.json")
    params_path = base.with_name(base.name + "-0000.params")
    symbol_path.write_text(json.dumps(symbol, indent=2))
    write_params(params_path, arrays)
    return symbol_path, params_path
