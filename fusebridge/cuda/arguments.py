"""What the cuda engine's ops share: device arrays checked and made, seed and offset as host
scalars or device scalars, index maps for the kernels, and the dropout decision (the CPU
primitive's, so that both engines keep the same elements with the same scale)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fusebridge.cuda.device import Launcher, same_device
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.arguments import as_u64, buffer_bytes
from fusebridge.kernels.primitive_cache import CACHE

# The kernels' dtype suffixes; the codes are csrc/common.cuh's DataType.
SUFFIX = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
MAX_DIMS = 8  # csrc/common.cuh's kMaxDims
KEEP_SOME, KEEP_ALL, KEEP_NONE = 0, 1, 2
NO_STREAM = (np.uint64(0), np.uint64(0), None, None)  # kernels' stream arguments, bits unused


def cached(op: str, desc: Hashable, create: Callable[[Hashable], Any]) -> Any:
    """The primitive of `desc` from the cpu engine's primitive cache; a layout its creation
    refuses (index_map) is reported as the op's error."""
    try:
        return CACHE.get(desc, create)
    except ArgumentError as exc:
        raise ArgumentError(f"{op}: {exc}") from None


def address(a: Any) -> int:
    """The data pointer of a device array (or of a numpy array under emulation)."""
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0]
    return a.data.ptr


_NAMES = {np.dtype(name): name for name in ("float32", "float16", "uint8", "uint64", "int64")}
_NAMES[np.dtype(ml_dtypes.bfloat16)] = "bfloat16"


def dtype_name(x: Any) -> str:
    """x's dtype by name (looked up: numpy's str(dtype) costs microseconds a call)."""
    return _NAMES.get(x.dtype) or str(x.dtype)


def float_dtype(op: str, name: str, x: Any, allowed: Sequence[str] = tuple(SUFFIX)) -> str:
    dtype = dtype_name(x)
    if dtype not in allowed:
        raise ArgumentTypeError(f"{op}: {name} must be {' or '.join(allowed)}, got {dtype}")
    return dtype


def contiguous(op: str, name: str, x: Any) -> Any:
    if not x.flags.c_contiguous:
        raise ArgumentError(
            f"{op}: {name} must be C-contiguous on the device (copy it with "
            "ascontiguousarray first: the engine makes no hidden copies)"
        )
    return x


def new_array(
    launcher: Launcher, shape: Sequence[int], dtype: object, op: str, what: str, *, zeros=False
) -> Any:
    """A fresh device array, its size checked first and a failed allocation reported as the
    op's error."""
    nbytes = buffer_bytes(shape, np.dtype(dtype).itemsize, op, what)
    try:
        return launcher.empty(shape, dtype, zeros=zeros)
    except MemoryError:  # CuPy's OutOfMemoryError derives from it
        raise ArgumentError(
            f"{op}: {what} of shape {tuple(shape)} needs {nbytes} bytes, more than "
            f"{launcher.device} can allocate"
        ) from None


def _span(a: Any) -> tuple[int, int]:
    start = address(a)
    return start, start + a.size * a.itemsize


def output(
    launcher: Launcher,
    out: object,
    shape: Sequence[int],
    dtype: str,
    op: str,
    *inputs: Any,
    in_place: Any = None,
) -> Any:
    """A fresh output, or `out` checked: C-contiguous, of the shape and dtype, on the device,
    and overlapping no input except `in_place` exactly (same start, same shape)."""
    if out is None:
        return new_array(launcher, shape, dtype, op, "the output")
    y = same_device(op, launcher, "out", out)
    if tuple(y.shape) != tuple(shape) or dtype_name(y) != dtype:
        raise ArgumentError(
            f"{op}: out must have shape {tuple(shape)} and dtype {dtype}, got "
            f"{tuple(y.shape)} {y.dtype}"
        )
    contiguous(op, "out", y)
    lo, hi = _span(y)
    for x in (*inputs, *(() if in_place is None else (in_place,))):
        if x is None or x.size == 0 or y.size == 0:
            continue
        if x is in_place and address(x) == lo and tuple(x.shape) == tuple(y.shape):
            continue
        xlo, xhi = _span(x)
        if xlo < hi and lo < xhi:
            what = "the input" if x is in_place else "an input"
            raise ArgumentError(f"{op}: out overlaps {what} without being the same memory")
    return y


