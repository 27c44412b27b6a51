"""GRU weights packed once for the compiled kernel (oneDNN's reorder into a packed memory): a
Session packs at load and reuses the result every run; raw arrays given to fusion_gru are
packed per call."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import aligned_copy

BLOCK = 16  # hidden units per packed block (kGruBlock in csrc/gru_kernels.hpp)
_REAL = (np.float16, np.float32, np.float64)


@dataclass(frozen=True, eq=False)
class GRUWeights:
    """Canonical GRU weights in the kernel's layout; the arrays are read-only.

    wx [D, OCp/16, IC, 3, 16] and wh [D, OCp/16, OC, 3, 16]: per block of 16 hidden units, row
    k of the matrix's update, reset and candidate columns, so the projection and the recurrent
    product each stream one contiguous panel per block. wx is None for weights without an
    input projection: x then holds the projected gates [..., D*3*OC] (input_size = D*3*OC).
    bias_x [D, 3, OCp]: the input bias plus the recurrent update/reset bias (those two are
    always simply added). bias_hc [D, OCp]: the recurrent candidate bias, which sits inside
    r * (...) with linear_before_reset. OCp is OC rounded up to 16; padding is zero.
    """

    directions: int
    input_size: int
    hidden_size: int
    wx: np.ndarray | None
    wh: np.ndarray
    bias_x: np.ndarray
    bias_hc: np.ndarray


def _real(a: object, op: str, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.type not in _REAL:
        raise ArgumentTypeError(
            f"{op}: {name} must be a float16/float32/float64 array, got {arr.dtype}"
        )
    return arr


def _with_directions(a: np.ndarray, ndim: int, op: str, name: str, dims: str) -> np.ndarray:
    """[D, ...] as given, or a [...] of one direction (D = 1)."""
    if a.ndim == ndim - 1:
        a = a[None]
    if a.ndim != ndim or a.shape[0] not in (1, 2):
        raise ArgumentError(
            f"{op}: {name} must be {dims} with D = 1 or 2 (or without D for one direction), "
            f"got shape {a.shape}"
        )
    return a


def _bias(b: object, d: int, oc: int, op: str, name: str) -> np.ndarray:
    if b is None:
        return np.zeros((d, 3 * oc), np.float32)
    arr = _with_directions(_real(b, op, name), 2, op, name, "[D, 3*OC]")
    if arr.shape != (d, 3 * oc):
        raise ArgumentError(f"{op}: {name} must have shape {(d, 3 * oc)}, got {arr.shape}")
    return arr.astype(np.float32)


def _aligned_empty(shape: tuple[int, ...]) -> np.ndarray:
    """float32 zeros on a 64-byte boundary (arguments.aligned_copy), for the packer to fill."""
    return aligned_copy(np.zeros(shape, np.float32), np.float32)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def canonical_gru_weights(
    wx: np.ndarray | None,
    wh: np.ndarray,
    bias: np.ndarray | None,
    bias_h: np.ndarray | None,
    op: str,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """Canonical weights checked and as float32 with the D axis: wx [D, IC, 3*OC] (or None),
    wh [D, OC, 3*OC], bias and bias_h [D, 3*OC] (zeros where not given). What both engines'
    packers start from."""
    wh = _with_directions(_real(wh, op, "wh"), 3, op, "wh", "[D, OC, 3*OC]")
    if wx is None:
        d, oc = wh.shape[:2]
        ic = d * 3 * oc
    else:
        wx = _with_directions(_real(wx, op, "wx"), 3, op, "wx", "[D, IC, 3*OC]")
        d, ic = wx.shape[:2]
        oc = wh.shape[1]
    if ic < 1 or oc < 1:
        raise ArgumentError(
            f"{op}: input and hidden size must be >= 1, got wx "
            f"{None if wx is None else wx.shape}, wh {wh.shape}"
        )
    if wh.shape != (d, oc, 3 * oc) or (wx is not None and wx.shape[2] != 3 * oc):
        raise ArgumentError(
            f"{op}: wx [D, IC, 3*OC] and wh [D, OC, 3*OC] disagree: wx "
            f"{None if wx is None else wx.shape}, wh {wh.shape}"
        )
    return (
        None if wx is None else np.ascontiguousarray(wx, np.float32),
        np.ascontiguousarray(wh, np.float32),
        np.ascontiguousarray(_bias(bias, d, oc, op, "bias")),
        np.ascontiguousarray(_bias(bias_h, d, oc, op, "bias_h")),
    )


def pack_gru_weights(
    wx: np.ndarray | None,
    wh: np.ndarray,
    bias: np.ndarray | None = None,
    bias_h: np.ndarray | None = None,
) -> GRUWeights:
    """Pack canonical weights (gate order update, reset, candidate): wx [D, IC, 3*OC],
    wh [D, OC, 3*OC], bias and bias_h [D, 3*OC]; D may be left out for one direction. Values
    are converted to float32 once, here.

    wx None: no input projection. fusion_gru then takes x as the gates already projected,
    [..., D*3*OC] (direction d's [u | r | c] at columns d*3*OC), and adds bias and bias_h as
    with a projection: Paddle's unfused `gru` op, whose input is the projected [words, 3*OC],
    runs this way, without multiplying by an identity Wx."""
    op = "pack_gru_weights"
    wx, wh, b, bh = canonical_gru_weights(wx, wh, bias, bias_h, op)
    d, oc = wh.shape[:2]
    ic = d * 3 * oc if wx is None else wx.shape[1]
    # The compiled packer (csrc/gru.cpp) is the one writer of the layout: the framework op
    # libraries' weights are packed by the same code.
    ocp = -(-oc // BLOCK) * BLOCK
    packed_wx = None if wx is None else _aligned_empty((d, ocp // BLOCK, ic, 3, BLOCK))
    packed_wh = _aligned_empty((d, ocp // BLOCK, oc, 3, BLOCK))
    bias_x, bias_hc = _aligned_empty((d, 3, ocp)), _aligned_empty((d, ocp))
    core._C.pack_gru_weights(
        d, 0 if wx is None else ic, oc,
        wx, wh, b, bh, packed_wx, packed_wh, bias_x, bias_hc,
    )  # fmt: skip

    return GRUWeights(
        directions=d,
        input_size=ic,
        hidden_size=oc,
        wx=None if wx is None else _frozen(packed_wx),
        wh=_frozen(packed_wh),
        bias_x=_frozen(bias_x),
        bias_hc=_frozen(bias_hc),
    )


# ---- quantized weights (docs/gru.md, "Quantized GRU") ----------------------------------------
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
        precision, *(None if a is None else _frozen(a) for a in (qx, sx, qh, sh)),
        _frozen(b), _frozen(bh),
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
        return None if w is None else _frozen(_pack_groups(w.view(want), per, ocp))

    frozen = [None if a is None else _frozen(a) for a in (sx, sh, cx, ch)]
    return QGRUWeights(
        q.precision, d, ic, oc, raw(q.wx), raw(q.wh), *frozen,
        _frozen(aligned_copy(bx, np.float32)), _frozen(aligned_copy(bhc, np.float32)),
    )  # fmt: skip
