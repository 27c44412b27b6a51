"""What Session.run checks on each feed before anything runs: that it is a numpy array, its
dtype (a cast only where no value changes beyond rounding), its rank, the graph input's static
dimensions, and that a named symbolic dimension has one size across all inputs that declare it
(ONNX: the same dim_param is the same size). Each error names the input, what it got and what
the model declares, instead of an ONNX Runtime or kernel message about a node inside."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError, ArgumentTypeError, ModelFormatError

# symbol -> (size, the input that set it, its axis), for one run
Dims = dict[str, tuple[int, str, int]]


def check_names(feeds: object, expected: list[str], constants: Collection[str]) -> None:
    """feeds is a mapping whose keys are exactly the input names `expected`."""
    if type(feeds) is dict and feeds.keys() == set(expected):
        return  # the common case, in one comparison (the names are strings: expected's are)
    if not isinstance(feeds, Mapping):
        raise ArgumentTypeError(
            f"Session.run: feeds must be a dict name -> array, got {type(feeds).__name__}"
        )
    for name in feeds:
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"Session.run: feed names must be strings, got {type(name).__name__} {name!r}"
            )
    fixed = sorted(set(feeds) & set(constants))
    if fixed:
        raise ArgumentError(
            f"Session.run: {fixed} are initializers of the model (constants), not inputs to "
            f"feed; inputs are {expected}"
        )
    unknown = sorted(set(feeds) - set(expected))
    missing = [n for n in expected if n not in feeds]
    if unknown or missing:
        raise ArgumentError(
            f"Session.run: inputs are {expected}; "
            + (f"missing {missing}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"unknown {unknown}" if unknown else "")
        )


def _first(bad: np.ndarray) -> tuple[int, ...]:
    """The index of the first True in bad."""
    return tuple(int(k) for k in np.unravel_index(int(np.argmax(bad)), bad.shape))


@dataclasses.dataclass(frozen=True)
class FeedSpec:
    """What a graph input declares, read once from the IR: dtype (None: any numeric), and per
    axis a static size, a symbol's name or None (free); dims None when the rank is free too."""

    dtype: np.dtype | None
    dims: tuple[int | str | None, ...] | None
    # dims split once, for the check of each run: (axis, size) and (axis, symbol)
    static: tuple[tuple[int, int], ...] = dataclasses.field(init=False, repr=False)
    symbols: tuple[tuple[int, str], ...] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        dims = list(enumerate(self.dims or ()))
        static = tuple((a, d) for a, d in dims if isinstance(d, int))
        object.__setattr__(self, "static", static)
        object.__setattr__(self, "symbols", tuple((a, d) for a, d in dims if isinstance(d, str)))

    @classmethod
    def of(cls, value: ir.Value) -> FeedSpec:
        try:
            dtype = None if value.dtype is None else np.dtype(value.dtype.numpy())
        except TypeError:  # UNDEFINED, STRING and the like: nothing a feed could be
            raise ModelFormatError(
                f"Session: graph input {value.name!r} has element type {value.dtype}, expected "
                "a numeric tensor type"
            ) from None
        if value.shape is None:
            return cls(dtype, None)
        return cls(dtype, tuple(d if isinstance(d, int) else d.value for d in value.shape))

    def shape_text(self) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"


def _cast(label: str, arr: np.ndarray, want: np.dtype) -> np.ndarray:
    """arr as `want` when numpy calls the cast same-kind and no value overflows or, for
    integers, changes; float64 -> float32 rounds, as a float32 model computes anyway."""
    expected = f"Session.run: {label} must be {want}"
    if arr.dtype.kind not in "biuf" or not np.can_cast(arr.dtype, want, "same_kind"):
        raise ArgumentTypeError(f"{expected}, got {arr.dtype}")
    with np.errstate(invalid="ignore", over="ignore"):
        cast = arr.astype(want)
        if np.can_cast(arr.dtype, want, "safe") or arr.size == 0:
            return cast
        if want.kind == "f" and arr.dtype.kind == "f":
            lost = np.isinf(cast) & np.isfinite(arr)
        else:
            lost = cast.astype(arr.dtype) != arr
            if want.kind in "iu":  # the round trip misses a sign flip (uint64 -> int64)
                lost |= (arr < 0) != (cast < 0)
    if lost.any():
        i = _first(lost)
        raise ArgumentError(
            f"{expected}; its {arr.dtype} value {arr[i]} at {list(i)} does not fit (cast to "
            f"{cast[i]})"
        )
    return cast


def as_feed(label: str, value: object, declared: FeedSpec, dims: Dims) -> np.ndarray:
    """value checked against what its graph input declares, as a C-contiguous array (a copy only
    when a cast or the layout needs one; a read-only feed stays read-only, nothing writes it)."""
    if type(value) is np.ndarray:  # the common case, first: nothing to convert
        arr = value
    elif not isinstance(value, (np.ndarray, np.generic)) or isinstance(value, np.ma.MaskedArray):
        masked = " (its mask would be ignored: pass .filled(...))" if np.ma.isMA(value) else ""
        raise ArgumentTypeError(
            f"Session.run: {label} must be a numpy array, got {type(value).__name__}{masked}"
        )
    else:
        arr = np.asarray(value)
    want = declared.dtype
    if want is None:
        if arr.dtype.kind not in "biufc":
            raise ArgumentTypeError(
                f"Session.run: {label} must be a numeric array, got {arr.dtype}"
            )
    elif want == np.dtype(object):  # ONNX strings: what ONNX Runtime takes for them
        if arr.dtype.kind not in "OUS":
            raise ArgumentTypeError(f"Session.run: {label} must be strings, got {arr.dtype}")
    elif arr.dtype != want:
        arr = _cast(label, arr, want)
    shape = declared.dims
    if shape is not None:
        got = arr.shape
        if len(got) != len(shape) or any(got[a] != d for a, d in declared.static):
            raise ArgumentError(
                f"Session.run: {label} is shaped {list(arr.shape)} where "
                f"{declared.shape_text()} is declared"
            )
        for axis, d in declared.symbols:
            n = got[axis]
            size, other, other_axis = dims.setdefault(d, (n, label, axis))
            if size != n:
                raise ArgumentError(
                    f"Session.run: {label} has {n} in dimension {axis}, but {other} has {size} "
                    f"in dimension {other_axis}, and the model declares both as {d!r}"
                )
    # np.ascontiguousarray would make a 0-d input (rng_seed) 1-d; 0-d is always contiguous.
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def check_lengths(label: str, arr: np.ndarray, consumer: str) -> None:
    """A feed that reaches a kernel as sequence lengths (MXNet gives them as floats that the
    graph casts to int64, where NaN, inf and 1e30 all become INT64_MIN)."""
    if arr.size == 0:
        return
    with np.errstate(invalid="ignore"):
        bad = ~(arr >= 0)
        if arr.dtype.kind == "f":
            bad |= ~(arr < 2.0**63)
    if bad.any():
        i = _first(bad)
        raise ArgumentError(
            f"Session.run: {label} holds the sequence lengths of {consumer}: each must be a "
            f"non-negative number of steps, got {arr[i]} at {list(i)}"
        )
