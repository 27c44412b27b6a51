"""The fused GRU on the cuda engine: fusebridge.kernels.fusion_gru's signature and variants on
device arrays. Weights are uploaded once (pack_gru_weights) and stay on the device; a call runs
the projection kernel over the words that exist, then the whole recurrence in one cooperative
launch (csrc/gru.cu). Sentence lengths (offsets, seq_lens) are host integers, as torch's
pack_padded_sequence takes them: the launch needs them on the host, and a device array of them
is downloaded.

Outputs depend on the shapes alone: not on the grid (which follows the GPU's SM count), nor on
the block, nor on the batch a sentence shares a call with (docs/cuda.md, "What the GRU
promises")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebridge.cuda import arguments as args
from fusebridge.cuda.device import Launcher, current_launcher, launcher_for, same_device
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.arguments import as_choice, as_flag
from fusebridge.kernels.gru import ACTIVATIONS, _sentences, layout_and_direction
from fusebridge.kernels.gru_weights import canonical_gru_weights

SOURCE = "gru.cu"
OP = "fusion_gru"
# Threads a block of each kernel: the projection's tiles assume 256; the recurrence takes any
# multiple of 32 up to 256 (the tests run smaller blocks, the bits the same).
THREADS = {"gru_projection": 256, "gru_recurrence": 256}
PROJECTION_BLOCKS_PER_SM = 4
UNITS_MAX = 32  # hidden units a block owns at most: lane j of a warp finishes unit j
SHARED_MAX = 200 * 1024  # dynamic shared memory a recurrence block may ask for (H100: 227 KiB)


@dataclass(frozen=True, eq=False)
class CudaGRUWeights:
    """Canonical GRU weights on one device, read-only by convention: wx [IC, D*3*OC] (the
    directions side by side, so the projection is one product; None without projection),
    wh [D, OC, 3*OC], bias_x [D*3*OC] (the input bias plus the recurrent update and reset
    biases, which simply add), bias_hc [D, OC] (the recurrent candidate bias, which the
    recurrence adds inside r * (...) with linear_before_reset, outside without)."""

    device: str
    directions: int
    input_size: int
    hidden_size: int
    wx: Any
    wh: Any
    bias_x: Any
    bias_hc: Any


def pack_gru_weights(
    wx: object,
    wh: object,
    bias: object = None,
    bias_h: object = None,
    *,
    device: int | None = None,
) -> CudaGRUWeights:
    """Canonical weights (gate order update, reset, candidate; host or device arrays, as
    fusebridge.kernels.pack_gru_weights takes them) uploaded once to CUDA device `device`
    (default: CuPy's current one)."""
    return _pack_on(current_launcher(device), wx, wh, bias, bias_h)


def _pack_on(launcher: Launcher, wx, wh, bias, bias_h) -> CudaGRUWeights:
    op = "pack_gru_weights"
    host = [None if a is None else _host(launcher, a) for a in (wx, wh, bias, bias_h)]
    wx, wh, b, bh = canonical_gru_weights(*host, op)
    d, oc = wh.shape[:2]
    ic = d * 3 * oc if wx is None else wx.shape[1]
    bias_x = b.reshape(d, 3, oc).copy()
    bias_x[:, :2] += bh.reshape(d, 3, oc)[:, :2]  # the update and reset biases simply add
    return CudaGRUWeights(
        device=launcher.device,
        directions=d,
        input_size=ic,
        hidden_size=oc,
        wx=None if wx is None else launcher.upload(_side_by_side(wx)),
        wh=launcher.upload(wh),
        bias_x=launcher.upload(bias_x.reshape(-1)),
        bias_hc=launcher.upload(np.ascontiguousarray(bh.reshape(d, 3, oc)[:, 2])),
    )


def _side_by_side(wx: np.ndarray) -> np.ndarray:
    """[D, IC, 3*OC] -> [IC, D*3*OC]: every direction's gates of a word in one row."""
    d, ic, cols = wx.shape
    return np.ascontiguousarray(wx.transpose(1, 0, 2).reshape(ic, d * cols))


def _host(launcher: Launcher, a: object) -> np.ndarray:
    if isinstance(a, np.ndarray) or not (
        hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__")
    ):
        return np.asarray(a)
    return launcher.download(a)


def _lengths_on_host(launcher: Launcher, lengths: object) -> object:
    """Offsets or seq_lens as the host array the launch plan needs (downloaded if on the
    device: a copy of a few bytes)."""
    if lengths is None or isinstance(lengths, (np.ndarray, list, tuple)):
        return lengths
    if hasattr(lengths, "__cuda_array_interface__") or hasattr(lengths, "__dlpack__"):
        return launcher.download(lengths)
    return lengths


@dataclass(frozen=True)
class CudaGRUDescriptor:
    device: str
    layout: str
    ic: int
    oc: int
    directions: int
    reverse: bool
    linear_before_reset: bool
    origin_mode: bool
    act: int
    gate: int
    projection: bool


class GRUPrimitive:
    """The grid of the recurrence for one GRU shape on one device, found once: as many blocks
    per direction as the device holds at once, each owning up to UNITS_MAX hidden units whose
    Wh columns fit in its shared memory."""

    def __init__(self, desc: CudaGRUDescriptor, launcher: Launcher) -> None:
        self.desc, self.launcher = desc, launcher
        oc, d = desc.oc, desc.directions
        threads = THREADS["gru_recurrence"]

        def shared(units: int) -> int:
            return units * 3 * oc * 4

        # The most blocks the device holds, then fewer, larger ones until they all fit at once.
        per_dir = launcher.resident_blocks(SOURCE, "gru_recurrence", threads, shared(1)) // d
        units = -(-oc // max(1, per_dir))
        while True:
            if units > UNITS_MAX or shared(units) > SHARED_MAX:
                raise ArgumentError(
                    f"{OP}: hidden size {oc} x {d} direction(s) needs more blocks resident at "
                    f"once than {launcher.device} holds (each owns at most {UNITS_MAX} units "
                    f"and {SHARED_MAX} bytes of Wh)"
                )
            blocks = -(-oc // units)
            fits = launcher.resident_blocks(SOURCE, "gru_recurrence", threads, shared(units))
            if blocks * d <= fits:
                break
            units += 1
        self.units, self.blocks_per_dir, self.shared_bytes = units, blocks, shared(units)

    def forward(self, plan: _Plan, x, w: CudaGRUWeights, h0, out, last) -> None:
        desc, launcher = self.desc, self.launcher
        d, oc = desc.directions, desc.oc
        cols = d * 3 * oc
        gates = args.new_array(launcher, (max(plan.words, 1), cols), np.float32, OP, "gates")
        if plan.words:
            tiles = -(-plan.words // 64) * -(-cols // 64)
            grid = tiles if w.wx is not None else -(-plan.words * cols // THREADS["gru_projection"])
            arguments = (x, np.int64(x.shape[-1]), plan.xrows, np.int64(plan.words), w.wx)
            launcher.launch_grid(
                SOURCE,
                "gru_projection",
                max(1, min(grid, 65535)),
                THREADS["gru_projection"],
                (*arguments, w.bias_x, np.int64(cols), gates),
            )
        n = plan.n
        state = args.new_array(launcher, (2, d, max(n, 1), oc), np.float32, OP, "state")
        mid = args.new_array(launcher, (2, d, max(n, 1), oc), np.float32, OP, "scratch")
        barrier = launcher.empty((2,), np.uint32, zeros=True)
        data = (gates, w.wh, w.bias_hc, h0, plan.lens, plan.order, plan.gstart, plan.obase)
        scratch = (np.int64(plan.ostride), plan.active, out, last, state, mid[0], mid[1], barrier)
        sizes = (d, oc, n, plan.steps, self.blocks_per_dir, self.units, desc.reverse)
        modes = (desc.linear_before_reset, desc.origin_mode, desc.act, desc.gate)
        launcher.launch_grid(
            SOURCE,
            "gru_recurrence",
            d * self.blocks_per_dir,
            THREADS["gru_recurrence"],
            (*data, *scratch, *(np.int32(v) for v in sizes + modes)),
            shared_bytes=self.shared_bytes,
            cooperative=True,
        )


@dataclass
class _Plan:
    """Where each sentence's words are, in the order of decreasing length (a call's; small
    int arrays uploaded per call)."""

    n: int
    steps: int
    words: int
    ostride: int
    lens: Any
    order: Any
    gstart: Any
    obase: Any
    active: Any
    xrows: Any


def _plan(launcher: Launcher, layout: str, lens: np.ndarray, padded_steps: int) -> _Plan:
    n = len(lens)
    order = np.argsort(-lens, kind="stable").astype(np.int32)
    sorted_lens = lens[order].astype(np.int32)
    steps = int(sorted_lens[0]) if n else 0
    gstart = np.zeros(n, np.int64)
    np.cumsum(sorted_lens[:-1], out=gstart[1:])
    if layout == "lod":
        starts = np.zeros(n, np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        obase, ostride = starts[order], 1
    elif layout == "tnc":
        obase, ostride = order.astype(np.int64), n
    else:
        obase, ostride = order.astype(np.int64) * padded_steps, 1
    words = int(sorted_lens.sum())
    # The x row of every word that exists, sentence by sentence in gate order.
    xrows = np.repeat(obase - gstart * ostride, sorted_lens) + np.arange(words) * ostride
    active = (sorted_lens[None, :] > np.arange(steps)[:, None]).sum(axis=1).astype(np.int32)
    if not steps:
        active = np.zeros(1, np.int32)  # no step reads it; a device array of 0 bytes is none
    up = launcher.upload
    return _Plan(
        n,
        steps,
        words,
        ostride,
        *map(up, (sorted_lens, order, gstart, obase, active)),
        up(xrows if words else np.zeros(1, np.int64)),
    )


def _f32(launcher: Launcher, a: object, name: str) -> Any:
    arr = same_device(OP, launcher, name, a)
    args.float_dtype(OP, name, arr, ("float32",))
    return args.contiguous(OP, name, arr)


class GRUKernel:
    """fusion_gru with its weights and attributes fixed (a Session's GRU node), as
    fusebridge.kernels.GRUKernel: calls take x, h0, offsets, seq_lens, return_last, out."""

    def __init__(
        self,
        weights: CudaGRUWeights,
        *,
        layout: str = "lod",
        direction: str = "forward",
        linear_before_reset: bool = False,
        origin_mode: bool = True,
        activation: str = "tanh",
        gate_activation: str = "sigmoid",
    ) -> None:
        if not isinstance(weights, CudaGRUWeights):
            raise ArgumentTypeError(
                f"{OP}: weights must come from fusebridge.cuda.pack_gru_weights, got "
                f"{type(weights).__name__}"
            )
        layout, direction = layout_and_direction(layout, direction, weights.directions)
        d = weights.directions
        self.weights, self.layout = weights, layout
        self.desc = CudaGRUDescriptor(
            device=weights.device,
            layout=layout,
            ic=weights.input_size,
            oc=weights.hidden_size,
            directions=d,
            reverse=direction == "reverse",
            linear_before_reset=as_flag(linear_before_reset, OP, "linear_before_reset"),
            origin_mode=as_flag(origin_mode, OP, "origin_mode"),
            act=ACTIVATIONS[as_choice(activation, ACTIVATIONS, OP, "activation")],
            gate=ACTIVATIONS[as_choice(gate_activation, ACTIVATIONS, OP, "gate_activation")],
            projection=weights.wx is not None,
        )

    def __call__(
        self,
        x: Any,
        *,
        h0: Any = None,
        offsets: object = None,
        seq_lens: object = None,
        return_last: bool = False,
        out: Any = None,
    ) -> Any:
        launcher, x = launcher_for(OP, "x", x)
        if launcher.device != self.weights.device:
            raise ArgumentTypeError(
                f"{OP}: x is on {launcher.device}, the weights on {self.weights.device}"
            )
        x = _f32(launcher, x, "x")
        w = self.weights
        d, ic, oc = w.directions, w.input_size, w.hidden_size
        offsets = _lengths_on_host(launcher, offsets)
        seq_lens = _lengths_on_host(launcher, seq_lens)
        lens, steps = _sentences(x, self.layout, offsets, seq_lens)
        if x.shape[-1] != ic:
            raise ArgumentError(f"{OP}: x has {x.shape[-1]} features, the weights expect IC = {ic}")
        n = len(lens)
        if h0 is not None:
            h0 = _f32(launcher, h0, "h0")
            if tuple(h0.shape) == (n, oc) and d == 1:
                h0 = h0.reshape(1, n, oc)
            if tuple(h0.shape) != (d, n, oc):
                raise ArgumentError(f"{OP}: h0 must have shape {(d, n, oc)}, got {h0.shape}")
        shape = tuple(x.shape[:-1]) + (d * oc,)
        # Padding is zero: written once here, never touched by the kernels.
        zeros = self.layout != "lod"
        if out is None:
            out = args.new_array(launcher, shape, np.float32, OP, "out", zeros=zeros)
        else:
            out = args.output(launcher, out, shape, "float32", OP, x)
            if zeros:
                out.fill(0)
        return_last = as_flag(return_last, OP, "return_last")
        last = args.new_array(launcher, (d, n, oc), np.float32, OP, "last") if return_last else None
        prim = args.cached(OP, self.desc, lambda desc: GRUPrimitive(desc, launcher))
        plan = _plan(launcher, self.layout, np.asarray(lens, np.int64), steps)
        if n:
            prim.forward(plan, x, w, h0, out, last)
        return (out, last) if return_last else out


def fusion_gru(
    x: Any,
    wx: Any,
    wh: Any = None,
    bias: Any = None,
    *,
    bias_h: Any = None,
    h0: Any = None,
    offsets: object = None,
    seq_lens: object = None,
    layout: str = "lod",
    direction: str = "forward",
    linear_before_reset: bool = False,
    origin_mode: bool = True,
    activation: str = "tanh",
    gate_activation: str = "sigmoid",
    return_last: bool = False,
    out: Any = None,
) -> Any:
    """fusebridge.kernels.fusion_gru on the device: x (and h0, out) device arrays, offsets or
    seq_lens host integers; weights canonical (uploaded per call) or one CudaGRUWeights."""
    if isinstance(wx, CudaGRUWeights):
        if wh is not None or bias is not None or bias_h is not None:
            raise ArgumentError(f"{OP}: give CudaGRUWeights alone, or raw wx, wh, bias, bias_h")
        weights = wx
    else:
        if wh is None:
            raise ArgumentError(f"{OP}: wh is required with raw weights")
        launcher, _ = launcher_for(OP, "x", x)
        weights = _pack_on(launcher, wx, wh, bias, bias_h)
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
