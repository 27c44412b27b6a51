"""NumPy oracle for the kernels, written from the formulas (shared/reference/rng.md), not from
the C++: slow, obvious, and independent of how the kernels tile, thread or vectorize."""

from __future__ import annotations

import numpy as np

M32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Random123's Philox4x32: counter uint32 [..., 4], key uint32 [..., 2]."""
    c = [np.asarray(counter, np.uint64)[..., i] for i in range(4)]
    k0 = np.asarray(key, np.uint64)[..., 0]
    k1 = np.asarray(key, np.uint64)[..., 1]
    for r in range(rounds):
        if r:
            k0 = (k0 + np.uint64(0x9E3779B9)) & M32
            k1 = (k1 + np.uint64(0xBB67AE85)) & M32
        p0 = c[0] * np.uint64(0xD2511F53)
        p1 = c[2] * np.uint64(0xCD9E8D57)
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ k0,
            p1 & M32,
            (p0 >> np.uint64(32)) ^ c[3] ^ k1,
            p0 & M32,
        ]
    return np.stack(c, axis=-1).astype(np.uint32)


def dropout_words(seed: int, offset: int, idx: np.ndarray) -> np.ndarray:
    """Word r of every element index: block (offset, idx & ~3) under key seed, word idx & 3."""
    seed, offset = seed % 2**64, offset % 2**64
    idx = np.asarray(idx, np.uint64)
    group = idx & ~np.uint64(3)
    counter = np.stack(
        [
            np.full(idx.shape, offset & 0xFFFFFFFF, np.uint64),
            np.full(idx.shape, offset >> 32, np.uint64),
            group & M32,
            group >> np.uint64(32),
        ],
        axis=-1,
    )
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], np.uint64)
    words = philox4x32(counter, key)
    return np.take_along_axis(words, (idx & np.uint64(3)).astype(np.int64)[..., None], -1)[..., 0]


def keep_mask(words: np.ndarray, p: float) -> np.ndarray:
    p = float(np.float32(p))
    if p == 0.0:
        return np.ones(words.shape, bool)
    return words.astype(np.float64) > 4294967295.0 * p


def mask_indices(
    shape: tuple, mask_shape: tuple, global_shape: tuple | None = None, start: tuple | None = None
) -> np.ndarray:
    """Global mask index of every element of the local mask (1 on shared axes)."""
    global_shape = tuple(shape) if global_shape is None else tuple(global_shape)
    start = (0,) * len(shape) if start is None else tuple(start)
    local = tuple(1 if m == 1 else n for n, m in zip(shape, mask_shape))
    if len(local) == 0 or 0 in local:
        return np.zeros(local, np.int64)
    coords = [
        np.zeros_like(c) if m == 1 else c + s
        for c, m, s in zip(np.indices(local, dtype=np.int64), mask_shape, start)
    ]
    return np.ravel_multi_index(coords, mask_shape)


def dropout(
    x: np.ndarray,
    p: float,
    seed: int,
    offset: int = 0,
    mask_shape: tuple | None = None,
    mode: str = "upscale_in_train",
    training: bool = True,
    shard: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(y, packed local mask). mask_shape is the whole tensor's mask shape."""
    global_shape, start = shard if shard is not None else (x.shape, None)
    mask_shape = tuple(global_shape) if mask_shape is None else tuple(mask_shape)
    p32 = float(np.float32(p))
    idx = mask_indices(x.shape, mask_shape, global_shape, start)
    if not training:
        keep = np.ones(idx.shape, bool)
    elif p32 == 1.0:
        keep = np.zeros(idx.shape, bool)
    else:
        keep = keep_mask(dropout_words(seed, offset, idx), p32)
    upscale = mode == "upscale_in_train"
    if not training:
        scale = 1.0 if upscale else 1.0 - p32
    else:
        scale = 1.0 / (1.0 - p32) if upscale and p32 < 1.0 else 1.0
    y = apply(x, np.broadcast_to(keep, x.shape), scale)
    return y, np.packbits(keep.reshape(-1), bitorder="little")


def apply(x: np.ndarray, keep: np.ndarray, scale: float) -> np.ndarray:
    """x * scale where kept, +0 elsewhere, multiplied in float32 (float64 for float64 data)
    and rounded once to x's dtype."""
    compute = np.float64 if x.dtype == np.float64 else np.float32
    if scale == 1.0:
        scaled = x
    else:
        with np.errstate(over="ignore"):  # float16 overflows to inf, as the kernel does
            scaled = (x.astype(compute) * compute(scale)).astype(x.dtype)
    return np.where(keep, scaled, np.zeros((), x.dtype)).astype(x.dtype)


def unpack_mask(packed: np.ndarray, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape))
    return np.unpackbits(packed, bitorder="little", count=n).astype(bool).reshape(shape)
