"""Paddle's crf_decoding (Viterbi over a LoD Emission) as our CRFDecoding."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    define_out,
    one_var,
    optional_var,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


@CONVERTERS.register("crf_decoding", lod="Emission")
def _crf_decoding(cx, op: OpDesc) -> None:
    if optional_var(cx, op, "Length"):
        raise UnsupportedOpError(
            f"{cx.where()}: padded input with Length is not supported; give LoD Emission"
        )
    ev = one_var(cx, op, "Emission")
    out = one_var(cx, op, "ViterbiPath", outputs=True)
    label_var = optional_var(cx, op, "Label")
    inputs = [
        cx.value(ev),
        cx.offsets_of(ev, "Emission"),
        cx.value(one_var(cx, op, "Transition")),
        cx.value(label_var) if label_var else None,
    ]
    y = cx.add("CRFDecoding", inputs, name=out, dtype=ir.DataType.INT64, domain=conventions.DOMAIN)
    define_out(cx, op, y, "ViterbiPath")
