"""What the framework converters (Paddle's ProgramConverter, MXNet's SymbolConverter) share:
the IR nodes and initializers they build, under names unique in the graph."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops


class GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self._taken: set[str] = set()
        self._last: dict[str, int] = {}  # names are never given back: unique_name's counters

    def unique(self, name: str) -> str:
        return conventions.unique_name(name, self._taken, self._last)

    def const(self, array: np.ndarray, name: str) -> ir.Value:
        """A new initializer (never a changed shared one)."""
        array = np.array(array, order="C")  # ascontiguousarray would make a scalar 1-D
        t = ir.tensor(array, name=self.unique(name))
        v = ir.Value(
            name=t.name, const_value=t, shape=ir.Shape(array.shape), type=ir.TensorType(t.dtype)
        )
        self.initializers.append(v)
        return v

    def ints(self, values: Sequence[int], name: str) -> ir.Value:
        return self.const(np.asarray(values, np.int64), name)

    def reduce(
        self,
        op_type: str,
        x: ir.Value,
        axes: Sequence[int] | None,
        keepdims: bool,
        *,
        name: str,
    ) -> ir.Value:
        """ONNX's Reduce`op_type` of x over `axes` (None: every axis) as opset 17 spells it:
        ReduceSum takes its axes as an input, the other reductions as an attribute (until
        opset 18)."""
        inputs, attrs = [x], {"keepdims": int(keepdims)}
        if axes is not None and op_type == "ReduceSum":
            inputs.append(self.ints(list(axes), f"{name}/axes"))
        elif axes is not None:
            attrs["axes"] = list(axes)
        return self.add(op_type, inputs, attrs, name=name)

    def cast(self, value: ir.Value, to: ir.DataType, name: str) -> ir.Value:
        return self.add("Cast", [value], {"to": to}, name=name, dtype=to)

    def add(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: dict[str, object] | None = None,
        *,
        name: str,
        dtype: ir.DataType | None = None,
        domain: str = "",
        num_outputs: int = 1,
    ) -> ir.Value | tuple[ir.Value, ...]:
        """Appends a node named `name` (made unique), as is its first output (the others
        `name:k`); outputs typed `dtype` (default: the first input's). Returns the output, or
        all outputs when there are several."""
        if domain == conventions.DOMAIN:
            node = ops.node(op_type, inputs, attributes, num_outputs=num_outputs)
        else:
            node = ir.node(op_type, list(inputs), attributes, num_outputs=num_outputs)
        node.name = self.unique(name)
        dtype = dtype or (inputs[0].dtype if inputs and inputs[0] is not None else None)
        for k, out in enumerate(node.outputs):
            out.name = node.name if k == 0 else f"{node.name}:{k}"
            if dtype is not None:
                out.type = ir.TensorType(dtype)
        self.nodes.append(node)
        return node.outputs[0] if num_outputs == 1 else tuple(node.outputs)
