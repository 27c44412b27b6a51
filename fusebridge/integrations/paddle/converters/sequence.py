"""Paddle's LoD ops, which read or set the sentence boundaries: lod_reset, and sequence_pool as
our SequencePool."""

from __future__ import annotations

import itertools

import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    define_out,
    one_var,
    optional_var,
    show,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


@CONVERTERS.register("lod_reset", lod=None)
def _lod_reset(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    if attribute(cx, op, "append", "bool", False):
        raise UnsupportedOpError(
            f"{cx.where()}: append = True (a second LoD level) is not supported"
        )
    yv = optional_var(cx, op, "Y")
    if yv is not None and yv in cx.offsets:
        offsets = cx.offsets[yv]
    elif yv is not None:  # Y's data are the offsets
        offsets = cx.add(
            "Reshape",
            [
                cx.cast(cx.value(yv), ir.DataType.INT64, f"{out}/lod"),
                cx.ints([-1], f"{out}/flat"),
            ],
            name=conventions.offsets_name(out),
        )
    else:
        target = attribute(cx, op, "target_lod", "ints")
        if not target or target[0] != 0 or any(a > b for a, b in itertools.pairwise(target)):
            raise ModelFormatError(
                f"{cx.where()}: attribute target_lod = {show(target)} must be offsets: "
                "0 first, never decreasing"
            )
        offsets = cx.ints(target, conventions.offsets_name(out))
    data = cx.add("Identity", [cx.value(one_var(cx, op, "X"))], name=out)
    cx.define(out, data, offsets)


@CONVERTERS.register("sequence_pool", lod=None)
def _sequence_pool(cx, op: OpDesc) -> None:
    xv = one_var(cx, op, "X")
    out = one_var(cx, op, "Out", outputs=True)
    pooltype = choice(
        cx, op, "pooltype", ops.schema("SequencePool").attributes[0].choices, "AVERAGE"
    )
    attrs = {"pooltype": pooltype, "pad_value": attribute(cx, op, "pad_value", "float", 0.0)}
    y = cx.add(
        "SequencePool",
        [cx.value(xv), cx.offsets_of(xv, "X")],
        attrs,
        name=out,
        domain=conventions.DOMAIN,
    )
    define_out(cx, op, y)
