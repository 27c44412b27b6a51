"""save_mxnet's emitters of fusebridge's ops: FusionGRU as our MXNet op fusebridge_fusion_gru (its
lengths as they are: the op checks them; its weights packed as parameters), Dropout as
fusebridge_dropout, or as MXNet's own Dropout for a training dropout without a seed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, kernels, ops
from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.emitters.common import (
    WRITERS,
    Refused,
    node_inputs,
    number_text,
    tuple_text,
)

if TYPE_CHECKING:
    from fusebridge.integrations.mxnet.save import Writer


@WRITERS.register(f"{conventions.DOMAIN}.SequenceLengths")
def _sequence_lengths(w: Writer, node: ir.Node) -> None:
    """fusebridge_fusion_gru checks its lengths itself (whole numbers in [0, T]): the lengths
    go to it as they are. No MXNet op makes that check for any other use."""
    out = node.outputs[0]
    users = {(u.domain, u.op_type, i) for u, i in out.uses()}
    if not users <= {(conventions.DOMAIN, "FusionGRU", 1)}:
        raise Refused("its lengths feed an op other than FusionGRU, which would not check them")
    w.entries[out] = w.entry(node.inputs[0])


@WRITERS.register(f"{conventions.DOMAIN}.FusionGRU")
def _fusion_gru(w: Writer, node: ir.Node) -> None:
    attrs = ops.schema("FusionGRU").attribute_values(node)
    if attrs["layout"] == "lod":
        raise Refused("layout lod; fusebridge_fusion_gru takes padded tnc or ntc")
    if len(node.outputs) > 1 and w.used(node.outputs[1]):
        raise Refused("its Y_last output is used; fusebridge_fusion_gru returns Y only")
    x, lengths, wx, wh, bias, bias_h, h0 = node_inputs(node, 7)
    d = 2 if attrs["direction"] == "bidirectional" else 1
    weights = [w.constant(v) for v in (wx, wh, bias, bias_h)]
    missing = [name for name, v, a in zip(("Wx", "Wh", "B", "B_h"), (wx, wh, bias, bias_h),
                                          weights) if v is not None and a is None]  # fmt: skip
    if missing:
        raise Refused(f"its weights {missing} are not constants (they are written packed)")
    # Packed here, once: the op reads the kernel's layout, so no run packs them again.
    packed = kernels.pack_gru_weights(*weights)
    hidden = packed.hidden_size
    inputs = [w.entry(x), _lengths(w, node, x, lengths, attrs["layout"])]
    for name in ("wx", "wh", "bias_x", "bias_hc"):
        inputs.append(w.param(f"{node.name}/packed_{name}", np.array(getattr(packed, name))))
    if h0 is not None:
        inputs.append(w.entry(h0))
    mx_attrs = {
        "direction": attrs["direction"],
        "layout": attrs["layout"],
        "linear_before_reset": bool(attrs["linear_before_reset"]),
        "origin_mode": bool(attrs["origin_mode"]),
        "activation": attrs["activation"],
        "gate_activation": attrs["gate_activation"],
        "has_h0": h0 is not None,
    }
    shape = (*sc.slice_shape(w.shape(x), x, 0, 2), sc.Lit(d * hidden))
    w.define(w.emit("fusebridge_fusion_gru", inputs, mx_attrs), shape)


def _lengths(w: Writer, node: ir.Node, x, lengths, layout: str) -> list[int]:
    """The sentence lengths; without them every sentence is T long: T summed from ones."""
    if lengths is not None:
        return w.entry(lengths)
    ones = w.emit("ones_like", [w.entry(x)], name=f"{node.name}_ones")
    column = w.emit(
        "slice_axis", [ones], {"axis": 2, "begin": 0, "end": 1}, name=f"{node.name}_column"
    )
    axes = "(0, 2)" if layout == "tnc" else "(1, 2)"
    return w.emit("sum", [column], {"axis": axes}, name=f"{node.name}_steps")


@WRITERS.register(f"{conventions.DOMAIN}.Dropout")
def _dropout(w: Writer, node: ir.Node) -> None:
    attrs = ops.schema("Dropout").attribute_values(node)
    x, seed, offset = node_inputs(node, 3)
    mask_used = len(node.outputs) > 1 and w.used(node.outputs[1])
    mx_attrs = {
        "p": number_text(attrs["p"]),
        "axes": tuple_text(attrs["axes"]) if attrs["axes"] else "()",
    }
    if attrs["is_test"] or seed is not None:
        seeds = [w.ints(v, name) for v, name in ((seed, "seed"), (offset, "offset"))]
        mx_attrs |= {
            "mode": attrs["mode"],
            "is_test": bool(attrs["is_test"]),
            "seed": seeds[0][0] if seeds[0] else 0,
            "offset": seeds[1][0] if seeds[1] else 0,
        }
        y = w.emit("fusebridge_dropout", [w.entry(x)], mx_attrs)
        w.define(y, w.shape(x))
        if len(node.outputs) > 1:
            w.define([y[0], 1, 0], k=1)
        return
    # A training dropout without a seed (an MXNet Dropout of mode 'always'): MXNet's own,
    # which draws from MXNet's generator as the model it came from did.
    if attrs["mode"] != "upscale_in_train" or mask_used:
        raise Refused("a dropout without a seed is written as MXNet's Dropout, which has "
                       "mode upscale_in_train only and no packed mask")  # fmt: skip
    mx_attrs["mode"] = "always"
    w.define(w.emit("Dropout", [w.entry(x)], mx_attrs), w.shape(x))
