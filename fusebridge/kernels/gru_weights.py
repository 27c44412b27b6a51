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


def read_only(a: np.ndarray) -> np.ndarray:
    """`a`, made read-only (packed weights are shared by every call that runs them)."""
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
        wx=None if wx is None else read_only(packed_wx),
        wh=read_only(packed_wh),
        bias_x=read_only(bias_x),
        bias_hc=read_only(bias_hc),
    )
