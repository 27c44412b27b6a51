"""save_mxnet's emitters of the arithmetic: unary and binary elementwise ops (a constant scalar
operand as MXNet's *_scalar op), the activations (LeakyRelu, Elu, Selu, PRelu, Softmax,
LogSoftmax), Cast, Clip and MatMul (dot, batch_dot)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import onnx_ir as ir

from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.emitters.common import (
    DTYPES,
    WRITERS,
    Refused,
    has_vector_inputs,
    node_inputs,
    number_text,
)

if TYPE_CHECKING:
    from fusebridge.integrations.mxnet.save import Writer
from fusebridge.integrations.mxnet.emitters.shape import elementwise_vector

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


def _unary(w: Writer, node: ir.Node) -> None:
    op, attrs = _UNARY[node.op_type]
    x = node.inputs[0]
    w.define(w.emit(op, [w.entry(x)], attrs), w.shape(x))


for _op in _UNARY:
    WRITERS.register(_op)(_unary)


def _binary(w: Writer, node: ir.Node) -> None:
    if has_vector_inputs(w, node):
        elementwise_vector(w, node)
        return
    if len(node.inputs) != 2:
        raise Refused(f"{len(node.inputs)} inputs; only two are written")
    a, b = node.inputs
    broadcast, scalar, reverse = _BINARY[node.op_type]
    for x, c, op in ((a, b, scalar), (b, a, reverse)):
        array = w.constant(c)
        if array is not None and array.size == 1 and array.ndim <= 1 and w.constant(x) is None:
            value = array.reshape(-1)[0]
            w.define(w.emit(op, [w.entry(x)], {"scalar": number_text(value)}), w.shape(x))
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
    WRITERS.register(_op)(_binary)


@WRITERS.register("LeakyRelu", "Elu", "Selu")
def _leaky(w: Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    if node.op_type == "Selu":
        # MXNet's selu has ONNX's default constants and no others.
        alpha, gamma = (
            w.attr(node, "alpha"),
            w.attr(node, "gamma"),
        )
        if not (
            math.isclose(alpha, 1.6732632423543772) and math.isclose(gamma, 1.0507009873554805)
        ):
            raise Refused(f"alpha {alpha} and gamma {gamma}; MXNet's selu has the defaults only")
        attrs = {"act_type": "selu"}
    else:
        act = "leaky" if node.op_type == "LeakyRelu" else "elu"
        attrs = {"act_type": act, "slope": number_text(w.attr(node, "alpha"))}
    w.define(w.emit("LeakyReLU", [w.entry(x)], attrs), w.shape(x))


@WRITERS.register("PRelu")
def _prelu(w: Writer, node: ir.Node) -> None:
    """relu(x) + slope * min(x, 0), with ONNX's broadcasting of the slope (MXNet's prelu
    scales axis 1 whatever the slope's shape)."""
    x, slope = node.inputs
    negative = w.emit("_minimum_scalar", [w.entry(x)], {"scalar": "0.0"}, name=f"{node.name}_neg")
    scaled = w.emit("broadcast_mul", [negative, w.entry(slope)], name=f"{node.name}_scaled")
    positive = w.emit("Activation", [w.entry(x)], {"act_type": "relu"}, name=f"{node.name}_pos")
    w.define(w.emit("broadcast_add", [positive, scaled]), w.shape(x))


@WRITERS.register("Softmax", "LogSoftmax")
def _softmax(w: Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    op = "softmax" if node.op_type == "Softmax" else "log_softmax"
    w.define(w.emit(op, [w.entry(x)], {"axis": w.attr(node, "axis")}), w.shape(x))


@WRITERS.register("Cast")
def _cast(w: Writer, node: ir.Node) -> None:
    x = node.inputs[0]
    to = ir.DataType(w.attr(node, "to"))
    if to not in DTYPES:
        raise Refused(f"to {to.name}, a type MXNet has not")
    w.define(w.emit("Cast", [w.entry(x)], {"dtype": DTYPES[to][0]}), w.shape(x))


@WRITERS.register("Clip")
def _clip(w: Writer, node: ir.Node) -> None:
    x, low, high = node_inputs(node, 3)
    bounds = []
    for value, default in ((low, -math.inf), (high, math.inf)):
        array = w.constant(value)
        if value is not None and (array is None or array.size != 1):
            raise Refused(f"bound {value.name!r} must be a constant scalar (MXNet's clip)")
        bounds.append(default if value is None else array.reshape(-1)[0].item())
    attrs = {"a_min": number_text(bounds[0]), "a_max": number_text(bounds[1])}
    w.define(w.emit("clip", [w.entry(x)], attrs), w.shape(x))


@WRITERS.register("MatMul")
def _matmul(w: Writer, node: ir.Node) -> None:
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
        raise Refused(
            f"ranks {rank_a} and {rank_b} (None: unknown); written are a constant 2-D right "
            "side (dot) and two tensors of rank 2 (dot) or 3 (batch_dot)"
        )
