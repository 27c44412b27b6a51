"""fusebridge's ops as dygraph functions on Paddle tensors, differentiable with Paddle's
autograd: the custom operators of op_library.py (built and loaded on first call) with their
arguments checked here and the random state passed explicitly, as JAX does: a
fusebridge.random.Key (seed, offset) goes in, the same key gives the same bits, and nothing
is kept between calls. `fusebridge.random.split` / `fold_in` make new keys; a dropout of n
elements uses the counters [offset, offset + ceil(n / 4)) of its key's seed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fusebridge.errors import ArgumentError
from fusebridge.integrations.paddle import op_library
from fusebridge.kernels.arguments import as_flag, as_int, as_probability
from fusebridge.random import Key, as_int64, check_key

_MODES = ("upscale_in_train", "downgrade_in_infer")


def _key_tensor(key: Key, op: str) -> Any:
    import paddle

    k = check_key(key, op)
    # Not paddle.to_tensor: Paddle 3.3's Tensor(ndarray) keeps one list alive per tensor it
    # makes (a training loop of a million steps would keep a million; fuzz/soak.py found it),
    # and paddle.assign rounds int64 through floats. Two fills are exact and keep nothing (a
    # little slower: docs/performance.md).
    words = [paddle.full([1], as_int64(v), "int64") for v in (k.seed, k.offset)]
    return paddle.concat(words)


def _mode(mode: str, op: str) -> str:
    if mode not in _MODES:
        raise ArgumentError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    return mode


def _checked(op: str, key: Key, p: object, mode: str, training: object, save_mask: object):
    """What every op takes, checked before the op library is built or loaded: (the key as a
    tensor, p, mode, is_test, save_mask)."""
    return (
        _key_tensor(key, op),
        as_probability(p, op, "p"),
        _mode(mode, op),
        not as_flag(training, op, "training"),
        as_flag(save_mask, op, "save_mask"),
    )


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
    key_t, p, mode, is_test, save_mask = _checked(op, key, p, mode, training, save_mask)
    axes = [as_int(a, op, "axes") for a in axes]
    out, _ = op_library.register().fusebridge_dropout(x, key_t, p, mode, is_test, axes, save_mask)
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
    key_t, p, mode, is_test, save_mask = _checked(op, key, p, mode, training, save_mask)
    axis = as_int(axis, op, "axis")
    out, _ = op_library.register().fusebridge_softmax_dropout(
        x, key_t, p, mode, is_test, axis, save_mask
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
    key_t, p, mode, is_test, save_mask = _checked(op, key, p, mode, training, save_mask)
    ta, tb = as_flag(transpose_a, op, "transpose_a"), as_flag(transpose_b, op, "transpose_b")
    out, _ = op_library.register().fusebridge_matmul_dropout(
        a, b, key_t, p, mode, is_test, ta, tb, save_mask
    )
    return out


__all__ = ["dropout", "matmul_dropout", "softmax_dropout"]
