"""Explicit random keys in JAX's style: a Key is a value (seed, offset), nothing is hidden.

`key(seed)`, `fold_in(key, data)` and `split(key, n)` are defined bit for bit in
docs/dropout.md ("Streams and keys"). A model made explicit by
`fusebridge.fuse_passes.explicit_rng` takes a key's seed and offset as its inputs `rng_seed`
and `rng_offset` (`Session.run(feeds, rng=key)`) and returns the next free offset as
`rng_offset_out`, so `Key(key.seed, out["rng_offset_out"])` continues the same stream.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import philox4x32
from fusebridge.kernels.arguments import as_int, as_u64

# The graph inputs and output that carry a model's random state (see explicit_rng).
SEED_INPUT = "rng_seed"
OFFSET_INPUT = "rng_offset"
OFFSET_OUTPUT = "rng_offset_out"

# Whitening of the key for derivation (docs/dropout.md), so that deriving keys never reproduces the
# words a dropout of the same seed draws.
_WHITEN = (0x6A09E667, 0xBB67AE85)
_M32 = 0xFFFFFFFF


@dataclasses.dataclass(frozen=True)
class Key:
    """(seed, offset), both 64-bit patterns kept as ints in [0, 2^64). The constructor also
    takes negative ints down to -2^63 as their two's complement, and 0-d integer arrays, so
    that a model's int64 `rng_offset_out` can be passed back as it comes."""

    seed: int
    offset: int = 0

    def __post_init__(self) -> None:
        for name in ("seed", "offset"):
            value = as_u64(getattr(self, name), "fusebridge.random.Key", name)
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"Key(seed=0x{self.seed:016x}, offset={self.offset})"


def key(seed: int) -> Key:
    """The key (seed, 0)."""
    return Key(as_u64(seed, "fusebridge.random.key", "seed"), 0)


def _derive(k: Key, data: np.ndarray) -> np.ndarray:
    """uint64 seeds: words 0 and 1 of Philox under the whitened key, one per data pattern."""
    counter = np.empty((len(data), 4), np.uint32)
    counter[:, 0] = k.offset & _M32
    counter[:, 1] = k.offset >> 32
    counter[:, 2] = data & np.uint64(_M32)
    counter[:, 3] = data >> np.uint64(32)
    whitened = np.array([(k.seed & _M32) ^ _WHITEN[0], (k.seed >> 32) ^ _WHITEN[1]], np.uint32)
    words = philox4x32(counter, whitened).astype(np.uint64)
    return (words[:, 1] << np.uint64(32)) | words[:, 0]


def check_key(k: object, op: str) -> Key:
    """k, checked to be a Key (ArgumentTypeError naming `op` otherwise)."""
    if not isinstance(k, Key):
        raise ArgumentTypeError(
            f"{op}: key must be a fusebridge.random.Key, got {type(k).__name__}"
        )
    return k


def fold_in(k: Key, data: int) -> Key:
    """A new key (s', 0) derived from k and the 64-bit pattern of data."""
    op = "fusebridge.random.fold_in"
    k = check_key(k, op)
    d = as_u64(data, op, "data")
    return Key(int(_derive(k, np.array([d], np.uint64))[0]), 0)


def split(k: Key, n: int = 2) -> list[Key]:
    """[fold_in(k, 0), ..., fold_in(k, n - 1)], in one Philox call."""
    op = "fusebridge.random.split"
    k = check_key(k, op)
    n = as_int(n, op, "n")
    if n < 0:
        raise ArgumentError(f"{op}: n must be >= 0, got {n}")
    return [Key(int(s), 0) for s in _derive(k, np.arange(n, dtype=np.uint64))]


def as_int64(pattern: int) -> int:
    """The int64 whose two's complement is the 64-bit pattern (how a model's inputs hold it)."""
    return pattern - (1 << 64) if pattern >= 1 << 63 else pattern


__all__ = [
    "OFFSET_INPUT",
    "OFFSET_OUTPUT",
    "SEED_INPUT",
    "Key",
    "as_int64",
    "fold_in",
    "key",
    "split",
]
