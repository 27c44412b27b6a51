"""Reorders between Paddle's LoD layout (words of all sentences stacked, plus offsets) and the
padded layouts (tnc, ntc) that ONNX, MXNet and oneDNN recurrences take, and the checks every op
taking offsets or sequence lengths shares.

Offsets are Paddle's level-1 LoD: int64 [N+1], offsets[0] == 0, nondecreasing, last == words;
sentence i is rows offsets[i]:offsets[i+1]. Padded data is [T, N, C...] (tnc) or [N, T, C...]
(ntc) with T the longest sentence. Padding is zeros, after each sentence (pad_side "right") or
before it ("left": Paddle's oneDNN GRU pads that way for is_reverse so that the reversed
iteration starts at every sentence's real end)."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.arguments import INT64_MAX, as_choice, new_array

LAYOUTS = ("tnc", "ntc")
PAD_SIDES = ("right", "left")


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _integer_vector(values: object, op: str, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError, OverflowError):  # ragged nesting, say
        raise ArgumentTypeError(
            f"{op}: {name} must be a 1-D array of integers, got {type(values).__name__}"
        ) from None
    if arr.ndim != 1:
        raise ArgumentError(f"{op}: {name} must be a 1-D integer array, got shape {arr.shape}")
    if arr.size and arr.dtype.kind in "Of" and all(map(_is_int, values)):
        # A list holding an int beyond int64 arrives as objects, or as floats beside a negative
        # one: the Python ints themselves are checked, so that the message names the value.
        ints = [int(v) for v in values]
        bad = next((v for v in ints if not -INT64_MAX - 1 <= v <= INT64_MAX), None)
        if bad is not None:
            raise ArgumentError(f"{op}: {name} must fit in int64, got {bad}")
        return np.array(ints, np.int64)
    # An empty list arrives as float64: let the length checks speak about it instead.
    if arr.size and arr.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{op}: {name} must be an integer array, got {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > INT64_MAX:
        raise ArgumentError(f"{op}: {name} must fit in int64, got {arr.max()}")
    return np.ascontiguousarray(arr, np.int64)


def as_offsets(offsets: object, op: str, rows: int) -> np.ndarray:
    """offsets as C-contiguous int64 [N+1], checked against the `rows` words they split."""
    arr = _integer_vector(offsets, op, "offsets")
    if arr.size == 0:
        raise ArgumentError(
            f"{op}: offsets must have N+1 >= 1 entries (0 first, then each sentence's end), "
            "got an empty array"
        )
    if arr[0] != 0:
        raise ArgumentError(f"{op}: offsets must start at 0, got {arr[0]}")
    # Neighbours compared, never subtracted: np.diff wraps around int64, and offsets such as
    # [0, 2**63 - 1, -2, 302] would then look nondecreasing. Once these checks hold, every
    # offset lies in [0, rows] and np.diff gives the true lengths.
    falls = arr[1:] < arr[:-1]
    if falls.any():
        i = int(np.argmax(falls))
        raise ArgumentError(
            f"{op}: offsets must be nondecreasing, got {arr[i]} then {arr[i + 1]} at index {i}"
        )
    if arr[-1] != rows:
        raise ArgumentError(f"{op}: offsets must end at the number of rows ({rows}), got {arr[-1]}")
    return arr


def offsets_from_lengths(lengths: object, op: str, rows: int) -> np.ndarray:
    """Offsets [N+1] (int64, C-contiguous) from N sentence lengths that must sum to `rows`."""
    lens = _integer_vector(lengths, op, "lengths")
    if lens.size and lens.min() < 0:
        i = int(np.argmax(lens < 0))
        raise ArgumentError(
            f"{op}: lengths must be non-negative integers, got {lens[i]} at index {i}"
        )
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    # A sum past int64 wraps around; each length is below 2**63, so the running sum then
    # drops at the step that wrapped, and as_offsets' nondecreasing check would blame offsets
    # the caller never gave: the exact sum (Python ints) is the message instead.
    if offsets[-1] != rows or (offsets[1:] < offsets[:-1]).any():
        total = sum(lens.tolist())
        raise ArgumentError(
            f"{op}: the offsets of the lengths must end at the number of rows ({rows}), but "
            f"the {len(lens)} lengths sum to {total}"
        )
    return offsets


def as_seq_lens(seq_lens: object, op: str, n: int, t: int) -> np.ndarray:
    """seq_lens as C-contiguous int64 [n], each in 0..t; None means every sentence is t long."""
    if seq_lens is None:
        return np.full(n, t, np.int64)
    arr = _integer_vector(seq_lens, op, "seq_lens")
    if arr.shape != (n,):
        raise ArgumentError(
            f"{op}: seq_lens must have one entry per sentence ({n}), got shape {arr.shape}"
        )
    if n and arr.min() < 0:
        raise ArgumentError(f"{op}: seq_lens must not be negative, got {arr.min()}")
    if n and arr.max() > t:
        raise ArgumentError(
            f"{op}: seq_lens must not exceed the padded length {t}, got {arr.max()}"
        )
    return arr


def _positions(lens: np.ndarray, t: int, pad_side: str) -> tuple[np.ndarray, np.ndarray]:
    """For every word in LoD order: its sentence and its step in the padded sequence."""
    starts = np.cumsum(lens) - lens
    sentence = np.repeat(np.arange(len(lens)), lens)
    step = np.arange(int(lens.sum())) - starts[sentence]
    if pad_side == "left":
        step += t - lens[sentence]
    return sentence, step


def lod_to_padded(
    x: np.ndarray, offsets: np.ndarray, layout: str = "tnc", pad_side: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """(padded, seq_lens): x [words, C...] split by offsets into [T, N, C...] (tnc) or
    [N, T, C...] (ntc), T the longest sentence, zeros where a sentence is shorter."""
    op = "lod_to_padded"
    layout = as_choice(layout, LAYOUTS, op, "layout")
    pad_side = as_choice(pad_side, PAD_SIDES, op, "pad_side")
    x = np.asarray(x)
    if x.ndim < 1:
        raise ArgumentError(f"{op}: x must be [words, ...], got a scalar")
    lens = np.diff(as_offsets(offsets, op, x.shape[0]))
    n, t = len(lens), int(lens.max(initial=0))
    sentence, step = _positions(lens, t, pad_side)
    # T * N rows can be far more than x's: checked before anything is allocated.
    shape = ((n, t) if layout == "ntc" else (t, n)) + x.shape[1:]
    padded = new_array(shape, x.dtype, op, "padded", zeros=True)
    if layout == "ntc":
        padded[sentence, step] = x
    else:
        padded[step, sentence] = x
    return padded, lens


def padded_to_lod(
    padded: np.ndarray, seq_lens: np.ndarray | None, layout: str = "tnc", pad_side: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """(data, offsets): the real steps of padded [T, N, C...] (tnc) or [N, T, C...] (ntc)
    stacked sentence after sentence into [words, C...]; seq_lens None means all T."""
    op = "padded_to_lod"
    layout = as_choice(layout, LAYOUTS, op, "layout")
    pad_side = as_choice(pad_side, PAD_SIDES, op, "pad_side")
    padded = np.asarray(padded)
    if padded.ndim < 2:
        raise ArgumentError(
            f"{op}: padded must have at least 2 dimensions ({layout}), got shape {padded.shape}"
        )
    t, n = padded.shape[:2] if layout == "tnc" else padded.shape[1::-1]
    lens = as_seq_lens(seq_lens, op, n, t)
    sentence, step = _positions(lens, t, pad_side)
    data = padded[sentence, step] if layout == "ntc" else padded[step, sentence]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    return data, offsets
