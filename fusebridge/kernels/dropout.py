"""Standalone dropout on the compiled core, following the bit contract of docs/dropout.md:
element idx of the (whole) mask keeps iff Philox4x32-10 word
(seed, offset, idx) > (2^32 - 1) * p."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import (
    FLOAT_DTYPES,
    as_flag,
    as_float_array,
    as_int,
    as_output,
    as_probability,
    as_shape,
    as_u64,
    buffer_bytes,
    check_counter_space,
    contiguous,
    new_array,
    raw_view,
)

MODES = {"upscale_in_train": 0, "downgrade_in_infer": 1}
# Outputs this large bypass the caches (non-temporal stores): they would not fit anyway, and
# skipping the read-for-ownership saves a third of the memory traffic.
STREAM_MIN_BYTES = 8 << 20
# The descriptor's dtype of each float dtype (looked up once: an enum call costs microseconds).
_DTYPES = {dtype: core._C.DType(code) for dtype, code in FLOAT_DTYPES.items()}


# Everything a dropout primitive is created from (the C++ DropoutDesc, bound: dropout.hpp
# declares its fields); seed and offset are not in it: they are arguments of each execution.
DropoutDescriptor = core._C.DropoutDescriptor


def _mode(mode: object, op: str) -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise ArgumentError(f"{op}: mode must be one of {sorted(MODES)}, got {mode!r}")
    return mode


def _shard(op: str, shape: tuple[int, ...], shard: object) -> tuple[tuple, tuple]:
    """(global_shape, start) of the block `shape`, checked: inside the whole tensor, whose
    elements the bit contract's 64-bit counter can number."""
    if shard is None:
        check_counter_space(shape, op, "the tensor")
        return shape, (0,) * len(shape)
    if not isinstance(shard, Sequence) or len(shard) != 2:
        raise ArgumentTypeError(f"{op}: shard must be (global_shape, start), got {shard!r}")
    global_shape = as_shape(shard[0], op, "shard global_shape", len(shape))
    start = as_shape(shard[1], op, "shard start", len(shape))
    for d, (n, g, s) in enumerate(zip(shape, global_shape, start)):
        if s + n > g:
            raise ArgumentError(
                f"{op}: shard lies outside its global shape on axis {d}: block of {n} at "
                f"{s} in a dimension of {g} (shape {shape}, global_shape {global_shape}, "
                f"start {start})"
            )
    check_counter_space(global_shape, op, "the shard's global_shape")
    return global_shape, start


def _mask_shape(op: str, global_shape: tuple, axes: object, noise_shape: object) -> tuple:
    nd = len(global_shape)
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    if axes is None:
        axes = ()
    if noise_shape is not None:
        if len(axes):
            raise ArgumentError(f"{op}: give axes or noise_shape, not both")
        mask = as_shape(noise_shape, op, "noise_shape", nd)
        if any(m not in (g, 1) for m, g in zip(mask, global_shape)):
            raise ArgumentError(
                f"{op}: noise_shape {mask} is not broadcastable to the data shape "
                f"{global_shape}: each dimension must equal the data's or be 1"
            )
        return mask
    if not isinstance(axes, Sequence):
        raise ArgumentTypeError(f"{op}: axes must be a sequence of integers, got {axes!r}")
    shared = set()
    for a in axes:
        a = as_int(a, op, "axes")
        if not -nd <= a < nd:
            raise ArgumentError(f"{op}: axis {a} is out of range for rank {nd}")
        if a % nd in shared:
            raise ArgumentError(f"{op}: axis {a} is repeated in axes {tuple(axes)}")
        shared.add(a % nd)
    return tuple(1 if d in shared else g for d, g in enumerate(global_shape))


def dropout_fields(op: str, p: object, mode: object, training: object) -> dict[str, object]:
    """The checked dropout fields of a descriptor (this one's and the fused ops'): p, mode,
    training, the ISA current now and the streaming threshold."""
    return {
        "p": as_probability(p, op),
        "mode": core._C.DropoutMode[_mode(mode, op)],
        "training": as_flag(training, op, "training"),
        "isa": core._C.Isa[core.isa()],
        "stream_min_bytes": STREAM_MIN_BYTES,
    }


