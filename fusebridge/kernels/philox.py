"""Raw Philox4x32 output, for known-answer tests and for key derivation."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import contiguous, new_array


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = 10) -> np.ndarray:
    """uint32 [..., 4] output words for counters [..., 4] and keys [..., 2] (broadcast)."""
    op = "philox4x32"
    counter, key = np.asarray(counter), np.asarray(key)
    for name, a, width in (("counter", counter, 4), ("key", key, 2)):
        if a.ndim < 1 or a.shape[-1] != width or not np.can_cast(a.dtype, np.uint32, "safe"):
            raise ArgumentError(
                f"{op}: {name} must be uint32 [..., {width}], got {a.dtype} {a.shape}"
            )
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= 16:
        raise ArgumentError(f"{op}: rounds must be an integer in [0, 16], got {rounds!r}")
    try:
        lead = np.broadcast_shapes(counter.shape[:-1], key.shape[:-1])
    except ValueError:
        raise ArgumentError(
            f"{op}: counter {counter.shape} and key {key.shape} do not broadcast"
        ) from None
    # Broadcasting two small arrays can ask for a large one: the output is made (its size
    # checked) before any broadcast view, which numpy itself refuses past 2**63 bytes.
    out = new_array((*lead, 4), np.uint32, op, "the output")
    c = contiguous(np.broadcast_to(counter, (*lead, 4)), op, "counter", np.uint32)
    k = contiguous(np.broadcast_to(key, (*lead, 2)), op, "key", np.uint32)
    core._C.philox4x32(c.reshape(-1, 4), k.reshape(-1, 2), out.reshape(-1, 4), rounds)
    return out
