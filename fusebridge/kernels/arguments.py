"""Checks shared by the kernels' Python faces: each names the op, the argument and what was
expected, and raises a fusebridge error before any work is done."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence

import ml_dtypes
import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError

U64_MASK = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
# No buffer larger than this is ever made: 128 TiB is the whole user address space of x86-64
# and AArch64 Linux with 48-bit virtual addresses, so such a size is a mistake, never a
# request that could be met. It also keeps every size the compiled core derives from it (bits
# of a mask, bytes of 8-byte items) far below int64's range.
MAX_BUFFER_BYTES = 1 << 47
FLOAT_DTYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(ml_dtypes.bfloat16): 3,
}


def as_int(value: object, op: str, name: str) -> int:
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{op}: {name} must be an integer, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{op}: {name} must be an integer, got {type(value).__name__}"
        ) from None


def as_flag(value: object, op: str, name: str) -> bool:
    """A boolean parameter: True or False (numpy's too), or the integers 0 and 1 (as ONNX and
    Paddle attributes spell them: linear_before_reset=1). Nothing else: bool("False") is True,
    so a string, a float, None or 2 is refused instead of read as a truth value."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        if value in (0, 1):
            return bool(value)
        raise ArgumentError(f"{op}: {name} must be True or False (or 1 or 0), got {value}")
    raise ArgumentTypeError(
        f"{op}: {name} must be True or False (or 1 or 0), got {type(value).__name__} {value!r}"
    )


def as_choice(value: object, choices: Iterable[str], op: str, name: str) -> str:
    """value, when it is one of the names in choices."""
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(f"{op}: {name} must be one of {tuple(choices)}, got {value!r}")
    return value


def as_u64(value: object, op: str, name: str) -> int:
    """A 64-bit pattern from an int in [-2^63, 2^64); negatives are two's complement."""
    v = as_int(value, op, name)
    if not -(1 << 63) <= v < (1 << 64):
        raise ArgumentError(f"{op}: {name} must lie in [-2**63, 2**64), got {v}")
    return v & U64_MASK


def is_probability(p: float) -> bool:
    """p in [0, 1], NaN not (docs/dropout.md: p = 1 drops everything, with no division)."""
    return not math.isnan(p) and 0.0 <= p <= 1.0


def as_probability(p: object, op: str, name: str = "p") -> float:
    """p rounded to float32 (the precision the bit contract compares in)."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{op}: {name} must be a real number, got {type(p).__name__}")
    if not is_probability(p):
        raise ArgumentError(f"{op}: {name} must lie in [0, 1], got {p}")
    return float(np.float32(p))


def as_float_array(x: object, op: str, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(
            f"{op}: {name} must be float32, float16, bfloat16 or float64, got {arr.dtype}"
        )
    return arr


def as_shape(value: object, op: str, name: str, ndim: int | None = None) -> tuple[int, ...]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{op}: {name} must be a sequence of integers, got {value!r}")
    shape = tuple(as_int(v, op, name) for v in value)
    if ndim is not None and len(shape) != ndim:
        raise ArgumentError(f"{op}: {name} must have {ndim} entries, got {shape}")
    if any(v < 0 for v in shape):
        raise ArgumentError(f"{op}: {name} must not be negative, got {shape}")
    return shape


def buffer_bytes(shape: Sequence[int], itemsize: int, op: str, what: str) -> int:
    """Bytes of an array of `shape`, computed with Python ints (no wrap-around), refused when
    above MAX_BUFFER_BYTES. Zero dimensions do not shrink the bound: numpy refuses
    np.empty((2**40, 2**40, 0)) as well, and a shape that large is a mistake either way."""
    extent = math.prod(d for d in shape if d) * itemsize
    if extent > MAX_BUFFER_BYTES:
        raise ArgumentError(
            f"{op}: {what} of shape {tuple(shape)} would take {extent} bytes "
            f"({itemsize}-byte items), more than any buffer can hold (2**47 bytes)"
        )
    return math.prod(shape) * itemsize


def new_array(
    shape: Sequence[int], dtype: np.dtype, op: str, what: str, *, zeros: bool = False
) -> np.ndarray:
    """A fresh C-contiguous array (uninitialized, or zeros) whose shape comes from the
    arguments: its size checked first, and an allocation the process cannot make reported as
    the op's error."""
    dtype = np.dtype(dtype)
    nbytes = buffer_bytes(shape, dtype.itemsize, op, what)
    try:
        return np.zeros(shape, dtype) if zeros else np.empty(shape, dtype)
    except MemoryError:
        raise ArgumentError(
            f"{op}: {what} of shape {tuple(shape)} needs {nbytes} bytes, more than this process "
            "can allocate"
        ) from None


