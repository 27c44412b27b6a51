"""The inputs of a fusebridge GRU or FusionGRU node that its schema alone does not check: the
offsets that layout lod needs, and the constant weights against each other and the node's
direction, from their shapes alone (no data read). What a file of ours must hold before the
portable export reshapes them or a Session packs them."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import ModelFormatError


def _shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """The shape of a constant input; None for an absent or computed one."""
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    return tuple(value.const_value.shape)


def check_gru_inputs(node: ir.Node) -> None:
    """With layout lod, the lengths input (offsets) is given. Wh [D, OC, 3*OC], Wx [D, IC,
    3*OC], B and B_h [D, 3*OC], D = 2 for bidirectional and 1 otherwise (with one direction D
    may be left out, as the kernels allow), OC and IC >= 1. ModelFormatError naming the node
    and the input; computed weights are checked by the kernels when they run."""
    where = f"{conventions.DOMAIN}.{node.op_type} node {node.name!r}"
    schema = ops.schema(node.op_type)
    attrs = schema.attribute_values(node)
    given = {n.rstrip("?"): v for n, v in zip(schema.inputs, node.inputs) if v is not None}
    if attrs["layout"] == "lod" and "lengths" not in given:
        raise ModelFormatError(f"{where}: layout lod needs the lengths input (offsets [N+1])")
    d = 2 if attrs["direction"] == "bidirectional" else 1
    shapes = {n: _shape(v) for n, v in given.items()}

    def full(name: str, ndim: int) -> tuple[int, ...] | None:
        shape = shapes.get(name)
        if shape is not None and d == 1 and len(shape) == ndim - 1:
            shape = (1, *shape)
        return shape

    def refuse(name: str, want: str) -> ModelFormatError:
        return ModelFormatError(
            f"{where}: {name} {list(shapes[name])}, expected {want} ({d} direction(s))"
        )

    wh = full("Wh", 3)
    if wh is None:
        return
    oc = wh[1] if len(wh) == 3 else 0
    if oc < 1 or wh != (d, oc, 3 * oc):
        raise refuse("Wh", f"[{d}, hidden, 3 * hidden] with hidden >= 1")
    wx = full("Wx", 3)
    if wx is not None and (len(wx) != 3 or wx[0] != d or wx[1] < 1 or wx[2] != 3 * oc):
        raise refuse("Wx", f"[{d}, input size >= 1, {3 * oc}]")
    for name in ("B", "B_h"):
        bias = full(name, 2)
        if bias is not None and bias != (d, 3 * oc):
            raise refuse(name, f"[{d}, {3 * oc}]")
