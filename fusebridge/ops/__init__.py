"""fusebridge's ops, one module per family (gru, dropout, fused_dropout, crf, sequence, lod),
each holding its ops whole (OpDef: schema, typed attributes, bindings per engine, oracle,
lowering, input check, recurrence, placement cost). This registry is the one list of them: the
Session's dispatch and placement, the reference backend, the portable export, onnx's schema
registry and docs/ops.md all read it. Beside it: lowering.py (any graph's ops to standard
ONNX), recurrence.py (the recurrence toolkit), standard.py (facts of standard ONNX ops)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.conventions import DOMAIN
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.graph.checks import describe
from fusebridge.kernels.arguments import as_flag
from fusebridge.ops import (
    crf,
    dropout,
    fused_dropout,
    gru,
    lod,
    quantized_gru,
    sequence,
    standard,
)
from fusebridge.ops.common import OpDef, Run
from fusebridge.ops.schema import OpSchema, markdown, register_onnx_schemas

REGISTRY: dict[str, OpDef] = {
    d.schema.op_type: d
    for module in (gru, quantized_gru, dropout, fused_dropout, crf, sequence, lod)
    for d in module.OPS
}
SCHEMAS: dict[str, OpSchema] = {k: d.schema for k, d in REGISTRY.items()}


def op(op_type: str) -> OpDef:
    try:
        return REGISTRY[op_type]
    except KeyError:
        raise ArgumentError(
            f"{DOMAIN}: unknown op {op_type!r}, expected one of {sorted(REGISTRY)}"
        ) from None


def schema(op_type: str) -> OpSchema:
    return op(op_type).schema


def node(
    op_type: str,
    inputs: list[ir.Value | None],
    attributes: Mapping[str, object] | None = None,
    *,
    num_outputs: int = 1,
    name: str | None = None,
) -> ir.Node:
    """A fusebridge-domain node, checked against its schema. Optional inputs left as None
    at the end are dropped."""
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    n = ir.node(
        op_type, inputs, dict(attributes or {}), domain=DOMAIN, num_outputs=num_outputs, name=name
    )
    s = schema(op_type)
    s.check_arity(n)
    s.attribute_values(n)
    return n


def attribute(node: ir.Node, name: str, opset: int = conventions.ONNX_OPSET) -> object:
    """The node's attribute `name`, or its op's default: the schema's for an op of ours, ONNX's
    at standard opset `opset` for a standard op (None where it has none). What writers and
    rules read attributes with."""
    attr = node.attributes.get(name)
    if attr is not None:
        return attr.value
    if node.domain == DOMAIN:
        return {a.name: a.default for a in schema(node.op_type).attributes}[name]
    if not standard.is_standard(node):
        return None  # another domain's op (ONNX Runtime's): no schema here
    return standard.default(node.op_type, name, opset)


def check_node(node: ir.Node) -> None:
    """A fusebridge node of a file against its op: a known op, its inputs and outputs, its
    attributes' types and values, and the op's own input check (ModelFormatError otherwise)."""
    if node.op_type not in REGISTRY:
        raise UnsupportedOpError(
            f"{describe(node)}: unknown op, expected one of {sorted(REGISTRY)}"
        )
    d = REGISTRY[node.op_type]
    try:
        d.schema.check_arity(node)
        d.schema.attribute_values(node)
    except ArgumentError as exc:
        raise ModelFormatError(str(exc)) from exc
    if d.check is not None:
        d.check(node)


def prepare(
    node: ir.Node,
    constants: dict[int, np.ndarray],
    reuse_output: bool = False,
    engine: str = "cpu",
) -> Run:
    """run(inputs) for a fusebridge node on `engine`; constants maps input positions to
    initializer data; inputs are given in schema order, padded with None to the schema's length.
    reuse_output: the node's outputs live only during a run (not graph outputs), so a kernel
    may write a run's output into the buffer of the previous run."""
    d = op(node.op_type)
    d.schema.check_arity(node)
    reuse_output = as_flag(reuse_output, "ops.prepare", "reuse_output")
    binding = d.bindings.get(engine)
    if binding is None:
        raise UnsupportedOpError(
            f"{describe(node)}: no binding for engine {engine!r}, "
            f"expected one of {sorted(d.bindings)}"
        )
    return binding(node, d.schema.parse(node), constants, reuse_output)


def reference_ops() -> list[type]:
    """The onnx.reference implementations of every op (Session(backend="reference"))."""
    return [d.reference for d in REGISTRY.values()]


def reference_markdown() -> str:
    """docs/ops.md."""
    return markdown(list(SCHEMAS.values()))


# Our schemas in onnx's registry, so that onnx.checker's full check and shape inference know
# our ops' output types (a Python process-wide registry: done once, at import).
register_onnx_schemas(list(SCHEMAS.values()))
