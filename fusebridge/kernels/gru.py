"""The fused GRU (input projection + recurrence) on the compiled core: every variant Paddle,
MXNet, ONNX and oneDNN use (see docs/gru.md), over LoD or right-padded input, never touching
padding."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import as_choice, as_flag, as_output, contiguous, new_array
from fusebridge.kernels.gru_weights import GRUWeights, pack_gru_weights
from fusebridge.kernels.qgru_weights import QGRUWeights
from fusebridge.kernels.sequence_layout import as_offsets, as_seq_lens

LAYOUTS = {"lod": 0, "tnc": 1, "ntc": 2}
ACTIVATIONS = {"sigmoid": 0, "tanh": 1, "relu": 2, "identity": 3}
DIRECTIONS = ("forward", "reverse", "bidirectional")


# What a GRU primitive is built from: layout, IC, OC, directions, reverse, the modes, the
# activations, projection and ISA (the C++ GruDesc, bound: gru.hpp declares its fields). The
# sentence lengths and padded T are arguments of each call, so batches of any lengths share
# one primitive.
GRUDescriptor = core._C.GRUDescriptor
# The quantized GRU's (csrc/qgru.hpp): the same fields, the precision, and the extensions
# (core.extensions()) its kernels may use.
QGRUDescriptor = core._C.QGRUDescriptor


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


def layout_and_direction(layout: object, direction: object, directions: int) -> tuple[str, str]:
    """A GRUKernel's layout and direction, checked; the direction against the number of
    directions its packed weights hold (either engine's)."""
    layout = as_choice(layout, LAYOUTS, "fusion_gru", "layout")
    direction = as_choice(direction, DIRECTIONS, "fusion_gru", "direction")
    want = 2 if direction == "bidirectional" else 1
    if directions != want:
        raise ArgumentError(
            f"fusion_gru: direction {direction!r} needs weights for {want} direction(s), "
            f"got {directions}"
        )
    return layout, direction


class GRUKernel:
    """fusion_gru with its weights and attributes fixed (a Session's GRU node): the descriptor
    is built and its primitive looked up once, so a call checks only its data. Calls take
    fusion_gru's x, h0, offsets, seq_lens, return_last and out. QGRUWeights (int8, bf16) run the
    quantized kernel."""

    def __init__(
        self,
        weights: GRUWeights | QGRUWeights,
        *,
        layout: str = "lod",
        direction: str = "forward",
        linear_before_reset: bool = False,
        origin_mode: bool = True,
        activation: str = "tanh",
        gate_activation: str = "sigmoid",
    ) -> None:
        op = "fusion_gru"
        layout, direction = layout_and_direction(layout, direction, weights.directions)
        d = weights.directions
        self.weights, self.layout = weights, layout
        self._fields = {
            "layout": core._C.SeqLayout[layout],
            "ic": weights.input_size,
            "oc": weights.hidden_size,
            "directions": d,
            "reverse": direction == "reverse",
            "linear_before_reset": as_flag(linear_before_reset, op, "linear_before_reset"),
            "origin_mode": as_flag(origin_mode, op, "origin_mode"),
            "act": core._C.GruAct[as_choice(activation, ACTIVATIONS, op, "activation")],
            "gate": core._C.GruAct[as_choice(gate_activation, ACTIVATIONS, op, "gate_activation")],
            "projection": weights.wx is not None,
        }
        self._build, self._prim = None, None
        self._quantized = isinstance(weights, QGRUWeights)
        if self._quantized:
            self._fields["precision"] = core._C.GruPrecision[weights.precision]

    def _primitive(self) -> object:
        # set_isa or set_extensions may have changed them since the last call
        build = (core.isa(), core._C.current_extensions())
        if build != self._build:
            isa = core._C.Isa[build[0]]
            if self._quantized:
                desc = QGRUDescriptor(**self._fields, isa=isa, extensions=build[1])
            else:
                desc = GRUDescriptor(**self._fields, isa=isa)
            self._prim, self._build = core._C.primitive(desc), build
        return self._prim

    def _forward(self, prim, lens, steps, x, h0, out, last) -> None:
        w = self.weights
        if self._quantized:
            prim.forward(lens, steps, x, w.wx, w.wh, w.wx_scale, w.wh_scale, w.wx_comp,
                         w.wh_comp, w.bias_x, w.bias_hc, h0, out, last)  # fmt: skip
        else:
            prim.forward(lens, steps, x, w.wx, w.wh, w.bias_x, w.bias_hc, h0, out, last)

    def __call__(
        self,
        x: np.ndarray,
        *,
        h0: np.ndarray | None = None,
        offsets: np.ndarray | None = None,
        seq_lens: np.ndarray | None = None,
        return_last: bool = False,
        out: np.ndarray | None = None,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        op = "fusion_gru"
        w = self.weights
        d, ic, oc = w.directions, w.input_size, w.hidden_size
        x = _float32(x, "x")
        lens, steps = _sentences(x, self.layout, offsets, seq_lens)
        if x.shape[-1] != ic:
            raise ArgumentError(f"{op}: x has {x.shape[-1]} features, the weights expect IC = {ic}")
        n = len(lens)
        if h0 is not None:
            h0 = _float32(h0, "h0")
            if h0.shape == (n, oc) and d == 1:
                h0 = h0[None]
            if h0.shape != (d, n, oc):
                raise ArgumentError(f"{op}: h0 must have shape {(d, n, oc)}, got {h0.shape}")
        prim = self._primitive()
        out = as_output(out, x.shape[:-1] + (d * oc,), np.float32, x, op)
        if out is x:
            raise ArgumentError(f"{op}: out must not be x (the recurrence reads x after writing)")
        return_last = as_flag(return_last, op, "return_last")
        last = new_array((d, n, oc), np.float32, op, "last") if return_last else None
        self._forward(prim, lens, steps, x, h0, out, last)
        return (out, last) if return_last else out


def fusion_gru(
    x: np.ndarray,
    wx: np.ndarray | GRUWeights | QGRUWeights,
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
    GRUWeights in place of wx, wh, bias, bias_h (QGRUWeights: the quantized GRU, docs/gru.md).
    Returns hidden in the input's layout with D*OC columns (forward half first, padding zero),
    and with return_last also last [D, N, OC]:
    each sentence's final state per direction (the reverse one after its first word). `out`
    receives hidden when given (a Session reuses its buffers across runs); it must not overlap x.
    """
    op = "fusion_gru"
    if isinstance(wx, (GRUWeights, QGRUWeights)):
        if wh is not None or bias is not None or bias_h is not None:
            raise ArgumentError(f"{op}: give GRUWeights alone, or raw wx, wh, bias, bias_h")
        weights = wx
    else:
        if wh is None:
            raise ArgumentError(f"{op}: wh is required with raw weights")
        weights = pack_gru_weights(wx, wh, bias, bias_h)
    kernel = GRUKernel(
        weights,
        layout=layout,
        direction=direction,
        linear_before_reset=linear_before_reset,
        origin_mode=origin_mode,
        activation=activation,
        gate_activation=gate_activation,
    )
    return kernel(x, h0=h0, offsets=offsets, seq_lens=seq_lens, return_last=return_last, out=out)
