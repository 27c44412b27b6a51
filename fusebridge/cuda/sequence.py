"""The LoD sequence ops on the cuda engine, with fusebridge.kernels' signatures, checks and
results: crf_decoding (the same float32 arithmetic and tie rule, so the same paths bit for bit)
and the reorders between LoD words and padded batches (copies).

Data arrays are device arrays; offsets and lengths are host integer arrays, as torch's
pack_padded_sequence takes its lengths on the CPU: the launch geometry (sentences, the longest
one, the output's shape) is computed on the host. Offsets or lengths given as a device array
are downloaded. The lengths and offsets these functions return are host arrays too."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebridge.cuda import arguments as args
from fusebridge.cuda.device import Launcher, launcher_for, same_device
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.arguments import as_choice
from fusebridge.kernels.sequence_layout import LAYOUTS, PAD_SIDES, as_offsets, as_seq_lens

SOURCE = "sequence.cu"
_KDL_CUDA = 2  # DLPack's device type of CUDA memory


def to_host(values: Any, op: str, name: str) -> Any:
    """Offsets or lengths where the host can read them: a CUDA device array is downloaded,
    anything else (numpy, lists, a torch CPU tensor) is returned as it is."""
    on_device = hasattr(values, "__cuda_array_interface__") or (
        hasattr(values, "__dlpack_device__") and values.__dlpack_device__()[0] == _KDL_CUDA
    )
    if not on_device:
        return values
    launcher, arr = launcher_for(op, name, values)
    return launcher.download(arr)


def _matrix(x: Any, op: str, name: str) -> Any:
    """A float32 matrix on the device, as the cpu engine's crf_decoding takes it (float64 is
    rounded on the device: the decoding compares in float32)."""
    dtype = args.dtype_name(x)
    if dtype not in ("float32", "float64"):
        raise ArgumentTypeError(f"{op}: {name} must be float32 (or float64), got {x.dtype}")
    if x.ndim != 2:
        raise ArgumentError(f"{op}: {name} must be 2-D, got shape {tuple(x.shape)}")
    args.contiguous(op, name, x)
    return x if dtype == "float32" else x.astype(np.float32)


def crf_decoding(
    emission: Any,
    transition: Any,
    offsets: np.ndarray,
    label: Any = None,
) -> Any:
    """The best tag sequence of every sentence, int64 [words, 1] on the device: Viterbi over
    emission [words, tags] split by offsets [N+1] under transition [tags+2, tags] (start row,
    end row, then w[from, to]); with label [words, 1], 1 where the tag equals it, else 0.
    fusebridge.kernels.crf_decoding's arithmetic: the same paths bit for bit."""
    op = "crf_decoding"
    launcher, emission = launcher_for(op, "emission", emission)
    emission = _matrix(emission, op, "emission")
    transition = _matrix(same_device(op, launcher, "transition", transition), op, "transition")
    words, tags = emission.shape
    if tags < 1:
        raise ArgumentError(f"{op}: emission must have at least one tag (column), got 0")
    if tuple(transition.shape) != (tags + 2, tags):
        raise ArgumentError(
            f"{op}: transition must have shape {(tags + 2, tags)} (start row, end row, then "
            f"[tags, tags]) for the emission's {tags} tags, got {tuple(transition.shape)}"
        )
    offsets = as_offsets(to_host(offsets, op, "offsets"), op, words)
    if label is not None:
        label = same_device(op, launcher, "label", label)
        if label.dtype.kind not in "iu":
            raise ArgumentTypeError(f"{op}: label must be an integer array, got {label.dtype}")
        if tuple(label.shape) != (words, 1):
            raise ArgumentError(
                f"{op}: label must have shape {(words, 1)}, got {tuple(label.shape)}"
            )
        args.contiguous(op, "label", label)
        # Out-of-range uint64 values wrap negative, as on the cpu: they match no tag.
        if args.dtype_name(label) != "int64":
            label = label.astype(np.int64)
    path = args.new_array(launcher, (words, 1), np.int64, op, "path")
    if words == 0:
        return path
    sentences = len(offsets) - 1
    # Scratch: each sentence's scores of the previous and the current word, and the back
    # pointers of every word (int32, as the cpu kernel's).
    alpha = args.new_array(launcher, (sentences, 2, tags), np.float32, op, "the scratch")
    track = args.new_array(launcher, (words, tags), np.int32, op, "the scratch")
    launcher.launch(
        SOURCE,
        "crf_decoding",
        sentences,  # a warp each
        (
            emission,
            transition,
            launcher.upload(offsets),
            np.int64(sentences),
            np.int64(tags),
            label,
            path,
            alpha,
            track,
        ),
    )
    return path


