"""Building standard-ONNX subgraphs: OpBuilder records nodes on a tape (an op's lowering, a
frontend's import rewrite and the runtime's guards all build with it, each taking the builder
first, as onnxscript's `op`); replace_node puts what was built where a node was. The builder
knows its target opset (the model's): each standard op is recorded in its form at that opset
(opset_forms.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.opset_forms import emit_at


class OpBuilder(ir.tape.Tape):
    """`op.Gather(x, i, axis=0)` -> the output Value, the node recorded on the tape;
    `_outputs=k` gives k outputs, `_domain` another domain, `_name` the node's name.
    `op.const(array, hint)` -> an initializer named after `prefix` and `hint`, unique in
    `taken` (the graph's names). Standard ops are written in opset 17's form and recorded in
    their form at `opset` (the model's standard opset); one that has none there raises
    UnsupportedOpError naming the node (`prefix`), the op and the opset."""

    def __init__(
        self, prefix: str, taken: set[str] | None = None, opset: int = conventions.ONNX_OPSET
    ) -> None:
        super().__init__()
        self.prefix = prefix
        self.taken = taken if taken is not None else set()
        self.opset = opset
        self._consts: dict[tuple, ir.Value] = {}

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value | tuple[ir.Value, ...]]:
        if not op_type[:1].isupper():
            raise AttributeError(op_type)

        def make(
            *inputs: ir.Value | None,
            _outputs: int = 1,
            _domain: str = "",
            _name: str | None = None,
            **attributes: object,
        ):
            inputs = list(inputs)
            while inputs and inputs[-1] is None:  # optional inputs left off at the end
                inputs.pop()
            where = {"domain": _domain, "name": _name}

            def emit(inputs: list, attributes: dict, outputs: int):
                if outputs == 1:
                    return self.op(op_type, inputs, attributes, **where)
                return tuple(
                    self.op_multi_out(op_type, inputs, attributes, num_outputs=outputs, **where)
                )

            if _domain not in ("", "ai.onnx"):
                return emit(inputs, attributes, _outputs)
            node = f"node {self.prefix!r}"
            return emit_at(op_type, self.opset, inputs, attributes, _outputs, emit, self, node)

        return make

    def const(self, array: object, hint: str) -> ir.Value:
        array = np.asarray(array)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key in self._consts:  # one initializer per distinct constant
            return self._consts[key]
        name = conventions.unique_name(f"{self.prefix}/{hint}", self.taken)
        self._consts[key] = self.initializer(ir.tensor(array, name=name), name=name)
        return self._consts[key]

    def ints(self, values: list[int], hint: str) -> ir.Value:
        return self.const(np.asarray(values, np.int64), hint)


def model_opset(model: ir.Model) -> int:
    """The model's opset of the standard domain: the opset its standard ops are written at."""
    imports = model.opset_imports
    return imports.get("", imports.get("ai.onnx", conventions.ONNX_OPSET))


def constant_input(value: ir.Value | None, where: str, why: str) -> np.ndarray | None:
    """The data of an initializer input (None when the input is absent); an input computed in
    the graph raises UnsupportedOpError: `where` names the node and input, `why` says why."""
    if value is None:
        return None
    if value.const_value is None or value.is_graph_input():
        raise UnsupportedOpError(f"{where} {value.name!r} is computed in the graph; {why}")
    return value.const_value.numpy()


def replace_node(
    graph: ir.Graph, node: ir.Node, op: OpBuilder, outputs: list[ir.Value | None]
) -> None:
    """Puts the builder's nodes and initializers where `node` was; its outputs (names, types,
    graph outputs) pass to `outputs`, position by position. An output given as None (or left
    off at the end) goes with the node: nothing may read it."""
    for value in op.initializers:
        graph.register_initializer(value)
    pairs = [(old, new) for old, new in zip(node.outputs, outputs) if new is not None]
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], list(op.nodes), [old for old, _ in pairs], [new for _, new in pairs]
    )
