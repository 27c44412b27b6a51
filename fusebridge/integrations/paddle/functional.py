"""fusebridge's ops as dygraph functions on Paddle tensors, differentiable with Paddle's
autograd: the custom operators of op_library.py (built and loaded on first call) with their
arguments checked here and the random state passed explicitly, as JAX does: a
fusebridge.random.Key (seed, offset) goes in, the same key gives the same bits, and nothing
is kept between calls. `fusebridge.random.split` / `fold_in` make new keys; a dropout of n
elements uses the counters [offset, offset + ceil(n / 4)) of its key's seed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.integrations.paddle import op_library
from fusebridge.kernels.arguments import as_probability
from fusebridge.random import Key, _check_key, as_int64

_MODES = ("upscale_in_train", "downgrade_in_infer")


def _key_tensor(key: Key, op: str) -> Any:
    import paddle

    k = _check_key(key, op)
    return paddle.to_tensor(np.array([as_int64(k.seed), as_int64(k.offset)], np.int64))


def _mode(mode: str, op: str) -> str:
    if mode not in _MODES:
        raise ArgumentError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    return mode


def dropout(
    x: Any,
    p: float,
    *,
    key: Key,
    axes: Sequence[int] = (),
    mode: str = "upscale_in_train",
    training: bool = True,
    save_mask: bool = True,
) -> Any:
    """fusebridge.kernels.dropout(x, p, seed=key.seed, offset=key.offset, axes=axes) on a
    float32 CPU tensor, bit for bit; its gradient reads the 1-bit mask, or with save_mask
    False regenerates the bits from the key (no mask kept for the backward)."""
    op = "fusebridge.integrations.paddle.dropout"
    p = as_probability(p, op, "p")
    out, _ = op_library.register().fusebridge_dropout(
        x, _key_tensor(key, op), p, _mode(mode, op), not training, [int(a) for a in axes],
        bool(save_mask),
    )  # fmt: skip
    return out


def softmax_dropout(
    x: Any,
    p: float,
    *,
    key: Key,
    axis: int = -1,
    mode: str = "upscale_in_train",
    training: bool = True,
    save_mask: bool = True,
) -> Any:
    """dropout(softmax(x, axis)) in one pass, bit-identical to softmax then `dropout` with
    the same key; the gradient recomputes the probabilities from x."""
    op = "fusebridge.integrations.paddle.softmax_dropout"
    p = as_probability(p, op, "p")
    out, _ = op_library.register().fusebridge_softmax_dropout(
        x, _key_tensor(key, op), p, _mode(mode, op), not training, int(axis), bool(save_mask)
    )
    return out


def matmul_dropout(
    a: Any,
    b: Any,
    p: float,
    *,
    key: Key,
    transpose_a: bool = False,
    transpose_b: bool = False,
    mode: str = "upscale_in_train",
    training: bool = True,
    save_mask: bool = True,
) -> Any:
    """dropout(op(a) @ op(b)) with np.matmul's batch broadcasting, the dropout applied while
    each output tile is in cache: bit-identical to the matmul then `dropout` with the same
    key; its gradient goes through Paddle's own matmul."""
    op = "fusebridge.integrations.paddle.matmul_dropout"
    p = as_probability(p, op, "p")
    out, _ = op_library.register().fusebridge_matmul_dropout(
        a, b, _key_tensor(key, op), p, _mode(mode, op), not training, bool(transpose_a),
        bool(transpose_b), bool(save_mask),
    )  # fmt: skip
    return out


__all__ = ["dropout", "matmul_dropout", "softmax_dropout"]
