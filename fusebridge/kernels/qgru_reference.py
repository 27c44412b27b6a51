"""The quantized GRU's arithmetic in NumPy, operation by operation in float32 as csrc/qgru_simd.hpp
does it (each operation rounded once, no fused multiply-add), from docs/gru.md's "Quantized GRU":
per-row activation quantization, exact integer (int8) or VDPBF16PS-ordered (bf16) dot products,
the float rescale, Cephes' exp/tanh, the gate math and the state blend. The kernel must match it
bit for bit; tests also hold both to the float32 GRU within the quantization's error bound."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.qgru_weights import QuantizedGRUWeights, bf16_bits
from fusebridge.kernels.reference import GRU_DIRECTIONS, gru_sentences

F = np.float32


# ---- activations: simd_math.hpp's polynomials, in float32 ----
def _exp(x: np.ndarray) -> np.ndarray:
    x = np.where(x < F(-87.3365447505531), F(-87.3365447505531), x)
    x = np.where(x > F(88.3762626647949), F(88.3762626647949), x)
    magic = F(12582912.0)
    n = (x * F(1.44269504088896341) + magic) - magic
    r = x - n * F(0.693359375)
    r = r - n * F(-2.12194440e-4)
    p = np.full_like(x, F(1.9875691500e-4))
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = p * r + F(c)
    p = (p * (r * r) + r) + F(1)
    e = (np.where(np.isnan(n), 0, n).astype(np.int32) + 127) << 23
    return p * e.view(F)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return F(1) / (F(1) + _exp(-x))


def _tanh(x: np.ndarray) -> np.ndarray:
    ax = np.where(x < 0, -x, x)
    z = x * x
    p = np.full_like(x, F(-5.70498872745e-3))
    p = p * z + F(2.06390887954e-2)
    p = p * z - F(5.37397155531e-2)
    p = p * z + F(1.33314422036e-1)
    p = p * z - F(3.33332819422e-1)
    small = (p * z) * x + x
    big = F(1) - F(2) / (_exp(ax + ax) + F(1))
    big = np.where(x < 0, -big, big)
    return np.where(ax < F(0.625), small, big)


ACTIVATIONS = {
    "sigmoid": _sigmoid,
    "tanh": _tanh,
    "relu": lambda x: np.where(x < 0, F(0), x),
    "identity": lambda x: x,
}


# ---- rows into quantized values ----
def quantize_row(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """int8: (values q in [-127, 127], scale): scale = amax / 127, q = rint(x * (127 / amax));
    a row holding NaN or an infinity gets q = 0 and scale NaN, an all-zero row scale 0."""
    amax = np.abs(x).max(initial=F(0))
    if not np.isfinite(amax) or np.isnan(x).any():
        return np.zeros(x.shape, np.int64), F(np.nan)
    if amax == 0:
        return np.zeros(x.shape, np.int64), F(0)
    q = np.clip(np.rint(x * (F(127) / amax)), -127, 127).astype(np.int64)
    return q, amax / F(127)


def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(F)


def _flush(v: np.ndarray) -> np.ndarray:
    return np.where(np.abs(v) < np.finfo(F).tiny, np.copysign(F(0), v), v)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 a * b + c with one rounding, as an FMA (and VDPBF16PS's steps) computes it: the
    product is exact in float64 and s = p + c is rounded once there; where s falls exactly
    halfway between two float32s while the exact sum does not (TwoSum's error e != 0), the
    result is the float32 on e's side rather than the even one. (s cannot pass a float32
    halfway point that the exact sum does not reach: the point is a float64 between them.)
    NumPy's own float32 a * b + c would round a product below the normal range first."""
    a, b, c = (np.asarray(v, F).astype(np.float64) for v in (a, b, c))
    p = a * b
    s = p + c
    t = s - p
    e = (p - (s - t)) + (c - t)
    r = s.astype(F)
    other = np.nextafter(r, np.where(s > r.astype(np.float64), F(np.inf), F(-np.inf)))
    half = (r.astype(np.float64) + other.astype(np.float64)) / 2
    tie = (s == half) & (e != 0) & np.isfinite(other)
    return np.where(tie & ((e > 0) == (other > r)), other, r).astype(F)


