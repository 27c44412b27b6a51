"""Paddle's LoD GRU ops, gru and fusion_gru, as our GRU and FusionGRU (layout lod): WeightH from
Paddle's layout to the canonical one (weight_layouts.py)."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    define_out,
    one_var,
    optional_var,
)
from fusebridge.integrations.paddle.program_desc import OpDesc
from fusebridge.integrations.paddle.weight_layouts import paddle_weight_h_to_canonical
from fusebridge.ops.gru import ACTIVATIONS


def _gru_attributes(cx, op: OpDesc) -> dict[str, object]:
    return {
        "direction": "reverse" if attribute(cx, op, "is_reverse", "bool", False) else "forward",
        "origin_mode": int(attribute(cx, op, "origin_mode", "bool", False)),
        "activation": choice(cx, op, "activation", ACTIVATIONS, "tanh"),
        "gate_activation": choice(cx, op, "gate_activation", ACTIVATIONS, "sigmoid"),
        "linear_before_reset": 0,
        "layout": "lod",
    }


def _gru_weights(cx, op: OpDesc, oc_from: str) -> tuple[ir.Value, ir.Value | None, ir.Value | None]:
    """Canonical Wh [1, OC, 3*OC] from Paddle's WeightH layout; Bias [1, 3*OC]; H0 [N, OC]."""
    wv = one_var(cx, op, oc_from)
    weight = cx.param(wv)
    if weight.ndim != 2 or weight.shape[1] != 3 * weight.shape[0]:
        raise ModelFormatError(
            f"{cx.where()}: {oc_from} {wv!r} must be [OC, 3*OC], got {weight.shape}"
        )
    wh = cx.const(paddle_weight_h_to_canonical(weight)[None], f"{wv}/canonical")
    bias = None
    bv = optional_var(cx, op, "Bias")
    if bv:
        b = cx.param(bv)
        if b.size != weight.shape[1]:
            raise ModelFormatError(
                f"{cx.where()}: Bias {bv!r} must hold 3*OC values, got {b.shape}"
            )
        bias = cx.value(bv) if b.shape == (1, b.size) else cx.const(b.reshape(1, -1), f"{bv}/row")
    h0_var = optional_var(cx, op, "H0")
    h0 = cx.value(h0_var) if h0_var else None
    return wh, bias, h0


@CONVERTERS.register("gru", lod="Input")
def _gru(cx, op: OpDesc) -> None:
    xv = one_var(cx, op, "Input")
    out = one_var(cx, op, "Hidden", outputs=True)
    wh, bias, h0 = _gru_weights(cx, op, "Weight")
    inputs = [cx.value(xv), cx.offsets_of(xv, "Input"), wh, bias, None, h0]
    y = cx.add("GRU", inputs, _gru_attributes(cx, op), name=out, domain=conventions.DOMAIN)
    define_out(cx, op, y, "Hidden")


@CONVERTERS.register("fusion_gru")
def _fusion_gru(cx, op: OpDesc) -> None:
    xv = one_var(cx, op, "X")
    out = one_var(cx, op, "Hidden", outputs=True)
    wh, bias, h0 = _gru_weights(cx, op, "WeightH")
    wxv = one_var(cx, op, "WeightX")
    weight_x = cx.param(wxv)
    if weight_x.ndim != 2 or weight_x.shape[1] != wh.shape[2]:
        raise ModelFormatError(
            f"{cx.where()}: WeightX {wxv!r} must be [IC, 3*OC] with 3*OC = {wh.shape[2]}, "
            f"got {weight_x.shape}"
        )
    wx = cx.const(weight_x[None], f"{wxv}/canonical")
    inputs = [cx.value(xv), cx.offsets_of(xv, "X"), wx, wh, bias, None, h0]
    y = cx.add("FusionGRU", inputs, _gru_attributes(cx, op), name=out, domain=conventions.DOMAIN)
    define_out(cx, op, y, "Hidden")