ALIGN_BYTES = 64  # csrc/aligned.hpp's kAlignBytes


def aligned_copy(a: np.ndarray, dtype: object) -> np.ndarray:
    """A C-contiguous copy of `a` as `dtype` whose data starts on a 64-byte boundary, for arrays
    the kernels stream many times (packed weights): numpy places its data 16 bytes past one,
    where a 64-byte vector load reads two cache lines (csrc/aligned.hpp)."""
    dtype = np.dtype(dtype)
    nbytes = a.size * dtype.itemsize
    raw = np.empty(nbytes + ALIGN_BYTES, np.uint8)
    start = -raw.ctypes.data % ALIGN_BYTES
    out = raw[start : start + nbytes].view(dtype).reshape(a.shape)
    np.copyto(out, a, casting="unsafe")
    return out


def contiguous(
    a: np.ndarray, op: str, name: str, dtype: object = None, *, copy: bool = False
) -> np.ndarray:
    """`a` as a C-contiguous array of `dtype` (default: its own): `a` itself when it already is
    one (unless copy), else a copy made by new_array (a broadcast view of a few bytes can stand
    for terabytes)."""
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if a.flags.c_contiguous and a.dtype == dtype and not copy:
        return a
    out = new_array(a.shape, dtype, op, name)
    np.copyto(out, a, casting="unsafe")
    return out


def check_counter_space(shape: Sequence[int], op: str, what: str) -> None:
    """The bit contract numbers the elements of a whole tensor (its mask shape) with a 64-bit
    Philox counter, and the compiled core holds those indices as int64: a tensor, or a shard's
    global shape, with more elements than that has indices the contract cannot give."""
    count = math.prod(shape)
    if count > INT64_MAX:
        raise ArgumentError(
            f"{op}: {what} {tuple(shape)} has {count} elements; dropout numbers the elements "
            "of the whole tensor with a 64-bit counter, so at most 2**63 - 1 of them"
        )


def as_output(
    out: object, shape: tuple[int, ...], dtype: np.dtype, source: np.ndarray, op: str
) -> np.ndarray:
    """A fresh C-contiguous array of this shape and dtype, or `out` checked; out may be exactly
    `source` (in place) but must not overlap it otherwise."""
    if out is None:
        return new_array(shape, dtype, op, "the output")
    if not isinstance(out, np.ndarray):
        raise ArgumentTypeError(f"{op}: out must be a numpy array, got {type(out).__name__}")
    if out.shape != tuple(shape) or out.dtype != dtype:
        raise ArgumentError(
            f"{op}: out must have shape {tuple(shape)} and dtype {np.dtype(dtype)}, "
            f"got {out.shape} {out.dtype}"
        )
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ArgumentError(f"{op}: out must be a writeable C-contiguous array")
    if not np.may_share_memory(out, source):  # cheap, and the common answer
        return out
    same = (
        out.__array_interface__["data"][0] == source.__array_interface__["data"][0]
        and out.strides == source.strides
    )
    if not same:
        raise ArgumentError(f"{op}: out overlaps the input without being the same memory")
    return out


def raw_view(a: np.ndarray) -> np.ndarray:
    """The flat bytes the compiled core sees: nanobind cannot take bfloat16, so 16-bit floats
    cross as uint16 and the dtype travels separately."""
    flat = a.reshape(-1)
    return flat.view(np.uint16) if flat.dtype.itemsize == 2 else flat