def _primitive(op, shape, dtype, p, mode, training, axes, noise_shape, shard) -> object:
    global_shape, start = _shard(op, shape, shard)
    mask_shape = _mask_shape(op, global_shape, axes, noise_shape)
    # The mask shape has 1 where the data may have 0 (a shared axis of an empty tensor), so it
    # is checked on its own; so is the size of the block's packed mask, which may be made here.
    check_counter_space(mask_shape, op, "the whole mask shape")
    local_mask = [1 if m == 1 else n for m, n in zip(mask_shape, shape)]
    buffer_bytes((-(-math.prod(local_mask) // 8),), 1, op, "the packed mask")
    desc = DropoutDescriptor(
        shape=shape,
        global_shape=global_shape,
        start=start,
        mask_shape=mask_shape,
        dtype=_DTYPES[dtype],
        **dropout_fields(op, p, mode, training),
    )
    return core._C.primitive(desc)


def _new_mask(prim: object, op: str) -> np.ndarray:
    return new_array((prim.mask_bytes,), np.uint8, op, "the mask", zeros=True)


def dropout(
    x: np.ndarray,
    p: float,
    *,
    seed: int,
    offset: int = 0,
    axes: Sequence[int] = (),
    noise_shape: Sequence[int] | None = None,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Dropout of x: y, or (y, packed mask) with return_mask. out=x works in place."""
    op = "dropout"
    x = as_float_array(x, op, "x")
    seed, offset = as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
    return_mask = as_flag(return_mask, op, "return_mask")
    prim = _primitive(op, x.shape, x.dtype, p, mode, training, axes, noise_shape, shard)
    y = as_output(out, x.shape, x.dtype, x, op)
    x = contiguous(x, op, "x")
    mask = _new_mask(prim, op) if return_mask else None
    prim.forward(raw_view(x), raw_view(y), mask, seed, offset)
    return (y, mask) if return_mask else y


def dropout_backward(
    dy: np.ndarray,
    p: float,
    *,
    mask: np.ndarray | None = None,
    seed: int | None = None,
    offset: int = 0,
    axes: Sequence[int] = (),
    noise_shape: Sequence[int] | None = None,
    mode: str = "upscale_in_train",
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """dx from the packed mask the forward kept, or, without one, from the bits recomputed
    from seed and offset (no mask stored at all)."""
    op = "dropout_backward"
    dy = as_float_array(dy, op, "dy")
    if (mask is None) == (seed is None):
        raise ArgumentError(
            f"{op}: give exactly one of mask= (kept by the forward) or seed= (to recompute it)"
        )
    prim = _primitive(op, dy.shape, dy.dtype, p, mode, True, axes, noise_shape, shard)
    dx = as_output(out, dy.shape, dy.dtype, dy, op)
    dy = contiguous(dy, op, "dy")
    if mask is None:
        prim.forward(
            raw_view(dy), raw_view(dx), None, as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
        )
        return dx
    if not isinstance(mask, np.ndarray) or mask.dtype != np.uint8:
        raise ArgumentTypeError(
            f"{op}: mask must be the uint8 array dropout returned, got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    if mask.ndim != 1 or mask.size != prim.mask_bytes:
        raise ArgumentError(
            f"{op}: mask must be 1-D with {prim.mask_bytes} bytes for dy of shape "
            f"{dy.shape} and this mask sharing, got shape {mask.shape}"
        )
    prim.apply_mask(raw_view(dy), raw_view(dx), contiguous(mask, op, "mask"))
    return dx


def dropout_mask(
    shape: Sequence[int],
    p: float,
    *,
    seed: int,
    offset: int = 0,
    shard: tuple[Sequence[int], Sequence[int]] | None = None,
) -> np.ndarray:
    """The packed keep mask alone for a mask of `shape` (a block of the whole with shard)."""
    op = "dropout_mask"
    shape = as_shape(shape, op, "shape")
    seed, offset = as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
    # The mask is all that is made: no data array, float32 only names a descriptor.
    prim = _primitive(op, shape, np.dtype(np.float32), p, "upscale_in_train", True, (), None, shard)
    mask = _new_mask(prim, op)
    prim.generate_mask(mask, seed, offset)
    return mask
