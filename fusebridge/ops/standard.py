"""What fusebridge knows of the standard ONNX ops (and ONNX Runtime's com.microsoft forms of
them), which have no OpDef: their attribute defaults, the work of those that carry a model's
arithmetic, and those that ONNX Runtime cannot run on empty inputs. The runtime and the writers
read these facts here instead of keeping lists of op names of their own."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir

from fusebridge import conventions

_STANDARD = ("", "ai.onnx")
# Ops (standard, and ONNX Runtime's com.microsoft Gelu) whose output has as many elements as
# their first input (given a constant other operand).
KEEP_COUNT = frozenset({
    "Abs", "Add", "Cast", "Div", "Dropout", "Elu", "Erf", "Exp", "Flatten", "Gelu", "Identity",
    "LeakyRelu", "Log", "Mul", "Neg", "Relu", "Reshape", "Sigmoid", "Softmax", "Sqrt", "Squeeze",
    "Sub", "Tanh", "Transpose", "Unsqueeze",
})  # fmt: skip
# Of those, the ones whose second input is a shape or axes, not a second operand.
SHAPING = frozenset({"Reshape", "Squeeze", "Unsqueeze"})
# ONNX Runtime 1.32 ends the process on some empty inputs of these (runtime/empty_inputs.py).
EMPTY_UNSAFE = frozenset({"GRU", "LSTM", "RNN"})


def is_standard(node: ir.Node | onnx.NodeProto) -> bool:
    return node.domain in _STANDARD


def is_empty_unsafe(node: ir.Node | onnx.NodeProto) -> bool:
    """A recurrence that ONNX Runtime cannot run on an empty input (a batch of 0, 0 steps)."""
    return is_standard(node) and node.op_type in EMPTY_UNSAFE


def is_gather(node: ir.Node) -> bool:
    """Gather(data, indices): rows of data, one per index (an embedding look-up, torch's
    unsorting of packed sequences)."""
    return node.op_type == "Gather" and len(node.inputs) == 2


def inputs(node: ir.Node, opset: int = conventions.ONNX_OPSET) -> dict[str, ir.Value | None]:
    """A standard node's inputs by the names of ONNX's schema at `opset` (None where absent)."""
    names = [f.name for f in onnx.defs.get_schema(node.op_type, opset).inputs]
    values = list(node.inputs) + [None] * (len(names) - len(node.inputs))
    return dict(zip(names, values))


def default(op_type: str, name: str, opset: int = conventions.ONNX_OPSET) -> object:
    """ONNX's default of attribute `name` of standard op `op_type` at `opset` (None where it
    has none, no such attribute at that opset, or ONNX has no such op)."""
    if not onnx.defs.has(op_type):
        return None
    attributes = onnx.defs.get_schema(op_type, opset).attributes
    if name not in attributes:
        return None
    value = attributes[name].default_value
    if value.type == onnx.AttributeProto.UNDEFINED:
        return None
    return onnx.helper.get_attribute_value(value)


Weight = Callable[[ir.Value | None], np.ndarray | None]  # a constant's data, None if computed


def data_and_factor(node: ir.Node, weight: Weight) -> tuple[ir.Value | None, float]:
    """(data input, multiply-adds per element of it) of a MatMul, Gemm or Conv (or ONNX
    Runtime's fused form) with a constant weight; (None, 0) for any other node. The factor is
    read off the weight: a MatMul's output columns; a Conv's output channels times its kernel
    over group and stride."""
    ins = list(node.inputs)
    if len(ins) < 2 or node.domain not in (*_STANDARD, "com.microsoft"):
        return None, 0.0
    op_type = node.op_type.removeprefix("Fused")
    if op_type == "MatMul":
        b = weight(ins[1])
        if b is not None and b.ndim >= 1:
            return ins[0], float(b.shape[-1])
        a = weight(ins[0])
        if a is not None and a.ndim >= 2:
            return ins[1], float(a.shape[-2])
    elif op_type == "Gemm":
        b = weight(ins[1])
        if b is not None and b.ndim == 2:
            trans = node.attributes.get_int("transB", 0)
            return ins[0], float(b.shape[0] if trans else b.shape[1])
    elif op_type == "Conv":
        w = weight(ins[1])
        if w is not None and w.ndim >= 3:
            group = max(1, node.attributes.get_int("group", 1))
            strides = node.attributes.get_ints("strides", None) or [1]
            kernel = float(np.prod(w.shape[2:]))
            return ins[0], w.shape[0] * kernel / (group * float(np.prod(strides)))
    return None, 0.0
