"""MXNet's elementwise arithmetic: the binary ops (broadcast_*, elemwise_* and their aliases),
the ops of a tensor and a scalar attribute (_plus_scalar, _rminus_scalar, ...), and the unary
math ops (exp, log, sqrt, abs, negative), each the ONNX op of the same function."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    typed_scalar,
)
from fusebridge.integrations.mxnet.symbol import MXNode

# MXNet's names (and aliases) of the elementwise binary ops.
_BINARY = {
    "Add": ("broadcast_add", "broadcast_plus", "elemwise_add", "_plus", "_Plus", "_add"),
    "Sub": ("broadcast_sub", "broadcast_minus", "elemwise_sub", "_minus", "_Minus", "_sub"),
    "Mul": ("broadcast_mul", "elemwise_mul", "_mul", "_Mul"),
    "Div": ("broadcast_div", "elemwise_div", "_div", "_Div"),
    "Max": ("broadcast_maximum", "_maximum", "_Maximum"),
    "Min": ("broadcast_minimum", "_minimum", "_Minimum"),
    "Pow": ("broadcast_power", "_power", "_Power"),
}


def _binary(onnx_op: str) -> Callable:
    def convert(cx, node: MXNode) -> None:
        cx.define(cx.add(onnx_op, [cx.input(0), cx.input(1)]))

    return convert


for _op, _names in _BINARY.items():
    CONVERTERS.register(*_names)(_binary(_op))


def _scalar_op(onnx_op: str, reverse: bool = False) -> Callable:
    def convert(cx, node: MXNode) -> None:
        x = cx.input(0)
        dtype = np.dtype(x.dtype.numpy() if x.dtype is not None else np.float32)
        scalar = typed_scalar(cx, "scalar", cx.attr("scalar", "float"), dtype)
        s = cx.const(scalar, f"{node.name}/scalar")
        cx.define(cx.add(onnx_op, [s, x] if reverse else [x, s]))

    return convert


for _name, _op in (("plus", "Add"), ("minus", "Sub"), ("mul", "Mul"), ("div", "Div")):
    CONVERTERS.register(f"_{_name}_scalar")(_scalar_op(_op))
CONVERTERS.register("_power_scalar")(_scalar_op("Pow"))
CONVERTERS.register("_rminus_scalar")(_scalar_op("Sub", reverse=True))
CONVERTERS.register("_rdiv_scalar")(_scalar_op("Div", reverse=True))
CONVERTERS.register("_rpower_scalar")(_scalar_op("Pow", reverse=True))


def _unary(onnx_op: str) -> Callable:
    def convert(cx, node: MXNode) -> None:
        cx.define(cx.add(onnx_op, [cx.input(0)]))

    return convert


for _name, _op in (
    ("exp", "Exp"),
    ("log", "Log"),
    ("sqrt", "Sqrt"),
    ("abs", "Abs"),
    ("negative", "Neg"),
):
    CONVERTERS.register(_name)(_unary(_op))
