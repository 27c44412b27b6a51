"""The fused GRU (input projection + recurrence) on the compiled core: every variant Paddle,
MXNet, ONNX and oneDNN use (see docs/gru.md), over LoD or right-padded input, never touching
padding."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import as_choice, as_output, contiguous, new_array
from fusebridge.kernels.gru_weights import GRUWeights, pack_gru_weights
from fusebridge.kernels.primitive_cache import CACHE
from fusebridge.kernels.sequence_layout import as_offsets, as_seq_lens

LAYOUTS = {"lod": 0, "tnc": 1, "ntc": 2}
ACTIVATIONS = {"sigmoid": 0, "tanh": 1, "relu": 2, "identity": 3}
DIRECTIONS = ("forward", "reverse", "bidirectional")


# What a GRU primitive is built from: layout, IC, OC, directions, reverse, the modes, the
# activations, projection and ISA (the C++ GruDesc, bound: gru.hpp declares its fields). The
# sentence lengths and padded T are arguments of each call, so batches of any lengths share
# one primitive.
GRUDescriptor = core._C.GRUDescriptor


def _create(desc: GRUDescriptor) -> object:
    return core._C.GruPrimitive(desc)


def _sentences(x: np.ndarray, layout: str, offsets: object, seq_lens: object):
    """(lengths, padded steps) of the input, checked against its layout."""
    op = "fusion_gru"
    if layout == "lod":
        if x.ndim != 2:
            raise ArgumentError(f"{op}: x must be [words, IC] for layout 'lod', got {x.shape}")
        if offsets is None:
            raise ArgumentError(f"{op}: layout 'lod' needs offsets [N+1] (Paddle's LoD)")
        if seq_lens is not None:
            raise ArgumentError(f"{op}: seq_lens belongs to padded layouts; 'lod' takes offsets")
        return np.diff(as_offsets(offsets, op, x.shape[0])), 0
    if x.ndim != 3:
        raise ArgumentError(f"{op}: x must be 3-D for layout {layout!r}, got shape {x.shape}")
    if offsets is not None:
        raise ArgumentError(f"{op}: offsets belongs to layout 'lod'; {layout!r} takes seq_lens")
    t, n = x.shape[:2] if layout == "tnc" else x.shape[1::-1]
    return as_seq_lens(seq_lens, op, n, t), t


def _float32(a: object, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != np.float32:
        raise ArgumentTypeError(f"fusion_gru: {name} must be float32, got {arr.dtype}")
    return contiguous(arr, "fusion_gru", name)


def fusion_gru(
    x: np.ndarray,
    wx: np.ndarray | GRUWeights,
    wh: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    bias_h: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    offsets: np.ndarray | None = None,
    seq_lens: np.ndarray | None = None,
    layout: str = "lod",
    direction: str = "forward",
    linear_before_reset: bool = False,
    origin_mode: bool = True,
    activation: str = "tanh",
    gate_activation: str = "sigmoid",
    return_last: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """GRU over LoD (x [words, IC] + offsets) or right-padded tnc/ntc input (+ seq_lens).

    Weights are canonical (gate order update, reset, candidate; see pack_gru_weights), or one
    GRUWeights in place of wx, wh, bias, bias_h. Returns hidden in the input's layout with
    D*OC columns (forward half first, padding zero), and with return_last also last [D, N, OC]:
    each sentence's final state per direction (the reverse one after its first word). `out`
    receives hidden when given (a Session reuses its buffers across runs); it must not overlap x.
    """
    op = "fusion_gru"
    if isinstance(wx, GRUWeights):
        if wh is not None or bias is not None or bias_h is not None:
            raise ArgumentError(f"{op}: give GRUWeights alone, or raw wx, wh, bias, bias_h")
        weights = wx
    else:
        if wh is None:
            raise ArgumentError(f"{op}: wh is required with raw weights")
        weights = pack_gru_weights(wx, wh, bias, bias_h)
    layout = as_choice(layout, LAYOUTS, op, "layout")
    direction = as_choice(direction, DIRECTIONS, op, "direction")
    d, ic, oc = weights.directions, weights.input_size, weights.hidden_size
    if d != (2 if direction == "bidirectional" else 1):
        raise ArgumentError(
            f"{op}: direction {direction!r} needs weights for "
            f"{2 if direction == 'bidirectional' else 1} direction(s), got {d}"
        )
    x = _float32(x, "x")
    lens, steps = _sentences(x, layout, offsets, seq_lens)
    if x.shape[-1] != ic:
        raise ArgumentError(f"{op}: x has {x.shape[-1]} features, the weights expect IC = {ic}")
    n = len(lens)
    if h0 is not None:
        h0 = _float32(h0, "h0")
        if h0.shape == (n, oc) and d == 1:
            h0 = h0[None]
        if h0.shape != (d, n, oc):
            raise ArgumentError(f"{op}: h0 must have shape {(d, n, oc)}, got {h0.shape}")
    desc = GRUDescriptor(
        layout=core._C.SeqLayout[layout],
        ic=ic,
        oc=oc,
        directions=d,
        reverse=direction == "reverse",
        linear_before_reset=bool(linear_before_reset),
        origin_mode=bool(origin_mode),
        act=core._C.GruAct[as_choice(activation, ACTIVATIONS, op, "activation")],
        gate=core._C.GruAct[as_choice(gate_activation, ACTIVATIONS, op, "gate_activation")],
        projection=weights.wx is not None,
        isa=core._C.Isa[core.isa()],
    )
    prim = CACHE.get(desc, _create)
    out = as_output(out, x.shape[:-1] + (d * oc,), np.float32, x, op)
    if out is x:
        raise ArgumentError(f"{op}: out must not be x (the recurrence reads x after writing)")
    last = new_array((d, n, oc), np.float32, op, "last") if return_last else None
    w = weights
    prim.forward(lens, steps, x, w.wx, w.wh, w.bias_x, w.bias_hc, h0, out, last)
    return (out, last) if return_last else out