def bf16_dot(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a [K] float32, w [K, C] bf16 bits: VDPBF16PS's sum over pairs (2g, 2g+1): acc += a[2g+1] *
    w[2g+1], then += a[2g] * w[2g], each a single rounding of the exact product and sum (fma),
    denormal results flushed to zero."""
    k = len(a) + len(a) % 2  # an odd K's last pair has a zero second half
    av = np.zeros(k, F)
    av[: len(a)] = _bf16(bf16_bits(a))
    wv = np.zeros((k, w.shape[1]), F)
    wv[: len(a)] = _bf16(w)
    acc = np.zeros(w.shape[1], F)
    for g in range(0, k, 2):
        acc = _flush(fma(av[g + 1], wv[g + 1], acc))
        acc = _flush(fma(av[g], wv[g], acc))
    return acc


def _product(a: np.ndarray, w: np.ndarray, scale: np.ndarray | None, precision: str):
    """a @ w as the kernel computes it: int8 (exact sum) * row scale * column scale, or bf16."""
    if precision == "int8":
        q, s = quantize_row(a)
        exact = q @ w.astype(np.int64)
        return (exact.astype(F) * s) * scale
    return bf16_dot(a, w)


def qgru(
    x: np.ndarray,
    weights: QuantizedGRUWeights,
    *,
    h0: np.ndarray | None = None,
    offsets: np.ndarray | None = None,
    seq_lens: np.ndarray | None = None,
    layout: str = "lod",
    direction: str = "forward",
    linear_before_reset: bool = False,
    origin_mode: bool = True,
    activation: str = "tanh",
    gate_activation: str = "sigmoid",
) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, last) float32, as kernels.fusion_gru with QGRUWeights gives them."""
    w = weights
    if w.precision not in ("int8", "bf16"):
        raise ArgumentError(f"qgru: precision must be int8 or bf16, got {w.precision!r}")
    with np.errstate(all="ignore"):  # unbounded activations may overflow, as in the kernel
        return _qgru(x, w, h0, offsets, seq_lens, layout, direction, linear_before_reset,
                     origin_mode, activation, gate_activation)  # fmt: skip


def _qgru(x, w, h0, offsets, seq_lens, layout, direction, linear_before_reset, origin_mode,
          activation, gate_activation):  # fmt: skip
    p = w.precision
    act, gate_act = ACTIVATIONS[activation], ACTIVATIONS[gate_activation]
    x = np.asarray(x, F)
    reverses = GRU_DIRECTIONS[direction]
    dirs = len(reverses)
    sentences, place = gru_sentences(x, layout, offsets, seq_lens)
    n, oc = len(sentences), w.wh.shape[1]

    def raw(a):  # int8 values, or bf16 bits
        return None if a is None else (a if p == "int8" else a.view(np.uint16))

    wx, wh = raw(w.wx), raw(w.wh)
    b, bh = np.asarray(w.bias, F), np.asarray(w.bias_h, F)
    h0 = np.zeros((dirs, n, oc), F) if h0 is None else np.asarray(h0, F).reshape(dirs, n, oc)
    u, r, c = slice(0, oc), slice(oc, 2 * oc), slice(2 * oc, 3 * oc)
    outputs = [np.zeros((len(s), dirs * oc), F) for s in sentences]
    last = np.zeros((dirs, n, oc), F)
    for d, reverse in enumerate(reverses):
        sx = None if w.wx_scale is None else w.wx_scale[d]
        sh = None if w.wh_scale is None else w.wh_scale[d]
        bu, br = b[d, u] + bh[d, u], b[d, r] + bh[d, r]  # packed once, as the kernel's bias
        for i, words in enumerate(sentences):
            if wx is None:  # x holds the gates of both directions
                g = words[:, d * 3 * oc : (d + 1) * 3 * oc]
            else:
                g = np.array([_product(row, wx[d], sx, p) for row in words], F).reshape(-1, 3 * oc)
            h = h0[d, i]
            for t in range(len(words) - 1, -1, -1) if reverse else range(len(words)):
                hw = _product(h, wh[d], sh, p)
                update = gate_act((hw[u] + g[t, u]) + bu)
                reset = gate_act((hw[r] + g[t, r]) + br)
                if linear_before_reset:
                    cand = act((g[t, c] + b[d, c]) + reset * (hw[c] + bh[d, c]))
                else:
                    hc = _product(reset * h, wh[d][:, c], None if sh is None else sh[c], p)
                    cand = act(((g[t, c] + b[d, c]) + hc) + bh[d, c])
                h = cand + update * (h - cand) if origin_mode else h + update * (cand - h)
                outputs[i][t, d * oc : (d + 1) * oc] = h
            last[d, i] = h
    return place(outputs, dirs * oc), last
