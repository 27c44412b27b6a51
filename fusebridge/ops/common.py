"""What every op module shares: the shape of an op's definition (schema, cpu binding, oracle,
portable lowering) and the small helpers their bindings use."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference.op_run import OpRun

from fusebridge.conventions import DOMAIN
from fusebridge.errors import ArgumentError, ArgumentTypeError, Error
from fusebridge.ops.schema import OpSchema

# run(inputs) -> outputs; inputs are the node's input arrays in schema order, padded with None
# to the schema's length (the registry pads, once, so no binding does).
Run = Callable[[Sequence[np.ndarray | None]], list[np.ndarray]]
# (node, typed attributes, {input position: initializer data}, reuse_output) -> Run. Runs at
# Session creation: what must not happen per run (checks, weight packing) happens here.
Prepare = Callable[[ir.Node, object, dict[int, np.ndarray], bool], Run]
# (builder, node) -> the standard ONNX values that replace the node's outputs.
Lowering = Callable[[object, ir.Node], list[ir.Value]]
# node -> None, or ModelFormatError: what a node of a file must hold beyond its schema (its
# constant inputs' shapes against each other), checked from the graph alone, no data read.
InputCheck = Callable[[ir.Node], None]


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One op, whole: its schema, its binding per engine, its oracle and its portable form."""

    schema: OpSchema
    cpu: Prepare
    reference: type[OpRun]
    lower: Lowering | None = None
    check: InputCheck | None = None


def where(node: ir.Node) -> str:
    return f"{DOMAIN}.{node.op_type} node {node.name!r}"


def scalar(a: np.ndarray | None, name: str, default: int = 0) -> int:
    """The one integer in a seed or offset input (int64 by the schema; a graph may compute it)."""
    if a is None:
        return default
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(f"input {name} must be an integer, got {arr.dtype}")
    if arr.size != 1:
        raise ArgumentError(f"input {name} must hold one integer, got shape {arr.shape}")
    return int(arr.reshape(-1)[0])


def given(node: ir.Node, slot: int) -> bool:
    return slot < len(node.inputs) and node.inputs[slot] is not None


def require_seed(node: ir.Node, slot: int) -> None:
    """Training dropouts draw from an explicit (seed, offset): the seed input is required."""
    if not given(node, slot):
        raise ArgumentError(
            f"{DOMAIN}.{node.op_type} {node.name!r}: training dropout needs a seed input "
            "(int64); run the explicit_rng pass to give every dropout its stream"
        )


class ReferenceOp(OpRun):
    """An op on onnx.reference (Session(backend="reference")). Attributes come from the node and
    the class's schema (onnx.reference passes the kwargs of a same-named standard op too, which
    are ignored)."""

    op_domain = DOMAIN
    schema: OpSchema

    def run(self, *args, **kwargs):
        """OpRun.run, with an error of ours named by the node (OpRun turns a TypeError, so our
        ArgumentTypeError too, into a TypeError of its own: the original is its cause)."""
        try:
            return super().run(*args, **kwargs)
        except Exception as exc:
            error = exc.__cause__ if isinstance(exc.__cause__, Error) else exc
            if not isinstance(error, Error):
                raise
            where = f"{DOMAIN}.{type(self).__name__} node {self.onnx_node.name!r}"
            raise type(error)(f"Session(backend='reference'): {where}: {error}") from error

    def attrs(self):
        """The node's attributes as the op's typed attribute object."""
        given_ = {a.name: onnx.helper.get_attribute_value(a) for a in self.onnx_node.attribute}
        values = {}
        for a in self.schema.attributes:
            v = given_.get(a.name, a.default)
            if isinstance(v, bytes):
                v = v.decode()
            values[a.name] = tuple(v) if isinstance(a.default, tuple) else v
        return self.schema.attributes_type(**values)

    @property
    def n_outputs(self) -> int:
        return len(self.onnx_node.output)
