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
import os
from pathlib import Path

import numpy as np
import onnx_ir as ir

from fusebridge import ops
from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.builder import model_opset
from fusebridge.graph.checks import qualified_op
from fusebridge.integrations.converters import ir_node_label
from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.emitters import WRITERS
from fusebridge.integrations.mxnet.emitters.common import DTYPES, Refused
from fusebridge.integrations.mxnet.params import write_params


class Writer:
    """The MXNet nodes and parameters written so far, and what is known of the IR's values;
    the emitters (emitters/) add the nodes of one IR node each."""

    def __init__(self, model: ir.Model) -> None:
        self.graph = model.graph
        self.opset = model_opset(model)  # the standard ops' attribute defaults are its
        self.nodes: list[dict] = []
        self.names: set[str] = set()
        self.entries: dict[ir.Value, list[int]] = {}  # IR value -> MXNet (node, output, 0)
        self.shapes: dict[ir.Value, sc.Shape] = {}  # what is known of a tensor's shape
        self.vectors: dict[ir.Value, sc.Shape] = {}  # int64 shapes computed at run time
        self.constants: dict[ir.Value, np.ndarray] = {}  # Constant nodes' outputs
        self.params: dict[str, np.ndarray] = {}
        self.node: ir.Node | None = None
        self.live = _live_nodes(model.graph)

    def attr(self, node: ir.Node, name: str) -> object:
        """The node's attribute, or its op's default at the model's opset (ops.attribute)."""
        return ops.attribute(node, name, self.opset)

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
            raise Refused(f"constant {name!r} is a scalar (0-d), which MXNet 1.x has no form for")
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
            raise Refused(
                f"input {value.name!r} is a shape computed when the model runs; MXNet takes "
                "shapes only as static attributes"
            )
        array = self.constant(value)
        if array is None:
            raise Refused(f"input {value.name!r} is neither a graph input nor computed before")
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
            raise Refused("a shape input is missing")
        if value in self.vectors:
            return self.vectors[value]
        array = self.constant(value)
        if array is None or array.dtype.kind not in "iu" or array.ndim > 1:
            raise Refused(
                f"shape input {value.name!r} is neither a constant of integers nor made of "
                "the model's shapes"
            )
        return tuple(sc.Lit(int(d)) for d in array.reshape(-1))

    def ints(self, value: ir.Value | None, what: str) -> list[int] | None:
        if value is None:
            return None
        array = self.constant(value)
        if array is None or array.dtype.kind not in "iu":
            raise Refused(f"{what} ({value.name!r}) must be a constant of integers")
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
            raise Refused(f"axis {axis} is negative and the rank of {value.name!r} is unknown")
        return axis + rank + extra

    # -- the walk -----------------------------------------------------------------------------
    def write(self) -> dict:
        for value in self.graph.inputs:
            attrs = {}
            if value.dtype is not None and value.dtype != ir.DataType.FLOAT:
                if value.dtype not in DTYPES:
                    raise UnsupportedOpError(
                        f"save_mxnet: graph input {value.name!r} has type {value.dtype.name}, "
                        f"which MXNet has not (known: {', '.join(n for n, _ in DTYPES.values())})"
                    )
                attrs["__dtype__"] = str(DTYPES[value.dtype][1])
            self.entries[value] = self.variable(value.name, attrs)
        for node in self.graph:
            if node not in self.live:  # computes nothing the outputs use: not written
                continue
            self.node = node
            where = f"save_mxnet: {ir_node_label(node)}"
            writer = WRITERS.lookup(qualified_op(node), where)
            try:
                writer(self, node)
            except Refused as e:
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
            except Refused as e:
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


def save_mxnet(model: ir.Model, prefix: str | os.PathLike) -> tuple[Path, Path]:
    """Writes `prefix-symbol.json` and `prefix-0000.params`: `model`'s graph as MXNet ops (our
    `fusebridge_fusion_gru` and `fusebridge_dropout` for FusionGRU and Dropout), and the
    parameters `model` holds. Load them in MXNet after
    fusebridge.integrations.mxnet.register(), e.g. mx.gluon.SymbolBlock.imports
    (docs/mxnet.md). Returns the two paths; raises UnsupportedOpError naming the first node it
    cannot write, before writing anything."""
    writer = Writer(model)
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
