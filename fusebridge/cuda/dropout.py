"""Standalone dropout on the cuda engine, with fusebridge.kernels' signatures and bits: element
idx of the whole mask keeps iff Philox4x32-10 word (seed, offset, idx) > (2^32 - 1) * p
(docs/dropout.md). Inputs and outputs are device arrays (CuPy); seed and offset are host ints
or one-element device arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebridge.cuda import arguments as args
from fusebridge.cuda.device import Launcher, current_launcher, launcher_for
from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_flag, as_probability, as_shape, check_counter_space
from fusebridge.kernels.dropout import _mask_shape, _mode, _shard

SOURCE = "dropout.cu"


@dataclass(frozen=True)
class CudaDropoutDescriptor:
    """What a cuda dropout primitive is built from (fusebridge.kernels.DropoutDescriptor's
    fields, plus the device); seed and offset are arguments of each call."""

    device: str
    shape: tuple[int, ...]
    global_shape: tuple[int, ...]
    start: tuple[int, ...]
    mask_shape: tuple[int, ...]
    dtype: str
    p: float
    mode: str
    training: bool


class DropoutPrimitive:
    """The geometry of one descriptor on its device: the map from local mask elements to the
    whole mask's indices (generation) and, when the mask is shared over axes, from data
    elements to local mask bits (application)."""

    def __init__(self, desc: CudaDropoutDescriptor, launcher: Launcher) -> None:
        self.desc, self.launcher = desc, launcher
        self.decision = args.Decision.of(desc.p, desc.mode, desc.training)
        local_mask = [1 if m == 1 else n for m, n in zip(desc.mask_shape, desc.shape)]
        self.numel, self.mask_numel = math.prod(desc.shape), math.prod(local_mask)
        self.mask_bytes = -(-self.mask_numel // 8)
        self.direct = tuple(local_mask) == desc.shape
        strides = args.row_major_strides(desc.mask_shape)
        shared = [m == 1 for m in desc.mask_shape]
        base = sum(s * g for s, g, sh in zip(desc.start, strides, shared) if not sh)
        gen = [(n, g) for n, g, sh in zip(local_mask, strides, shared) if not sh]
        self.generate_map = args.index_map(launcher, gen, base)
        local = args.row_major_strides(local_mask)
        app = [(n, 0 if m == 1 else s) for n, m, s in zip(desc.shape, local_mask, local)]
        self.apply_map = args.index_map(launcher, app)
        self.suffix = args.SUFFIX[desc.dtype]
        self.itemsize = np.dtype(desc.dtype).itemsize
        self.decision_args = self.decision.args()  # numpy scalars, made once

    def forward(self, x, y, words, stream, *, bias=None, bias_n=1) -> None:
        """The fused generate-and-apply kernel: y = dropout(x (+ bias)) over the local
        elements, or (x = y = None) the mask alone over the local mask's elements; bits to
        `words` when given. Valid for the data only when the mask is not shared."""
        n = self.mask_numel if x is None else self.numel
        if n == 0:
            return
        m = self.generate_map
        self.launcher.launch(
            SOURCE,
            f"dropout_forward_{self.suffix}",
            -(-n // 128),
            (
                x,
                y,
                words,
                np.int64(n),
                np.int64(m.base),
                np.int32(m.nd),
                m.dims,
                bias,
                np.int64(bias_n),
                *stream,
                *self.decision_args,
                np.int32(args.vectorizable(x, y, itemsize=self.itemsize)),
            ),
        )

    def apply(self, x, y, mask_bytes) -> None:
        """y = x * scale where the local packed mask keeps, 0 elsewhere."""
        if self.numel == 0:
            return
        m = self.apply_map
        self.launcher.launch(
            SOURCE,
            f"dropout_apply_{self.suffix}",
            -(-self.numel // 128),
            (
                x,
                y,
                mask_bytes,
                np.int64(self.numel),
                np.int32(m.nd),
                m.dims,
                np.float32(self.decision.scale),
                np.int32(args.vectorizable(x, y, itemsize=self.itemsize)),
            ),
        )


def primitive(
    launcher: Launcher,
    op: str,
    shape: tuple[int, ...],
    dtype: str,
    p: object,
    mode: object,
    training: object,
    axes: object = (),
    noise_shape: object = None,
    shard: object = None,
) -> DropoutPrimitive:
    """The cached primitive for these arguments, every one checked as the cpu engine does."""
    global_shape, start = _shard(op, shape, shard)
    mask_shape = _mask_shape(op, global_shape, axes, noise_shape)
    check_counter_space(mask_shape, op, "the whole mask shape")
    desc = CudaDropoutDescriptor(
        device=launcher.device,
        shape=tuple(shape),
        global_shape=tuple(global_shape),
        start=tuple(start),
        mask_shape=tuple(mask_shape),
        dtype=dtype,
        p=as_probability(p, op),
        mode=_mode(mode, op),
        training=as_flag(training, op, "training"),
    )
    return args.cached(op, desc, lambda d: DropoutPrimitive(d, launcher))


def stream_args(launcher: Launcher, seed: object, offset: object, op: str) -> tuple:
    """(seed, offset, seed pointer, offset pointer) as the kernels take them."""
    seed_value, seed_ptr = args.counter(launcher, seed, op, "seed")
    offset_value, offset_ptr = args.counter(launcher, offset, op, "offset")
    return np.uint64(seed_value), np.uint64(offset_value), seed_ptr, offset_ptr


def _run(prim: DropoutPrimitive, x, y, stream, want_mask: bool, op: str) -> Any:
    """dropout of x into y; the packed mask (bytes) when wanted."""
    launcher = prim.launcher
    words = None
    if want_mask or not prim.direct:
        words = args.mask_words(launcher, prim.mask_numel, op)
    if prim.direct:
        prim.forward(x, y, words, stream)
    else:  # the shared mask first, then the data reads it
        prim.forward(None, None, words, stream)
        prim.apply(x, y, args.mask_view(words, prim.mask_numel))
    return args.mask_view(words, prim.mask_numel) if want_mask else None


def dropout(
    x: Any,
    p: float,
    *,
    seed: int | Any,
    offset: int | Any = 0,
    axes: Sequence[int] = (),
    noise_shape: Sequence[int] | None = None,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
    out: Any = None,
) -> Any:
    """Dropout of device array x: y, or (y, packed mask) with return_mask; out=x works in
    place. The bits are fusebridge.kernels.dropout's for the same arguments."""
    op = "dropout"
    launcher, x = launcher_for(op, "x", x)
    dtype = args.float_dtype(op, "x", x)
    args.contiguous(op, "x", x)
    return_mask = as_flag(return_mask, op, "return_mask")
    prim = primitive(
        launcher, op, tuple(x.shape), dtype, p, mode, training, axes, noise_shape, shard
    )
    stream = stream_args(launcher, seed, offset, op)
    y = args.output(launcher, out, x.shape, dtype, op, in_place=x)
    mask = _run(prim, x, y, stream, return_mask, op)
    return (y, mask) if return_mask else y