def counter(launcher: Launcher, value: object, op: str, name: str) -> tuple[int, Any]:
    """(host value, device pointer array or None): a Python int in [-2^63, 2^64), or a
    one-element uint64/int64 device array that the kernel reads when it runs (so a captured
    CUDA graph replays with whatever it holds then)."""
    on_device = hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__")
    # A 0-d numpy array has __dlpack__ too, but it is a host integer (as the cpu engine takes).
    if on_device and not (isinstance(value, np.ndarray) and value.ndim == 0):
        arr = same_device(op, launcher, name, value)
        if arr.size != 1 or dtype_name(arr) not in ("uint64", "int64"):
            raise ArgumentError(
                f"{op}: {name} as a device array must hold one uint64 or int64, got shape "
                f"{tuple(arr.shape)} {arr.dtype}"
            )
        return 0, arr
    return as_u64(value, op, name), None


@dataclass(frozen=True)
class IndexMap:
    """csrc/common.cuh's IndexMap: local linear index -> base + sum(coord * stride)."""

    base: int
    nd: int
    dims: Any  # device int64[2 * MAX_DIMS]: lengths, then strides, innermost first


def index_map(launcher: Launcher, dims: Sequence[tuple[int, int]], base: int = 0) -> IndexMap:
    """The map of (length, stride) dimensions, outermost first, merged where they chain; the
    identity (nd 0) when the merged map is one run of stride 1."""
    merged: list[list[int]] = []
    for length, stride in dims:
        if length == 1:
            continue
        if merged and merged[-1][1] == length * stride:
            merged[-1] = [merged[-1][0] * length, stride]
        else:
            merged.append([length, stride])
    if not merged or (len(merged) == 1 and merged[0][1] == 1):
        merged = []
    if len(merged) > MAX_DIMS:
        raise ArgumentError(
            f"the layout {tuple(dims)} (length, stride) needs {len(merged)} dimensions after "
            f"merging; the cuda engine's index maps hold {MAX_DIMS}"
        )
    host = np.zeros(2 * MAX_DIMS, np.int64)
    for d, (length, stride) in enumerate(reversed(merged)):
        host[d], host[MAX_DIMS + d] = length, stride
    return IndexMap(base, len(merged), launcher.upload(host))


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return strides[::-1]


def shard_map(
    launcher: Launcher, shape: Sequence[int], global_shape: Sequence[int], start: Sequence[int]
) -> IndexMap:
    """Local flat index of a block -> flat index in the whole tensor (the bit contract's
    idx, for data and mask of the same shape)."""
    strides = row_major_strides(global_shape)
    base = sum(s * g for s, g in zip(start, strides))
    return index_map(launcher, list(zip(shape, strides)), base)


@dataclass(frozen=True)
class Decision:
    """Which elements a dropout keeps and the factor applied to them: the CPU primitive's
    (csrc/dropout.cpp), float32 scale included."""

    rule: int
    threshold: int
    scale: float

    @staticmethod
    def of(p: float, mode: str, training: bool) -> Decision:
        upscale = mode == "upscale_in_train"
        if not training:
            return Decision(KEEP_ALL, 0, float(np.float32(1.0 if upscale else 1.0 - p)))
        if p == 0.0:
            return Decision(KEEP_ALL, 0, 1.0)
        if p == 1.0:
            return Decision(KEEP_NONE, 0, 1.0)
        scale = 1.0 / (1.0 - p) if upscale else 1.0
        # philox.hpp's keep_threshold: keep iff r > floor((2^32 - 1) * p), p a float32.
        return Decision(KEEP_SOME, int(4294967295.0 * p), float(np.float32(scale)))

    def args(self) -> tuple:
        return np.uint32(self.threshold), np.int32(self.rule), np.float32(self.scale)


def vectorizable(*arrays: Any, itemsize: int) -> bool:
    """Whether every array starts on a 4-element boundary, so groups of 4 move as one access."""
    return all(a is None or address(a) % (4 * itemsize) == 0 for a in arrays)


def mask_words(launcher: Launcher, numel: int, op: str, *, zeros: bool = False) -> Any:
    """Room for a packed mask of numel bits in whole 32-bit words (the kernels store words);
    `mask_view` gives the caller its ceil(numel / 8) bytes."""
    return new_array(launcher, (-(-numel // 32),), np.uint32, op, "the mask", zeros=zeros)


def mask_view(words: Any, numel: int) -> Any:
    return words.view(np.uint8)[: -(-numel // 8)]


def as_mask(launcher: Launcher, mask: object, nbytes: int, op: str) -> Any:
    m = same_device(op, launcher, "mask", mask)
    if dtype_name(m) != "uint8" or m.ndim != 1 or m.size != nbytes:
        raise ArgumentError(
            f"{op}: mask must be the 1-D uint8 array of {nbytes} bytes the forward returned, "
            f"got {tuple(m.shape)} {m.dtype}"
        )
    return contiguous(op, "mask", m)
