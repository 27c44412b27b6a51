"""MXNet symbol JSON + .params -> canonical onnx_ir model, read without mxnet.

Variables with saved data become initializers, the others graph inputs (float32 unless their
`__dtype__` says otherwise, as MXNet binds them). Each op node is converted by its op type's
converter (converters/); node outputs are addressed as (node index, output index), as in the
JSON."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import (
    ArgumentError,
    Error,
    ModelFormatError,
    UnsupportedOpError,
    in_model_file,
)
from fusebridge.integrations.converters import node_label
from fusebridge.integrations.graph_builder import GraphBuilder
from fusebridge.integrations.mxnet.params import read_params
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
_FOLD_SLACK = 64 << 20  # bytes a graph may fold at load beyond its parameters' multiple
_PARSERS = {
    "int": parse_int,
    "float": parse_float,
    "bool": parse_bool,
    "ints": parse_ints,
    "str": parse_str,
    "int?": parse_optional_int,
    "bool?": lambda v, node, key: None if v.strip() == "None" else parse_bool(v, node, key),
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
        self.outputs: dict[int, int] = {}  # node index -> how many outputs it was given
        self.arrays: dict[ir.Value, np.ndarray] = {}  # values known at load time
        self.folds: dict[tuple[str, ir.Value], ir.Value] = {}  # fold(): (kind, source) -> made
        self.zero_states: set[tuple[int, int]] = set()  # _zeros outputs of unknown shape
        self.inputs: list[ir.Value] = []
        self.node: MXNode | None = None
        self.index = -1  # self.node's position in symbol.nodes
        # Bytes the constants folded at load (spend) may take: a gluon export folds at most 3x
        # its parameters (an RNN's are reshaped, concatenated and unpacked); a crafted graph
        # that folds one parameter many times would take more.
        self.fold_budget = 4 * sum(a.nbytes for a in params.values()) + _FOLD_SLACK

    # -- names and values -------------------------------------------------------------------
    def where(self) -> str:
        n = self.node
        if n is None:
            return "MXNet model"
        return f"MXNet variable {n.name!r}" if n.op == "null" else node_label("MXNet", n.op, n.name)

    def input(self, i: int) -> ir.Value:
        """The node's i-th input as a value."""
        if i >= len(self.node.inputs):
            raise ModelFormatError(
                f"{self.where()}: has {len(self.node.inputs)} inputs, needs {i + 1}"
            )
        return self.value(self.node.inputs[i], f"input {i}")

    def value(self, entry: tuple[int, int], what: str) -> ir.Value:
        """The value of `entry` (node, output), which the node being converted (or the graph's
        `what`) uses."""
        if entry in self.zero_states:
            raise UnsupportedOpError(
                f"{self.where()}: {what} is a _zeros of inferred shape; only an RNN state may "
                "be one"
            )
        value = self.values.get(entry)
        if value is None:
            node, output = entry
            producer = self.symbol.nodes[node]
            raise ModelFormatError(
                f"{self.where()}: {what} is output {output} of node #{node} ({producer.op} "
                f"{producer.name!r}), which has {self.outputs.get(node, 0)} output(s) here"
            )
        return value

    # -- attributes: strings in the JSON, MXNet's defaults where absent ----------------------
    def attr(self, key: str, kind: str, default: object = _REQUIRED) -> object:
        """The node's attribute `key` parsed as kind ("int", "float", "bool", "ints", "str", or
        "int?" / "float?" / "bool?" that may be "None");
        `default` when absent (MXNet writes only attributes given explicitly)."""
        raw = self.node.attrs.get(key)
        if raw is None:
            if default is _REQUIRED:
                raise ModelFormatError(f"{self.where()}: attribute {key!r} is missing")
            return default
        return _PARSERS[kind](raw, self.node.name, key)

    def rank(self, value: ir.Value) -> int | None:
        """The value's rank when it is known at load (a parameter, an input of given shape)."""
        return None if value.shape is None else len(value.shape)

    def array(self, value: ir.Value) -> np.ndarray | None:
        """The value's data when it is known at load time (a parameter, or folded from them)."""
        return self.arrays.get(value)

    def spend(self, nbytes: int) -> None:
        """Accounts for a constant of nbytes about to be folded at load, before it is made."""
        self.fold_budget -= nbytes
        if self.fold_budget < 0:
            raise ModelFormatError(
                f"{self.where()}: the constants folded at load would take more than 4x the "
                "parameters' bytes + 64 MiB: the graph folds parameters more often than an "
                "MXNet export does"
            )

    def const(self, array: np.ndarray, name: str) -> ir.Value:
        value = super().const(array, name)
        self.arrays[value] = value.const_value.numpy()
        return value

    def fold(
        self, kind: str, source: ir.Value, make: Callable[[np.ndarray], np.ndarray]
    ) -> ir.Value:
        """make(source's data) as a constant `{node}/{kind}`, made once per source and kind: a
        weight that several nodes share is transposed once."""
        if (kind, source) not in self.folds:
            self.spend(self.arrays[source].nbytes)
            made = make(self.arrays[source])
            self.folds[(kind, source)] = self.const(made, f"{self.node.name}/{kind}")
        return self.folds[(kind, source)]

    def add(self, op_type: str, inputs, attributes=None, *, name: str | None = None, **kw):
        """GraphBuilder.add, the node named after the MXNet node by default."""
        name = name or f"{self.node.name}/{op_type}"
        return super().add(op_type, inputs, attributes, name=name, **kw)

    def define(self, *outputs: ir.Value, known: Sequence[np.ndarray | None] = ()) -> None:
        """The node's outputs 0, 1, ... are `outputs`; `known` their data where it is known."""
        for k, value in enumerate(outputs):
            self.values[(self.index, k)] = value
        self.outputs[self.index] = len(outputs)
        for value, array in zip(outputs, known):
            if array is not None:
                self.arrays[value] = array

    # -- the graph ----------------------------------------------------------------------------
    def convert(self) -> ir.Model:
        from fusebridge.integrations.mxnet.converters import CONVERTERS

        first: dict[str, str] = {}  # op type -> the first node of that type
        for n in self.symbol.nodes:
            if n.op != "null":
                first.setdefault(n.op, n.name)
        found = {op: f"e.g. node {first[op]!r}" for op in sorted(first)}
        CONVERTERS.refuse_unsupported(f"MXNet model {self.source}", found)
        try:
            for index, node in enumerate(self.symbol.nodes):
                self.index, self.node = index, node
                if node.op == "null":
                    self._variable(node)
                else:
                    CONVERTERS.lookup(node.op, self.where())(self, node)
            self.node = None
            outputs, taken = [], set()
            for k, entry in enumerate(self.symbol.heads):
                value = self.value(entry, f"head {k}")
                if value in taken or value.producer() is None:  # an output needs its own node
                    value = self.add("Identity", [value], name=f"output{k}")
                outputs.append(value)
                taken.add(value)
        except Error as e:  # every message names the file
            raise in_model_file(e, self.source) from None
        graph = ir.Graph(
            self.inputs,
            outputs,
            nodes=self.nodes,
            initializers=self.initializers,
            opset_imports=conventions.opset_imports(),
            name=Path(self.source).name.removesuffix("-symbol.json") or "mxnet",
        )
        model = ir.Model(graph, ir_version=conventions.IR_VERSION, producer_name="fusebridge")
        # Parameters folded into others (gluon's per-gate RNN weights) are left unused.
        initializers = graph.initializers.items()
        for name in [n for n, v in initializers if not v.uses() and not v.is_graph_output()]:
            graph.initializers.pop(name)
        return model

    def _variable(self, node: MXNode) -> None:
        if node.name in self.params:
            self.define(self.const(self.params[node.name], node.name))
            return
        code = self.attr("__dtype__", "int", 0)
        if code not in _DTYPES:
            raise UnsupportedOpError(
                f"{self.where()}: __dtype__ {code} not supported (known: "
                f"{', '.join(f'{k} {v.name.lower()}' for k, v in _DTYPES.items())})"
            )
        shape = self.attr("__shape__", "ints", None)
        dims = None
        if shape is not None:
            if any(d < -1 for d in shape):
                raise ModelFormatError(
                    f"{self.where()}: attribute __shape__ = {shape}, expected dims >= 0 (or -1 "
                    "or 0 for one inferred when it runs)"
                )
            dims = ir.Shape([d if d > 0 else None for d in shape])
        value = ir.Value(name=self.unique(node.name), shape=dims, type=ir.TensorType(_DTYPES[code]))
        self.inputs.append(value)
        self.define(value)


def find_params(symbol_path: Path) -> Path | None:
    """The params file beside `prefix-symbol.json`: prefix-NNNN.params (MXNet's checkpoint
    name, NNNN the epoch) with the highest epoch; no other file is read."""
    prefix = symbol_path.name.removesuffix("-symbol.json")
    epoch = re.compile(re.escape(prefix) + r"-(\d{4,})\.params")
    found = [
        (int(m[1]), f)
        for f in symbol_path.parent.glob(f"{glob.escape(prefix)}-*.params")
        if (m := epoch.fullmatch(f.name))
    ]
    return max(found)[1] if found else None


def load_mxnet(path: str | os.PathLike, params: str | os.PathLike | None = None) -> ir.Model:
    """An MXNet model (`prefix-symbol.json`, params found beside it or given) as an IR model."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"load: no such MXNet symbol file {str(p)!r}")
    params_path = Path(params) if params is not None else find_params(p)
    arrays = read_params(params_path) if params_path is not None else {}
    return SymbolConverter(read_symbol(p), arrays, os.fspath(p)).convert()