def _reorder(
    launcher: Launcher,
    kernel: str,
    src: Any,
    dst: Any,
    offsets: np.ndarray,
    t: int,
    row_bytes: int,
    layout: str,
    pad_side: str,
) -> None:
    """dst from src by `kernel` (lod_to_padded or padded_to_lod), in the widest units that
    divide a word's row_bytes and both arrays' alignment."""
    if dst.nbytes == 0:
        return
    unit = next(
        u
        for u in (16, 8, 4, 2, 1)
        if row_bytes % u == 0 and args.address(src) % u == 0 and args.address(dst) % u == 0
    )
    total = dst.nbytes // unit
    launcher.launch(
        SOURCE,
        kernel,
        -(-total // 32),
        (
            src,
            dst,
            launcher.upload(offsets),
            np.int64(len(offsets) - 1),
            np.int64(t),
            np.int64(row_bytes // unit),
            np.int64(total),
            np.int32(layout == "ntc"),
            np.int32(pad_side == "left"),
            np.int32(unit),
        ),
    )


def lod_to_padded(
    x: Any, offsets: np.ndarray, layout: str = "tnc", pad_side: str = "right"
) -> tuple[Any, np.ndarray]:
    """(padded, seq_lens): device array x [words, C...] split by host offsets into [T, N, C...]
    (tnc) or [N, T, C...] (ntc) on the device, T the longest sentence, zeros where a sentence
    is shorter; seq_lens int64 [N] on the host. Any dtype; fusebridge.kernels' result."""
    op = "lod_to_padded"
    layout = as_choice(layout, LAYOUTS, op, "layout")
    pad_side = as_choice(pad_side, PAD_SIDES, op, "pad_side")
    launcher, x = launcher_for(op, "x", x)
    if x.ndim < 1:
        raise ArgumentError(f"{op}: x must be [words, ...], got a scalar")
    args.contiguous(op, "x", x)
    offsets = as_offsets(to_host(offsets, op, "offsets"), op, x.shape[0])
    lens = np.diff(offsets)
    n, t = len(lens), int(lens.max(initial=0))
    # T * N rows can be far more than x's: checked before anything is allocated.
    shape = ((n, t) if layout == "ntc" else (t, n)) + tuple(x.shape[1:])
    padded = args.new_array(launcher, shape, x.dtype, op, "padded")
    row_bytes = math.prod(x.shape[1:]) * x.itemsize
    _reorder(launcher, op, x, padded, offsets, t, row_bytes, layout, pad_side)
    return padded, lens


def padded_to_lod(
    padded: Any, seq_lens: np.ndarray | None, layout: str = "tnc", pad_side: str = "right"
) -> tuple[Any, np.ndarray]:
    """(data, offsets): the real steps of device array padded [T, N, C...] (tnc) or [N, T, C...]
    (ntc) stacked sentence after sentence into [words, C...] on the device; seq_lens [N] on the
    host (None: all T), offsets int64 [N+1] on the host. fusebridge.kernels' result."""
    op = "padded_to_lod"
    layout = as_choice(layout, LAYOUTS, op, "layout")
    pad_side = as_choice(pad_side, PAD_SIDES, op, "pad_side")
    launcher, padded = launcher_for(op, "padded", padded)
    if padded.ndim < 2:
        raise ArgumentError(
            f"{op}: padded must have at least 2 dimensions ({layout}), got shape "
            f"{tuple(padded.shape)}"
        )
    args.contiguous(op, "padded", padded)
    t, n = padded.shape[:2] if layout == "tnc" else padded.shape[1::-1]
    if seq_lens is not None:
        seq_lens = to_host(seq_lens, op, "seq_lens")
    lens = as_seq_lens(seq_lens, op, n, t)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = args.new_array(launcher, (int(offsets[-1]), *padded.shape[2:]), padded.dtype, op, "data")
    row_bytes = math.prod(padded.shape[2:]) * padded.itemsize
    _reorder(launcher, op, padded, data, offsets, t, row_bytes, layout, pad_side)
    return data, offsets
