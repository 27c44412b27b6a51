"""Quantized GRU weights (docs/gru.md, "Quantized GRU"): canonical float weights quantized once
(int8 with a scale per gate column, or bf16) into QuantizedGRUWeights, the form a model file
stores, and those packed into QGRUWeights, the quantized kernel's layout (csrc/qgru.hpp)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import aligned_copy
from fusebridge.kernels.gru_weights import BLOCK, canonical_gru_weights, read_only

PRECISIONS = ("float32", "int8", "bf16")


@dataclass(frozen=True, eq=False)
class QuantizedGRUWeights:
    """Canonical quantized GRU weights: what a model file stores (fusebridge's
    QuantizedFusionGRU) and what pack_qgru_weights packs; the arrays are read-only.

    int8: wx [D, IC, 3*OC] and wh [D, OC, 3*OC] int8 in [-127, 127], each column's scale in
    wx_scale, wh_scale [D, 3*OC] float32 (weight = value * scale). bf16: wx, wh bfloat16
    (ml_dtypes), no scales. wx None: no input projection. bias, bias_h [D, 3*OC] float32."""

    precision: str
    wx: np.ndarray | None
    wx_scale: np.ndarray | None
    wh: np.ndarray
    wh_scale: np.ndarray | None
    bias: np.ndarray
    bias_h: np.ndarray


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16): round to nearest even, NaN kept quiet, denormals and
    zeros to zeros of their sign (csrc/qgru_kernels.hpp's bf16_bits, bit for bit)."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32)
    rounded = (b + np.uint32(0x7FFF) + ((b >> 16) & 1)) >> 16
    rounded = np.where((b & 0x7FFFFFFF) > 0x7F800000, (b >> 16) | 0x40, rounded)
    rounded = np.where((b & 0x7F800000) == 0, (b >> 16) & 0x8000, rounded)
    return rounded.astype(np.uint16)


def _quantize_columns(w: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """[D, K, C] float32 -> (int8 values, float32 scale [D, C]): per column, scale = amax / 127,
    value = round_half_even(w * (127 / amax)) (float32 arithmetic, as the kernel quantizes its
    activations)."""
    op = "quantize_gru_weights"
    if not np.all(np.isfinite(w)):
        d, k, c = np.argwhere(~np.isfinite(w))[0]
        raise ArgumentError(
            f"{op}: {name} holds {w[d, k, c]} at direction {d}, row {k}, column {c}: int8 "
            "weights must be finite"
        )
    amax = np.abs(w).max(axis=1)
    safe = np.where(amax > 0, amax, np.float32(1))
    s = np.float32(127) / safe
    q = np.clip(np.rint(w * s[:, None, :]), -127, 127)
    q = np.where(amax[:, None, :] > 0, q, 0).astype(np.int8)
    return q, np.where(amax > 0, amax / np.float32(127), np.float32(0)).astype(np.float32)


def quantize_gru_weights(
    wx: np.ndarray | None,
    wh: np.ndarray,
    bias: np.ndarray | None = None,
    bias_h: np.ndarray | None = None,
    precision: str = "int8",
) -> QuantizedGRUWeights:
    """Canonical float weights (pack_gru_weights' arguments) quantized once: int8 with one scale
    per gate column (Wx and Wh apart), or bf16 (round to nearest even)."""
    import ml_dtypes

    op = "quantize_gru_weights"
    if precision not in ("int8", "bf16"):
        raise ArgumentError(f"{op}: precision must be 'int8' or 'bf16', got {precision!r}")
    wx, wh, b, bh = canonical_gru_weights(wx, wh, bias, bias_h, op)
    if precision == "int8":
        qx, sx = (None, None) if wx is None else _quantize_columns(wx, "wx")
        qh, sh = _quantize_columns(wh, "wh")
    else:
        qx = None if wx is None else bf16_bits(wx).view(ml_dtypes.bfloat16)
        qh, sx, sh = bf16_bits(wh).view(ml_dtypes.bfloat16), None, None
    return QuantizedGRUWeights(
        precision, *(None if a is None else read_only(a) for a in (qx, sx, qh, sh)),
        read_only(b), read_only(bh),
    )  # fmt: skip


@dataclass(frozen=True, eq=False)
class QGRUWeights:
    """Quantized weights in the kernel's layout (csrc/qgru.hpp); read-only arrays.

    wx [D, OCp/16, G(IC), 3, 16] and wh [D, OCp/16, G(OC), 3, 16] uint32 groups of 4 int8 (or 2
    bf16) consecutive rows, G(K) groups for K rows; int8 only: wx_scale, wh_scale [D, 3, OCp]
    float32 and wx_comp, wh_comp [D, 3, OCp] int32 (128 * each column's sum: the kernel feeds
    activations as u8 = q + 128); bias_x, bias_hc as GRUWeights'."""

    precision: str
    directions: int
    input_size: int
    hidden_size: int
    wx: np.ndarray | None
    wh: np.ndarray
    wx_scale: np.ndarray | None
    wh_scale: np.ndarray | None
    wx_comp: np.ndarray | None
    wh_comp: np.ndarray | None
    bias_x: np.ndarray
    bias_hc: np.ndarray


def _columns(a: np.ndarray, ocp: int) -> np.ndarray:
    """[D, 3*OC] -> [D, 3, OCp], zero past OC."""
    d, g3 = a.shape
    out = np.zeros((d, 3, ocp), a.dtype)
    out[:, :, : g3 // 3] = a.reshape(d, 3, g3 // 3)
    return out


def _pack_groups(values: np.ndarray, per: int, ocp: int) -> np.ndarray:
    """[D, K, 3*OC] int8 (per 4) or uint16 (per 2) -> [D, OCp/16, G, 3, 16] uint32 groups."""
    d, k, g3 = values.shape
    groups = -(-k // per)
    padded = np.zeros((d, groups * per, 3, ocp), values.dtype)
    padded[:, :k, :, : g3 // 3] = values.reshape(d, k, 3, g3 // 3)
    blocked = padded.reshape(d, groups, per, 3, ocp // BLOCK, BLOCK)
    packed = np.ascontiguousarray(blocked.transpose(0, 4, 1, 3, 5, 2))
    return aligned_copy(packed.view(np.uint32)[..., 0], np.uint32)


def pack_qgru_weights(q: QuantizedGRUWeights) -> QGRUWeights:
    """Quantized canonical weights into the kernel's layout (values unchanged: the bits a
    Session runs are the file's)."""
    op = "pack_qgru_weights"
    if q.precision not in ("int8", "bf16"):
        raise ArgumentError(f"{op}: precision must be 'int8' or 'bf16', got {q.precision!r}")
    int8 = q.precision == "int8"
    want = np.int8 if int8 else np.uint16
    d, oc = q.wh.shape[:2]
    ic = d * 3 * oc if q.wx is None else q.wx.shape[1]
    for name, w, k in (("wx", q.wx, ic), ("wh", q.wh, oc)):
        if w is not None and (w.shape != (d, k, 3 * oc) or w.dtype.itemsize != want().itemsize):
            raise ArgumentError(
                f"{op}: {name} must be {q.precision} [{d}, {k}, {3 * oc}], got {w.dtype} "
                f"{list(w.shape)}"
            )
    ocp = -(-oc // BLOCK) * BLOCK
    per = 4 if int8 else 2
    if int8 and max(ic if q.wx is not None else 0, oc) > 65536:
        raise ArgumentError(f"{op}: int8 needs input and hidden size <= 65536 (exact int32 sums)")

    def scale_comp(w, scale):
        if not int8 or w is None:
            return None, None
        if scale is None or scale.shape != (d, 3 * oc):
            raise ArgumentError(f"{op}: an int8 weight needs its scale [{d}, {3 * oc}]")
        comp = 128 * w.astype(np.int32).sum(axis=1, dtype=np.int32)
        return (aligned_copy(_columns(scale.astype(np.float32), ocp), np.float32),
                aligned_copy(_columns(comp, ocp), np.int32))  # fmt: skip

    sx, cx = scale_comp(q.wx, q.wx_scale)
    sh, ch = scale_comp(q.wh, q.wh_scale)
    bias, bias_h = np.asarray(q.bias, np.float32), np.asarray(q.bias_h, np.float32)
    bx = _columns(bias, ocp)
    bx[:, :2] += _columns(bias_h, ocp)[:, :2]  # update and reset add their recurrent bias
    bhc = _columns(bias_h, ocp)[:, 2]

    def raw(w):
        return None if w is None else read_only(_pack_groups(w.view(want), per, ocp))

    frozen = [None if a is None else read_only(a) for a in (sx, sh, cx, ch)]
    return QGRUWeights(
        q.precision, d, ic, oc, raw(q.wx), raw(q.wh), *frozen,
        read_only(aligned_copy(bx, np.float32)), read_only(aligned_copy(bhc, np.float32)),
    )  # fmt: skip
