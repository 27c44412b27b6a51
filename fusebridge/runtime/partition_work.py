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

from fusebridge.ops import standard

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
            if standard.is_gather(node):
                return _gathered(node, position, count)
            if node.op_type not in standard.KEEP_COUNT:
                return None
            others = () if node.op_type in standard.SHAPING else node.inputs[1:]
            if any(o is not None and weight(o) is None for o in others):
                return None  # a second data input: the count may change by broadcasting
            v = node.inputs[0] if node.inputs else None
        if v is None:
            return None
        k = position[v.name]
        return lambda xs: getattr(xs[k], "size", 0)

    terms = []
    for node in group:
        data, factor = standard.data_and_factor(node, weight)
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


def multiply_adds(terms: Sequence[Term], arrays: Sequence[np.ndarray | None]) -> float:
    """The estimate for one run: the partition's input arrays in input order."""
    return sum(sized(arrays) * factor for sized, factor in terms)
