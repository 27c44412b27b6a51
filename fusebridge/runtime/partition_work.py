"""How much arithmetic an ONNX Runtime partition does in a run, from the sizes of the arrays it
is given: what decides whether a partition beside our kernels gets threads (onnx_partition.py).

Only the ops that carry the work of the models we run are counted: MatMul, Gemm and Conv (and
ONNX Runtime's fused forms) with a constant weight. Each takes `elements of its data input x
factor` multiply-adds, the factor read off the weight (a MatMul's output columns; a Conv's output
channels times its kernel over group and stride). The data input is traced back through ops that
keep its element count (Transpose, Reshape, activations, a bias add, ...), or a Gather of an
input's rows, to the partition's inputs; a node whose input cannot be traced so is not counted
(the estimate stays low, so the partition stays on one thread)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

# Ops whose output has as many elements as their first input (given a constant other operand).
_KEEP_COUNT = {
    "Abs", "Add", "Cast", "Div", "Dropout", "Elu", "Erf", "Exp", "Flatten", "Gelu", "Identity",
    "LeakyRelu", "Log", "Mul", "Neg", "Relu", "Reshape", "Sigmoid", "Softmax", "Sqrt", "Squeeze",
    "Sub", "Tanh", "Transpose", "Unsqueeze",
}  # fmt: skip
_MATMUL = {"MatMul", "FusedMatMul"}
_GEMM = {"Gemm", "FusedGemm"}
_CONV = {"Conv", "FusedConv"}

Count = Callable[[Sequence[np.ndarray | None]], int]  # elements of a value, from the inputs
Term = tuple[Count, float]  # (elements of a counted node's data input, multiply-adds per element)


def work_terms(
    group: Sequence[ir.Node], input_names: Sequence[str], constants: Mapping[str, np.ndarray]
) -> list[Term]:
    """The counted nodes of `group`: how to size each one's data input in a run, and its
    factor."""
    position = {name: k for k, name in enumerate(input_names)}
    members = set(group)

    def weight(v: ir.Value | None) -> np.ndarray | None:
        if v is None:
            return None
        if v.name in constants:
            return np.asarray(constants[v.name])
        return v.const_value.numpy() if v.const_value is not None else None

    def count(v: ir.Value | None) -> Count | None:
        """The element count of `v` in a run, from the partition's inputs; None if unknown."""
        while v is not None and v.name not in position:
            node = v.producer()
            if node is None or node not in members:
                return None
            if node.op_type == "Gather" and len(node.inputs) == 2:
                return _gathered(node, position, count)
            if node.op_type not in _KEEP_COUNT:
                return None
            shaping = node.op_type in ("Reshape", "Squeeze", "Unsqueeze")  # 2nd input: axes, shape
            others = () if shaping else node.inputs[1:]
            if any(o is not None and weight(o) is None for o in others):
                return None  # a second data input: the count may change by broadcasting
            v = node.inputs[0] if node.inputs else None
        if v is None:
            return None
        k = position[v.name]
        return lambda xs: getattr(xs[k], "size", 0)

    terms = []
    for node in group:
        data, factor = _data_and_factor(node, weight)
        sized = count(data) if factor else None
        if sized is not None:
            terms.append((sized, factor))
    return terms


def _gathered(node: ir.Node, position: Mapping[str, int], count) -> Count | None:
    """Gather(data, indices) with data an input of the partition (torch's unsorting of packed
    sequences): data's rows along the axis, one per index."""
    data, indices = node.inputs
    rows = count(indices)
    if data is None or data.name not in position or rows is None:
        return None
    k, axis = position[data.name], node.attributes.get_int("axis", 0)

    def sized(xs: Sequence[np.ndarray | None]) -> int:
        x = xs[k]
        if x is None or not -x.ndim <= axis < x.ndim or x.shape[axis] == 0:
            return 0
        return x.size // x.shape[axis] * rows(xs)

    return sized


def _data_and_factor(node: ir.Node, weight) -> tuple[ir.Value | None, float]:
    ins = list(node.inputs)
    if len(ins) < 2 or node.domain not in ("", "ai.onnx", "com.microsoft"):
        return None, 0.0
    if node.op_type in _MATMUL:
        b = weight(ins[1])
        if b is not None and b.ndim >= 1:
            return ins[0], float(b.shape[-1])
        a = weight(ins[0])
        if a is not None and a.ndim >= 2:
            return ins[1], float(a.shape[-2])
    elif node.op_type in _GEMM:
        b = weight(ins[1])
        if b is not None and b.ndim == 2:
            trans = node.attributes.get_int("transB", 0)
            return ins[0], float(b.shape[0] if trans else b.shape[1])
    elif node.op_type in _CONV:
        w = weight(ins[1])
        if w is not None and w.ndim >= 3:
            group = max(1, node.attributes.get_int("group", 1))
            strides = node.attributes.get_ints("strides", None) or [1]
            kernel = float(np.prod(w.shape[2:]))
            return ins[0], w.shape[0] * kernel / (group * float(np.prod(strides)))
    return None, 0.0


def multiply_adds(terms: Sequence[Term], arrays: Sequence[np.ndarray | None]) -> float:
    """The estimate for one run: the partition's input arrays in input order."""
    return sum(sized(arrays) * factor for sized, factor in terms)
