"""MXNet symbol JSON + .params -> canonical onnx_ir model, read without mxnet.

Variables with saved data become initializers, the others graph inputs (float32 unless their
`__dtype__` says otherwise, as MXNet binds them). Each op node is converted by op_converters.py;
node outputs are addressed as (node index, output index), as in the JSON."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.integrations.graph_builder import GraphBuilder
from fusebridge.integrations.mxnet.params import read_params
from fusebridge.integrations.mxnet.save import SYMBOL_KEY
from fusebridge.integrations.mxnet.symbol import (
    MXNode,
    MXSymbol,
    parse_bool,
    parse_float,
    parse_int,
    parse_ints,
    parse_optional_int,
    parse_str,
    read_symbol,
)

_REQUIRED = object()
_PARSERS = {
    "int": parse_int,
    "float": parse_float,
    "bool": parse_bool,
    "ints": parse_ints,
    "str": parse_str,
    "int?": parse_optional_int,
    "float?": lambda v, node, key: None if v.strip() == "None" else parse_float(v, node, key),
}

# MXNet's dtype codes (__dtype__ attribute of a variable) -> ONNX.
_DTYPES = {
    0: ir.DataType.FLOAT,
    1: ir.DataType.DOUBLE,
    2: ir.DataType.FLOAT16,
    3: ir.DataType.UINT8,
    4: ir.DataType.INT32,
    5: ir.DataType.INT8,
    6: ir.DataType.INT64,
}


class SymbolConverter(GraphBuilder):
    def __init__(self, symbol: MXSymbol, params: dict[str, np.ndarray], source: str) -> None:
        super().__init__()
        self.symbol = symbol
        self.params = params
        self.source = source
        self.values: dict[tuple[int, int], ir.Value] = {}
        self.arrays: dict[ir.Value, np.ndarray] = {}  # values known at load time
        self.zero_states: set[tuple[int, int]] = set()  # _zeros outputs of unknown shape
        self.inputs: list[ir.Value] = []
        self.node: MXNode | None = None

    # -- names and values -------------------------------------------------------------------
    def where(self) -> str:
        n = self.node
        return f"MXNet {n.op} node {n.name!r}" if n else f"MXNet model {self.source}"

    def input(self, i: int) -> ir.Value:
        """The node's i-th input as a value."""
        entry = self.node.inputs[i] if i < len(self.node.inputs) else None
        if entry is None:
            raise ModelFormatError(
                f"{self.where()}: has {len(self.node.inputs)} inputs, needs {i + 1}"
            )
        if entry in self.zero_states:
            raise UnsupportedOpError(
                f"{self.where()}: input {i} is a _zeros of inferred shape; only an RNN state "
                "may be one"
            )
        return self.values[entry]

    # -- attributes: strings in the JSON, MXNet's defaults where absent ----------------------
    def attr(self, key: str, kind: str, default: object = _REQUIRED) -> object:
        """The node's attribute `key` parsed as kind ("int", "float", "bool", "ints", "str", or
        "int?" / "float?" that may be "None");
        `default` when absent (MXNet writes only attributes given explicitly)."""
        raw = self.node.attrs.get(key)
        if raw is None:
            if default is _REQUIRED:
                raise ModelFormatError(f"{self.where()}: attribute {key!r} is missing")
            return default
        return _PARSERS[kind](raw, self.node.name, key)

    def array(self, value: ir.Value) -> np.ndarray | None:
        """The value's data when it is known at load time (a parameter, or folded from them)."""
        return self.arrays.get(value)

    def const(self, array: np.ndarray, name: str) -> ir.Value:
        value = super().const(array, name)
        self.arrays[value] = value.const_value.numpy()
        return value

    def add(self, op_type: str, inputs, attributes=None, *, name: str | None = None, **kw):
        """GraphBuilder.add, the node named after the MXNet node by default."""
        name = name or f"{self.node.name}/{op_type}"
        return super().add(op_type, inputs, attributes, name=name, **kw)

    def define(self, *outputs: ir.Value, known: Sequence[np.ndarray | None] = ()) -> None:
        """The node's outputs 0, 1, ... are `outputs`; `known` their data where it is known."""
        index = self.symbol.nodes.index(self.node)
        for k, value in enumerate(outputs):
            self.values[(index, k)] = value
        for value, array in zip(outputs, known):
            if array is not None:
                self.arrays[value] = array

    # -- the graph ----------------------------------------------------------------------------
    def convert(self) -> ir.Model:
        from fusebridge.integrations.mxnet.op_converters import CONVERTERS

        ops = [n for n in self.symbol.nodes if n.op != "null"]
        unsupported = sorted({n.op for n in ops if n.op not in CONVERTERS})
        if unsupported:
            names = {op: next(n.name for n in ops if n.op == op) for op in unsupported}
            listed = "; ".join(f"{op} (e.g. node {names[op]!r})" for op in unsupported)
            raise UnsupportedOpError(
                f"MXNet model {self.source}: {len(unsupported)} unsupported op type(s): "
                f"{listed}. Supported: {', '.join(sorted(CONVERTERS))}"
            )
        for index, node in enumerate(self.symbol.nodes):
            self.node = node
            if node.op == "null":
                self._variable(index, node)
            else:
                CONVERTERS[node.op](self, node)
        self.node = None
        outputs = []
        for k, entry in enumerate(self.symbol.heads):
            value = self.values[entry]
            if value in outputs or value.producer() is None:  # a graph output needs its own node
                value = self.add("Identity", [value], name=f"output{k}")
            outputs.append(value)
        graph = ir.Graph(
            self.inputs,
            outputs,
            nodes=self.nodes,
            initializers=self.initializers,
            opset_imports=fir.opset_imports(),
            name=Path(self.source).name.removesuffix("-symbol.json") or "mxnet",
        )
        model = ir.Model(graph, ir_version=fir.IR_VERSION, producer_name="fusebridge")
        # Parameters folded into others (gluon's per-gate RNN weights) are left unused.
        used = [v for v in graph.initializers.values() if v.uses() or v.is_graph_output()]
        for name in [n for n, v in graph.initializers.items() if v not in used]:
            graph.initializers.pop(name)
        return model

    def _variable(self, index: int, node: MXNode) -> None:
        if node.name in self.params:
            self.define(self.const(self.params[node.name], node.name))
            return
        code = int(node.attrs.get("__dtype__", "0"))
        if code not in _DTYPES:
            raise UnsupportedOpError(
                f"MXNet variable {node.name!r}: __dtype__ {code} not supported"
            )
        shape = node.attrs.get("__shape__")
        dims = None
        if shape:
            dims = ir.Shape(
                [d if d > 0 else None for d in parse_ints(shape, node.name, "__shape__")]
            )
        value = ir.Value(name=self.unique(node.name), shape=dims, type=ir.TensorType(_DTYPES[code]))
        self.inputs.append(value)
        self.define(value)


def find_params(symbol_path: Path) -> Path | None:
    """The params file beside `prefix-symbol.json`: prefix-NNNN.params with the highest epoch."""
    prefix = symbol_path.name.removesuffix("-symbol.json")
    found = sorted(symbol_path.parent.glob(f"{prefix}-*.params"))
    return found[-1] if found else None


def load_mxnet(path: str | os.PathLike, params: str | os.PathLike | None = None) -> ir.Model:
    """An MXNet model (`prefix-symbol.json`, params found beside it or given) as an IR model."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"load: no such MXNet symbol file {str(p)!r}")
    params_path = Path(params) if params is not None else find_params(p)
    arrays = read_params(params_path) if params_path is not None else {}
    model = SymbolConverter(read_symbol(p), arrays, os.fspath(p)).convert()
    # The MXNet graph itself, for save_mxnet (which writes it back with our ops in it, and the
    # parameters from the model's initializers).
    model.metadata_props[SYMBOL_KEY] = p.read_text()
    return model