def dropout_backward(
    dy: Any,
    p: float,
    *,
    mask: Any = None,
    seed: int | Any = None,
    offset: int | Any = 0,
    axes: Sequence[int] = (),
    noise_shape: Sequence[int] | None = None,
    mode: str = "upscale_in_train",
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
    out: Any = None,
) -> Any:
    """dx from the packed mask the forward kept, or, without one, from the bits recomputed
    from seed and offset (no mask stored at all). out=dy works in place."""
    op = "dropout_backward"
    launcher, dy = launcher_for(op, "dy", dy)
    dtype = args.float_dtype(op, "dy", dy)
    args.contiguous(op, "dy", dy)
    if (mask is None) == (seed is None):
        raise ArgumentError(
            f"{op}: give exactly one of mask= (kept by the forward) or seed= (to recompute it)"
        )
    prim = primitive(launcher, op, tuple(dy.shape), dtype, p, mode, True, axes, noise_shape, shard)
    if mask is None:
        stream = stream_args(launcher, seed, offset, op)
        dx = args.output(launcher, out, dy.shape, dtype, op, in_place=dy)
        _run(prim, dy, dx, stream, False, op)
        return dx
    mask = args.as_mask(launcher, mask, prim.mask_bytes, op)
    dx = args.output(launcher, out, dy.shape, dtype, op, mask, in_place=dy)
    prim.apply(dy, dx, mask)
    return dx


def dropout_mask(
    shape: Sequence[int],
    p: float,
    *,
    seed: int | Any,
    offset: int | Any = 0,
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
    device: int | None = None,
) -> Any:
    """The packed keep mask alone for a mask of `shape` (a block of the whole with shard), on
    CUDA device `device` (default: CuPy's current one)."""
    op = "dropout_mask"
    shape = as_shape(shape, op, "shape")
    launcher = current_launcher(device)
    prim = primitive(launcher, op, shape, "float32", p, "upscale_in_train", True, (), None, shard)
    stream = stream_args(launcher, seed, offset, op)
    words = args.mask_words(launcher, prim.mask_numel, op)
    prim.forward(None, None, words, stream)
    return args.mask_view(words, prim.mask_numel)
