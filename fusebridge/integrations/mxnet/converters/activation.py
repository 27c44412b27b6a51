"""MXNet's activations: Activation (by act_type), relu, sigmoid and tanh, LeakyReLU (leaky, elu,
selu, prelu, rrelu, gelu), clip (hardtanh), softmax, log_softmax and SoftmaxOutput, as ONNX
ops."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    check_axes,
    finite_attribute,
    shape_of,
    typed_scalar,
    unsupported_attribute,
)
from fusebridge.integrations.mxnet.symbol import MXNode

_ACTIVATIONS = {
    "relu": "Relu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "softrelu": "Softplus",
    "softsign": "Softsign",
}


@CONVERTERS.register("Activation")
def _activation(cx, node: MXNode) -> None:
    act = cx.attr("act_type", "str")
    if act not in _ACTIVATIONS:
        raise UnsupportedOpError(
            f"{cx.where()}: act_type {act!r}, expected one of {sorted(_ACTIVATIONS)}"
        )
    cx.define(cx.add(_ACTIVATIONS[act], [cx.input(0)]))


def _unary(onnx_op: str) -> Callable:
    def convert(cx, node: MXNode) -> None:
        cx.define(cx.add(onnx_op, [cx.input(0)]))

    return convert


for _name, _op in (("relu", "Relu"), ("sigmoid", "Sigmoid"), ("tanh", "Tanh")):
    CONVERTERS.register(_name)(_unary(_op))


@CONVERTERS.register("LeakyReLU")
def _leaky_relu(cx, node: MXNode) -> None:
    act = cx.attr("act_type", "str", "leaky")
    x = cx.input(0)
    if act == "leaky":
        out = cx.add("LeakyRelu", [x], {"alpha": finite_attribute(cx, "slope", 0.25)})
    elif act == "elu":
        out = cx.add("Elu", [x], {"alpha": finite_attribute(cx, "slope", 0.25)})
    elif act == "selu":
        out = cx.add("Selu", [x])
    elif act == "prelu":
        # gamma [C] scales channel axis 1 (MXNet's PReLU), so it is broadcast as [C, 1, ...].
        gamma = cx.input(1)
        if cx.array(gamma) is None:
            raise UnsupportedOpError(f"{cx.where()}: prelu's gamma must be a parameter")
        column = cx.fold("gamma", gamma, lambda a: a.reshape(-1, 1))
        out = cx.add("PRelu", [x, column])
    elif act == "rrelu":  # inference: the mean of the random slope
        lower, upper = (
            finite_attribute(cx, "lower_bound", 0.125),
            finite_attribute(cx, "upper_bound", 0.334),
        )
        if lower > upper:
            bad_attribute(cx, "upper_bound", upper, f"at least lower_bound ({lower})")
        out = cx.add("LeakyRelu", [x], {"alpha": (lower + upper) / 2})
    elif act == "gelu":  # x * (1 + erf(x / sqrt 2)) / 2
        half = cx.const(np.float32(0.5), f"{node.name}/half")
        root2 = cx.const(np.float32(np.sqrt(2.0)), f"{node.name}/sqrt2")
        one = cx.const(np.float32(1.0), f"{node.name}/one")
        erf = cx.add("Erf", [cx.add("Div", [x, root2])])
        out = cx.add("Mul", [cx.add("Mul", [x, half]), cx.add("Add", [erf, one])])
    else:
        raise UnsupportedOpError(f"{cx.where()}: act_type {act!r} not supported")
    cx.define(out)


@CONVERTERS.register("clip")
def _clip(cx, node: MXNode) -> None:
    """ONNX's Clip, its bounds in x's dtype as MXNet casts them (an integer's truncated)."""
    x = cx.input(0)
    low, high = cx.attr("a_min", "float"), cx.attr("a_max", "float")
    for key, value in (("a_min", low), ("a_max", high)):
        if math.isnan(value):
            bad_attribute(cx, key, value, "a number (not NaN)")
    if low > high:
        # MXNet then gives a_max above a_max and a_min at or below it; ONNX's Clip a_max.
        unsupported_attribute(cx, "a_max", high, f"at least a_min ({low})")
    dtype = np.dtype(x.dtype.numpy() if x.dtype is not None else np.float32)
    bounds = [
        cx.const(typed_scalar(cx, key, value, dtype), f"{node.name}/{key}")
        for key, value in (("a_min", low), ("a_max", high))
    ]
    cx.define(cx.add("Clip", [x, *bounds]))


@CONVERTERS.register("softmax", "log_softmax")
def _softmax(cx, node: MXNode) -> None:
    if cx.attr("use_length", "bool", False):
        raise UnsupportedOpError(f"{cx.where()}: use_length is not supported")
    x = cx.input(0)
    temperature = cx.attr("temperature", "float?", None)
    if temperature is not None and not (math.isfinite(temperature) and temperature != 0):
        bad_attribute(cx, "temperature", temperature, "a finite number other than 0, or None")
    if temperature not in (None, 1.0):
        x = cx.add("Div", [x, cx.const(np.float32(temperature), f"{node.name}/temperature")])
    op = "Softmax" if node.op == "softmax" else "LogSoftmax"
    axis = cx.attr("axis", "int", -1)
    check_axes(cx, "axis", [axis], cx.rank(x))
    cx.define(cx.add(op, [x], {"axis": axis}))


@CONVERTERS.register("SoftmaxOutput")
def _softmax_output(cx, node: MXNode) -> None:
    """Inference: the softmax of the data (the label input is for training only)."""
    x = cx.input(0)
    if cx.attr("multi_output", "bool", False):
        cx.define(cx.add("Softmax", [x], {"axis": 1}))
    elif cx.attr("preserve_shape", "bool", False):
        cx.define(cx.add("Softmax", [x], {"axis": -1}))
    else:  # softmax over everything but the batch axis, in the data's shape
        flat = cx.add("Flatten", [x], {"axis": 1})
        cx.define(cx.add("Reshape", [cx.add("Softmax", [flat], {"axis": 1}), shape_of(cx, x, 0)]))
