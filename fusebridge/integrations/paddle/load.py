"""Paddle legacy inference model (ProgramDesc + parameters) -> canonical onnx_ir model.

Read without importing paddle. feed/fetch ops become graph inputs/outputs; a LoD feed or fetch
`x` becomes the pair `x` + `x.offsets`; every op that needs sentence boundaries gets the offsets
as an explicit input, carried from the feed through the ops that keep LoD (docs/paddle.md, "Load").

A training program (the forward ops plus those paddle.static.append_backward adds, saved
without feed and fetch ops) is read too: its inputs are the paddle.static.data variables, its
outputs the loss and the parameters' gradients (`w@GRAD`); grad_converters.py converts the
backward ops."""

from __future__ import annotations

import os

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.converters import node_label
from fusebridge.integrations.graph_builder import GraphBuilder
from fusebridge.integrations.paddle.converters import CONVERTERS
from fusebridge.integrations.paddle.converters.common import one_var, read_attr
from fusebridge.integrations.paddle.params import read_paddle_model
from fusebridge.integrations.paddle.program_desc import BlockDesc, OpDesc, ProgramDesc


class ProgramConverter(GraphBuilder):
    """Walks block 0 once. Paddle variable names map to the IR value that last wrote them
    (programs may write a name twice), and LoD variables to their offsets value."""

    def __init__(self, program: ProgramDesc, params: dict[str, np.ndarray], source: str) -> None:
        super().__init__()
        self.block = program.blocks[0]
        self.params = params
        self.source = source
        self.values: dict[str, ir.Value] = {}
        self.offsets: dict[str, ir.Value] = {}
        self._fetched: set[ir.Value] = set()
        # Values by name (names are unique in the graph), indexed up to these counts of nodes
        # and initializers: _holder finds a name without a scan of the graph per fetch.
        self._by_name: dict[str, ir.Value] = {}
        self._indexed = (0, 0)
        self.op: OpDesc | None = None  # the op being converted, for messages
        self.op_index = 0
        # Every variable some op reads (a dropout makes its mask only when one reads it).
        self.read = {v for op in self.block.ops for names in op.inputs.values() for v in names}

    # -- names and values -------------------------------------------------------------------
    def where(self) -> str:
        if self.op is None:
            return f"paddle model {self.source}"
        return _op_where(self.source, self.op_index, self.op)

    def dtype_of(self, var: str) -> ir.DataType | None:
        desc = self.block.vars.get(var)
        if desc is None or desc.dtype is None:
            return None
        return ir.DataType.from_numpy(desc.dtype)

    def rank_of(self, var: str) -> int:
        if var in self.params:
            return self.params[var].ndim
        desc = self.block.vars.get(var)
        if desc is None:
            raise ModelFormatError(f"{self.where()}: variable {var!r} has no VarDesc")
        return len(desc.shape)

    def is_param(self, var: str) -> bool:
        return var in self.params and var not in self.values

    def param(self, var: str) -> np.ndarray:
        if var not in self.params:
            raise UnsupportedOpError(
                f"{self.where()}: input {var!r} must be a parameter (a persistable variable "
                "with saved data), but it is computed in the graph"
            )
        return self.params[var]

    def value(self, var: str) -> ir.Value:
        if var not in self.values:
            if var not in self.params:
                raise ModelFormatError(
                    f"{self.where()}: reads variable {var!r}, which no earlier op writes and "
                    "which is neither a feed nor a saved parameter"
                )
            self.values[var] = self.const(self.params[var], var)
        return self.values[var]

    def define(self, var: str, value: ir.Value, offsets: ir.Value | None = None) -> None:
        """Paddle variable `var` is now `value`; its LoD, if any, is `offsets`."""
        dtype = self.dtype_of(var)
        if dtype is not None and value.dtype is None:
            value.type = ir.TensorType(dtype)
        self.values[var] = value
        self.offsets.pop(var, None)
        if offsets is not None:
            self.offsets[var] = offsets

    def offsets_of(self, var: str, what: str) -> ir.Value:
        if var not in self.offsets:
            raise UnsupportedOpError(
                f"{self.where()}: {what} {var!r} must be a LoD tensor (sentence boundaries "
                "from a lod_level 1 feed through ops that keep LoD), but it has no LoD"
            )
        return self.offsets[var]

    # -- the program --------------------------------------------------------------------------
    def convert(self) -> ir.Model:
        ops = self.block.ops
        first: dict[str, str] = {}  # op type -> its first op: place in block 0 and inputs
        for index, op in enumerate(ops):
            if op.type not in ("feed", "fetch") and op.type not in first:
                slots = ", ".join(f"{k}={list(v)}" for k, v in op.inputs.items())
                first[op.type] = f"e.g. node #{index}, inputs {slots}"
        CONVERTERS.refuse_unsupported(f"paddle model {self.source}", first)
        training = any(self._role(i, op) & _BACKWARD_ROLE for i, op in enumerate(ops))
        inputs: list[tuple[int, list[ir.Value]]] = []
        outputs: list[tuple[int, list[ir.Value]]] = []
        if training and not any(op.type == "feed" for op in ops):
            inputs = [(k, self._input(var)) for k, var in enumerate(_data_vars(self.block))]
        columns: dict[str, dict[int, int]] = {"feed": {}, "fetch": {}}
        for index, op in enumerate(ops):
            self.op, self.op_index = op, index
            if op.type == "feed":
                col = self._column(columns["feed"])
                inputs.append((col, self._input(one_var(self, op, "Out", outputs=True))))
            elif op.type == "fetch":
                col = self._column(columns["fetch"])
                outputs.append(self._fetch(one_var(self, op, "X"), col))
            else:
                CONVERTERS.lookup(op.type, self.where())(self, op)
                self._carry_lod(op)
        self.op = None
        if training and not outputs:
            outputs = [self._fetch(v, k) for k, v in enumerate(self._training_results())]
        if not inputs or not outputs:
            raise ModelFormatError(
                f"paddle model {self.source}: the program has no feed or no fetch op; save it "
                "with paddle.static.save_inference_model (or, for a training program, with "
                "the ops paddle.static.append_backward adds)"
            )
        graph_inputs = [v for _, pair in sorted(inputs, key=lambda p: p[0]) for v in pair]
        graph_outputs = [v for _, pair in sorted(outputs, key=lambda p: p[0]) for v in pair]
        graph = ir.Graph(
            graph_inputs,
            graph_outputs,
            nodes=self.nodes,
            initializers=self.initializers,
            opset_imports=conventions.opset_imports(),
            name=os.path.basename(self.source.rstrip("/")) or "paddle",
        )
        return ir.Model(graph, ir_version=conventions.IR_VERSION, producer_name="fusebridge")

    def _role(self, index: int, op: OpDesc) -> int:
        """The op's OpRole bits (0 when it has none)."""
        return read_attr(op, "op_role", "int", 0, _op_where(self.source, index, op))

    def _column(self, taken: dict[int, int]) -> int:
        """The current feed or fetch op's `col`: where its variable goes in the list of inputs
        or outputs; each column once."""
        col = read_attr(self.op, "col", "int", 0, self.where())
        if col < 0 or col in taken:
            problem = "is negative" if col < 0 else f"is taken by op {taken[col]} already"
            raise ModelFormatError(f"{self.where()}: attribute col = {col} {problem}")
        taken[col] = self.op_index
        return col

    def _input(self, var: str) -> list[ir.Value]:
        """The graph input(s) for fed variable `var`: its data, and its offsets with LoD."""
        desc = self.block.vars.get(var)
        if desc is None or desc.dtype is None:
            raise ModelFormatError(f"{self.where()}: feed {var!r} has no VarDesc with a data type")
        if desc.lod_level > 1:
            raise UnsupportedOpError(
                f"{self.where()}: feed {var!r} has lod_level {desc.lod_level}; only level-1 LoD "
                "is supported"
            )
        shape = ir.Shape([d if d >= 0 else None for d in desc.shape])
        value = ir.Value(name=self.unique(var), shape=shape, type=ir.TensorType(self.dtype_of(var)))
        pair = [value]
        offsets = None
        if desc.lod_level == 1:
            offsets = ir.Value(
                name=self.unique(conventions.offsets_name(var)),
                shape=ir.Shape([None]),
                type=ir.TensorType(ir.DataType.INT64),
            )
            pair.append(offsets)
        self.values[var] = value
        if offsets is not None:
            self.offsets[var] = offsets
        return pair

    def _fetch(self, var: str, col: int) -> tuple[int, list[ir.Value]]:
        value = self._as_output(self.value(var), var)
        pair = [value]
        if var in self.offsets:
            pair.append(self._as_output(self.offsets[var], conventions.offsets_name(value.name)))
        return col, pair

    def _training_results(self) -> list[str]:
        """What a training program without fetch ops returns: the loss (whose gradient the
        backward starts from: a fill_constant with the Loss role writes `loss@GRAD`), then
        the gradient of every parameter that has one, by parameter name."""
        losses = [
            name[: -len(GRAD_SUFFIX)]
            for i, op in enumerate(self.block.ops)
            if op.type == "fill_constant" and self._role(i, op) & _LOSS_ROLE
            for name in op.outputs.get("Out", ())
            if name.endswith(GRAD_SUFFIX)
        ]
        grads = [p + GRAD_SUFFIX for p in sorted(self.params) if p + GRAD_SUFFIX in self.values]
        return [v for v in losses if v in self.values] + grads

    def _as_output(self, value: ir.Value, name: str) -> ir.Value:
        """`value` as a graph output named `name`. Callers find a fetch by its Paddle variable's
        name, and a LoD fetch's offsets as `name.offsets` (docs/paddle.md, "Load"), but
        converters name their last node freely (scale's `out/biased`, arg_max's ArgMax before
        its Cast, lod_reset's offsets constant `out.offsets`): an intermediate value holding the
        name yields it. A graph output must be a node's output, and each value only one output:
        otherwise an Identity. A feed or an earlier fetch keeps its name (then `name@k`)."""
        if value.name == name and value.producer() is not None and value not in self._fetched:
            self._fetched.add(value)
            return value
        holder = self._holder(name)
        if holder is not None:
            holder.name = self.unique(name)  # also renames an initializer's tensor
            self._by_name[holder.name] = holder
        out = self.add("Identity", [value], name=name)
        if holder is not None:  # add() made the name unique; it is free now
            out.name = out.producer().name = name
        self._fetched.add(out)
        return out

    def _holder(self, name: str) -> ir.Value | None:
        """The node output or initializer named `name`, unless it is a graph output already."""
        nodes, initializers = self._indexed
        for node in self.nodes[nodes:]:
            self._by_name.update((o.name, o) for o in node.outputs)
        self._by_name.update((v.name, v) for v in self.initializers[initializers:])
        self._indexed = (len(self.nodes), len(self.initializers))
        value = self._by_name.get(name)
        if value is None or value.name != name or value in self._fetched:
            return None  # renamed since it was indexed, or fetched
        return value

    def _carry_lod(self, op: OpDesc) -> None:
        slot = CONVERTERS.option(op.type, "lod")
        if slot is None or not op.inputs.get(slot):
            return
        offsets = self.offsets.get(op.inputs[slot][0])
        if offsets is None:
            return
        for names in op.outputs.values():
            for var in names:
                if var in self.values and var not in self.offsets:
                    self.offsets[var] = offsets


GRAD_SUFFIX = "@GRAD"
# OpRole bits (paddle/fluid/framework/op_proto_maker.h): Backward = 1, Loss = 0x100.
_BACKWARD_ROLE, _LOSS_ROLE = 0x1, 0x100


def _op_where(source: str, index: int, op: OpDesc) -> str:
    """How errors name an op: the model, then the op by its type and its place in block 0
    (Paddle's ops have no names)."""
    return f"paddle model {source}: {node_label('Paddle', op.type, index)} of block 0"


def _data_vars(block: BlockDesc) -> list[str]:
    """The variables paddle.static.data declared that some op reads, by name: the inputs of a
    training program (it has no feed ops, and the file keeps no declaration order)."""
    read = {v for op in block.ops for names in op.inputs.values() for v in names}
    return sorted(v for v in read if v in block.vars and block.vars[v].need_check_feed)


def load_paddle(path: str | os.PathLike) -> ir.Model:
    """A Paddle inference model (directory, `.pdmodel` file or path prefix) as an IR model;
    or a training program (`__model__` with the backward ops, module docstring)."""
    program, params = read_paddle_model(path)
    return ProgramConverter(program, params, os.fspath(path)).convert()
