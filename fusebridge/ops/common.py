"""What every op module shares: the shape of an op's definition (schema, oracle, bindings per
engine, and the traits the layers above act on: lowering, input check, recurrence, placement
cost, check at run) and the small helpers their bindings use."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference.op_run import OpRun

from fusebridge import cuda, kernels
from fusebridge.conventions import DOMAIN
from fusebridge.errors import ArgumentError, ArgumentTypeError, Error
from fusebridge.graph.checks import describe
from fusebridge.ops.schema import OpSchema

# run(inputs) -> outputs; inputs are the node's input arrays in schema order, padded with None
# to the schema's length (the registry pads, once, so no binding does).
Run = Callable[[Sequence[np.ndarray | None]], list[np.ndarray]]
# (node, typed attributes, {input position: initializer data}, reuse_output) -> Run. Runs at
# Session creation: what must not happen per run (checks, weight packing) happens here.
Prepare = Callable[[ir.Node, object, dict[int, np.ndarray], bool], Run]
# (builder, node) -> the standard ONNX values that replace the node's outputs.
Lowering = Callable[[object, ir.Node], list[ir.Value]]
# node -> check(array of its first input) where the node needs a check that only the run can
# make (its input's rank unknown before: an MXNet symbol declares no shapes), else None. The
# Session may then lower the node into the ONNX Runtime partition around it and run the check
# on the value there, instead of cutting the partition for a step of ours.
RunCheck = Callable[[ir.Node], Callable[[np.ndarray], None] | None]
# node -> None, or ModelFormatError: what a node of a file must hold beyond its schema (its
# constant inputs' shapes against each other), checked from the graph alone, no data read.
InputCheck = Callable[[ir.Node], None]


@dataclasses.dataclass(frozen=True)
class Recurrence:
    """An op that runs a recurrence over sentences: what the Session, the placement and the
    portable export read of it without knowing the op. Slot and attribute names are the
    schema's."""

    lengths: str = "lengths"  # the input: offsets [N+1] with layout lod, seq_lens [N] padded
    layout: str = "layout"  # the attribute: "lod", or a padded layout "tnc" / "ntc"


@dataclasses.dataclass(frozen=True)
class PlacementCost:
    """An op the Session's placement may lower into the ONNX Runtime partition around it or
    keep on our kernel, by estimated time. sizes(node) -> the sizes the estimate reads, by name,
    from the node's constant inputs (shown in the placement's explanation); us(sizes, steps,
    batch, filled, on_kernel) -> microseconds of one run (filled: sum of the sequence lengths,
    steps * batch without them)."""

    sizes: Callable[[ir.Node], dict[str, int]]
    us: Callable[[dict[str, int], int, int, int, bool], float]


ENGINES = ("cpu", "cuda")  # the engines an op may have a binding for


def per_engine(binding: Callable[..., Run]) -> dict[str, Prepare]:
    """Bindings for both engines from one `binding(engine, node, attrs, constants, reuse)`:
    the cpu engine (fusebridge.kernels) and the cuda engine (fusebridge.cuda) have the same
    functions with the same signatures and bits, on host and device arrays."""
    return {"cpu": functools.partial(binding, kernels), "cuda": functools.partial(binding, cuda)}


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One op, whole: its schema, its oracle, its binding per engine, and what the layers above
    would otherwise decide by its name: its portable form, its input check, its recurrence trait,
    its placement cost, a check its input needs at run, and the slots its bindings pack once
    from the host when they are constants (a Session on a device keeps no device copy of them).
    """

    schema: OpSchema
    reference: type[OpRun]
    bindings: Mapping[str, Prepare]
    lower: Lowering | None = None
    check: InputCheck | None = None
    recurrence: Recurrence | None = None
    cost: PlacementCost | None = None
    run_check: RunCheck | None = None
    packed: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.bindings) - set(ENGINES))
        if unknown:
            raise TypeError(f"{self.schema.op_type}: bindings for unknown engines {unknown}")
        if self.recurrence is not None:
            attrs = [a.name for a in self.schema.attributes]
            if self.recurrence.lengths not in self.slots or self.recurrence.layout not in attrs:
                raise TypeError(f"{self.schema.op_type}: its recurrence names no slot of it")

    def matches(self, node: ir.Node | None) -> bool:
        """`node` is a node of this op (a rule's own pattern, checked by hand)."""
        return node is not None and node.domain == DOMAIN and node.op_type == self.schema.op_type

    @property
    def slots(self) -> tuple[str, ...]:
        """The schema's input names, without the optional mark."""
        return tuple(n.rstrip("?") for n in self.schema.inputs)

    def inputs(self, node: ir.Node) -> dict[str, ir.Value | None]:
        """The node's inputs by the schema's slot names (None where absent)."""
        values = list(node.inputs) + [None] * (len(self.slots) - len(node.inputs))
        return dict(zip(self.slots, values))

    def input(self, node: ir.Node, name: str) -> ir.Value | None:
        """The node's input in the schema's slot `name` (None when absent)."""
        return self.inputs(node)[name]


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
            f"{describe(node)}: training dropout needs a seed input "
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
            node = f"{DOMAIN}.{type(self).__name__} node {self.onnx_node.name!r}"
            raise type(error)(f"Session(backend='reference'): {node}: {error}") from error

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
