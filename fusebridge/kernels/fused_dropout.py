"""Dropout fused into the op that makes its input: matmul (BLAS per output tile, the dropout
applied while the tile is in cache) and softmax (one pass per block of rows).

Element i of the output draws from Philox (seed, offset, i), i its flat index in the whole
output (batch*M*N + m*N + n for a matmul), so the fused op gives exactly the bits of the plain
op followed by `dropout` (docs/dropout.md, "The bit contract"). The plain ops, `matmul` and
`softmax`, are the same primitives with p = 0: same BLAS calls, same arithmetic."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError, ExecutionError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import (
    as_flag,
    as_int,
    as_output,
    as_u64,
    buffer_bytes,
    contiguous,
    new_array,
)
from fusebridge.kernels.dropout import (
    _shard,
    dropout_backward,
    dropout_fields,
)

Shard = tuple[Sequence[int], Sequence[int]]
F32 = np.dtype(np.float32)


# What the fused primitives are created from (the C++ descriptors, bound: fused_dropout.hpp
# declares their fields); seed and offset are not in them: they are arguments of each call.
MatmulDropoutDescriptor = core._C.MatmulDropoutDescriptor
SoftmaxDropoutDescriptor = core._C.SoftmaxDropoutDescriptor


# ---- argument checks ------------------------------------------------------------------------


def _float32(x: object, op: str, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype != F32:
        raise ArgumentTypeError(f"{op}: {name} must be float32, got {arr.dtype}")
    return contiguous(arr, op, name)


def _axis(axis: object, op: str, ndim: int) -> int:
    a = as_int(axis, op, "axis")
    if not -ndim <= a < ndim:
        raise ArgumentError(f"{op}: axis {a} is out of range for rank {ndim}")
    return a % ndim


def _seed_or_mask(op: str, mask: object, seed: object, offset: object, mask_bytes: int) -> tuple:
    """(mask, seed, offset) checked: exactly one of a mask kept by the forward or a seed."""
    if (mask is None) == (seed is None):
        raise ArgumentError(
            f"{op}: give exactly one of mask= (kept by the forward) or seed= (to recompute it)"
        )
    if mask is None:
        return None, as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
    if not isinstance(mask, np.ndarray) or mask.dtype != np.uint8:
        raise ArgumentTypeError(
            f"{op}: mask must be the uint8 array the forward returned, got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}"
        )
    if mask.ndim != 1 or mask.size != mask_bytes:
        raise ArgumentError(
            f"{op}: mask must be 1-D with {mask_bytes} bytes, got shape {mask.shape}"
        )
    return np.ascontiguousarray(mask), 0, 0


def _output(out: object, shape: tuple[int, ...], op: str, *inputs: np.ndarray) -> np.ndarray:
    """A fresh output, or `out` checked: C-contiguous float32 of the shape, sharing no memory
    with the inputs (a GEMM reads them while it writes)."""
    y = as_output(out, shape, F32, np.empty(0, F32), op)
    if out is not None and any(np.may_share_memory(y, x) for x in inputs):
        raise ArgumentError(f"{op}: out overlaps an input")
    return y


@functools.lru_cache(maxsize=1024)
def _interned(cls: type, **fields: object) -> object:
    """The descriptor of these fields, built once: most calls repeat a geometry, and building
    the key is not the primitive cache's to save. Made by keyword, a bound descriptor costs
    several times this lookup, a share of a small matmul or softmax call worth saving
    (docs/performance.md, "Measurements behind the code")."""
    return cls(**fields)


def _new_mask(prim: object, want: bool, op: str) -> np.ndarray | None:
    # The primitive zeroes it: threads OR the bytes their ranges share.
    return new_array((prim.mask_bytes,), np.uint8, op, "the mask") if want else None


# ---- matmul ---------------------------------------------------------------------------------


def _matmul_shapes(
    op: str, a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool
) -> tuple[int, int, int, tuple[int, ...]]:
    """(M, N, K, output shape) of op(a) @ op(b) with np.matmul's batch broadcasting."""
    for name, x, dims in (("a", a, "[..., M, K]"), ("b", b, "[..., K, N]")):
        if x.ndim < 2:
            raise ArgumentError(f"{op}: {name} must be at least 2-D {dims}, got shape {x.shape}")
    geometry = _geometry(a.shape, b.shape, transpose_a, transpose_b)
    if geometry is None:
        raise ArgumentError(
            f"{op}: op(a) [..., M, K] and op(b) [..., K, N] must chain, got a {a.shape} and "
            f"b {b.shape} with transpose_a={transpose_a}, transpose_b={transpose_b}"
        )
    if not geometry:
        raise ArgumentError(
            f"{op}: the batch dimensions of a {a.shape[:-2]} and b {b.shape[:-2]} do not broadcast"
        )
    return geometry


@functools.lru_cache(maxsize=1024)
def _geometry(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], transpose_a: bool, transpose_b: bool
) -> tuple | None:
    """_matmul_shapes' answer for valid shapes; None when K differs, () when the batch dims do
    not broadcast. Cached: the shapes of most calls repeat."""
    m, ka = (a_shape[-1], a_shape[-2]) if transpose_a else a_shape[-2:]
    kb, n = (b_shape[-1], b_shape[-2]) if transpose_b else b_shape[-2:]
    if ka != kb:
        return None
    batch = _broadcast(a_shape[:-2], b_shape[:-2])
    if batch is None:
        return ()
    return m, n, ka, (*batch, m, n)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """np.broadcast_shapes in Python ints (numpy refuses results past its size limit with the
    same ValueError as shapes that do not broadcast); None when they do not."""
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        return None
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def _matmul_primitive(
    op: str,
    a: np.ndarray,
    b: np.ndarray,
    bias: np.ndarray | None,
    transpose_a: object,
    transpose_b: object,
    p: object,
    mode: object,
    training: object,
    shard: object,
) -> tuple[object, tuple[int, ...], np.ndarray | None]:
    """(primitive, output shape, bias checked) after every check of the arguments."""
    transpose_a = as_flag(transpose_a, op, "transpose_a")
    transpose_b = as_flag(transpose_b, op, "transpose_b")
    m, n, k, shape = _matmul_shapes(op, a, b, transpose_a, transpose_b)
    if max(m, n, k, m * k, k * n, m * n) > 2**31 - 1:
        raise ArgumentError(
            f"{op}: a matrix of a {a.shape} @ b {b.shape} exceeds the 32-bit BLAS interface"
        )
    # Broadcast batches can make the output far larger than either operand.
    buffer_bytes(shape, F32.itemsize, op, "the output")
    if bias is not None:
        bias = _float32(bias, op, "bias")
        if bias.shape != (n,):
            raise ArgumentError(f"{op}: bias must have shape (N,) = ({n},), got {bias.shape}")
    global_shape, start = _shard(op, shape, shard)
    desc = _interned(
        MatmulDropoutDescriptor,
        a_shape=a.shape,
        b_shape=b.shape,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        bias=bias is not None,
        global_shape=global_shape,
        start=start,
        **dropout_fields(op, p, mode, training),
    )
    try:
        return core._C.primitive(desc), shape, bias
    except ExecutionError:  # std::bad_alloc: the plan lists each output matrix, and
        # broadcasting can make billions
        raise ArgumentError(
            f"{op}: the output {shape} of a {a.shape} @ b {b.shape} has more matrices than "
            "this process can plan"
        ) from None


def matmul_dropout(
    a: np.ndarray,
    b: np.ndarray,
    p: float,
    *,
    seed: int,
    offset: int = 0,
    bias: np.ndarray | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: Shard | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """dropout(op(a) @ op(b) (+ bias)), float32, with np.matmul's batch broadcasting: y, or
    (y, packed mask) with return_mask. Bit-identical to `dropout(matmul(a, b, ...), p, ...)`;
    shard places the output in a larger one (docs/dropout.md)."""
    op = "matmul_dropout"
    a, b = _float32(a, op, "a"), _float32(b, op, "b")
    seed, offset = as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
    return_mask = as_flag(return_mask, op, "return_mask")
    prim, shape, bias = _matmul_primitive(
        op, a, b, bias, transpose_a, transpose_b, p, mode, training, shard
    )
    y = _output(out, shape, op, a, b, *([] if bias is None else [bias]))
    mask = _new_mask(prim, return_mask, op)
    prim.forward(a, b, bias, y, mask, seed, offset)
    return (y, mask) if return_mask else y


def matmul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    bias: np.ndarray | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """op(a) @ op(b) (+ bias), float32, batched like np.matmul, by the same BLAS calls as
    matmul_dropout: exactly the product matmul_dropout drops. The tiles depend on the shapes
    only, so the bits do not depend on the thread count."""
    op = "matmul"
    a, b = _float32(a, op, "a"), _float32(b, op, "b")
    prim, shape, bias = _matmul_primitive(
        op, a, b, bias, transpose_a, transpose_b, 0.0, "upscale_in_train", True, None
    )
    y = _output(out, shape, op, a, b, *([] if bias is None else [bias]))
    prim.forward(a, b, bias, y, None, 0, 0)
    return y


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """g summed over the batch axes that broadcasting added to, or stretched in, `shape` (a
    fresh contiguous array then). Written with array methods alone: the cuda engine's backward
    calls it on CuPy arrays."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + d for d, n in enumerate(shape[:-2]) if n == 1 and g.shape[lead + d] != 1
    )
    if not axes:
        return g
    return g.sum(axis=axes, dtype=np.float32).reshape(shape)


def matmul_dropout_backward(
    dy: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    p: float,
    *,
    mask: np.ndarray | None = None,
    seed: int | None = None,
    offset: int = 0,
    bias: np.ndarray | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    mode: str = "upscale_in_train",
    shard: Shard | None = None,
) -> tuple[np.ndarray, ...]:
    """(da, db), or (da, db, dbias) when the forward's bias is given (only its shape is read),
    for y = matmul_dropout(a, b, p, ...). The keep bits come from the packed mask the forward
    returned, or are recomputed from seed and offset (no mask stored at all). dz = dy * keep *
    scale is the standalone dropout_backward's; da and db are two `matmul` calls on it."""
    op = "matmul_dropout_backward"
    a, b, dy = _float32(a, op, "a"), _float32(b, op, "b"), _float32(dy, op, "dy")
    # A primitive of the forward's geometry checks every argument the forward would.
    prim, shape, bias = _matmul_primitive(
        op, a, b, bias, transpose_a, transpose_b, p, mode, True, shard
    )
    if dy.shape != shape:
        raise ArgumentError(f"{op}: dy must have the output's shape {shape}, got {dy.shape}")
    mask, seed, offset = _seed_or_mask(op, mask, seed, offset, prim.mask_bytes)
    ta, tb = as_flag(transpose_a, op, "transpose_a"), as_flag(transpose_b, op, "transpose_b")
    if mask is None:
        dz = dropout_backward(dy, p, seed=seed, offset=offset, mode=mode, shard=shard)
    else:
        dz = dropout_backward(dy, p, mask=mask, mode=mode, shard=shard)
    n, rows = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))  # rows of dz as a matrix

    if ta:
        da = matmul(b, dz, transpose_a=tb, transpose_b=True)
    else:
        da = matmul(dz, b, transpose_b=not tb)
    shared_b = all(d == 1 for d in b.shape[:-2])
    if shared_b and not ta and a.shape[:-2] == shape[:-2]:
        # b is one matrix for every batch: db sums over all of them, so fold the batches into
        # the rows of a single GEMM instead of stacking per-batch products.
        a2, dz2 = a.reshape(rows, a.shape[-1]), dz.reshape(rows, n)
        db = matmul(dz2, a2, transpose_a=True) if tb else matmul(a2, dz2, transpose_a=True)
        db = db.reshape(b.shape)
    elif tb:
        db = matmul(dz, a, transpose_a=True, transpose_b=ta)
    else:
        db = matmul(a, dz, transpose_a=not ta)
    grads = (unbroadcast(da, a.shape), unbroadcast(db, b.shape))
    if bias is None:
        return grads
    return (*grads, dz.reshape(rows, n).sum(axis=0, dtype=np.float32))


# ---- softmax --------------------------------------------------------------------------------


def softmax_geometry(
    op: str, shape: tuple[int, ...], axis: object, shard: object
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(axis, global_shape, start) of a softmax over `shape`, checked: the shard must hold
    whole rows along the axis (both engines)."""
    if not shape:
        raise ArgumentError(f"{op}: x must be at least 1-D, got a 0-d array")
    axis = _axis(axis, op, len(shape))
    global_shape, start = _shard(op, shape, shard)
    if global_shape[axis] != shape[axis]:
        raise ArgumentError(
            f"{op}: a shard must hold whole rows along the softmax axis {axis}: its block has "
            f"{shape[axis]} of the {global_shape[axis]} elements there"
        )
    return axis, global_shape, start


def _softmax_primitive(
    op: str,
    shape: tuple[int, ...],
    axis: object,
    p: object,
    mode: object,
    training: object,
    shard: object,
) -> object:
    axis, global_shape, start = softmax_geometry(op, shape, axis, shard)
    desc = _interned(
        SoftmaxDropoutDescriptor,
        shape=shape,
        axis=axis,
        global_shape=global_shape,
        start=start,
        **dropout_fields(op, p, mode, training),
    )
    return core._C.primitive(desc)


def softmax_dropout(
    x: np.ndarray,
    p: float,
    *,
    axis: int = -1,
    seed: int,
    offset: int = 0,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: Shard | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """dropout(softmax(x, axis)), float32, in one pass per block of rows: y, or (y, packed
    mask) with return_mask. Bit-identical to `dropout(softmax(x, axis), p, ...)`. out=x works
    in place; shard places x in a larger tensor (it must hold whole rows along axis)."""
    op = "softmax_dropout"
    x = _float32(x, op, "x")
    seed, offset = as_u64(seed, op, "seed"), as_u64(offset, op, "offset")
    return_mask = as_flag(return_mask, op, "return_mask")
    prim = _softmax_primitive(op, x.shape, axis, p, mode, training, shard)
    y = as_output(out, x.shape, F32, x, op)
    mask = _new_mask(prim, return_mask, op)
    prim.forward(x, y, mask, seed, offset)
    return (y, mask) if return_mask else y


def softmax(x: np.ndarray, axis: int = -1, *, out: np.ndarray | None = None) -> np.ndarray:
    """softmax(x, axis), float32, with softmax_dropout's arithmetic (the same bits on every
    ISA): exactly the probabilities softmax_dropout drops. out=x works in place."""
    op = "softmax"
    x = _float32(x, op, "x")
    prim = _softmax_primitive(op, x.shape, axis, 0.0, "upscale_in_train", True, None)
    y = as_output(out, x.shape, F32, x, op)
    prim.forward(x, y, None, 0, 0)
    return y


def softmax_dropout_backward(
    dy: np.ndarray,
    p: float,
    *,
    x: np.ndarray | None = None,
    probs: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    seed: int | None = None,
    offset: int = 0,
    axis: int = -1,
    mode: str = "upscale_in_train",
    shard: Shard | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """dx for y = softmax_dropout(x, p, ...): dx = P * (g - sum(g * P, axis)) with g = dy *
    keep * scale and P = softmax(x). The dropped output cannot give P back (dropped elements
    lose it), so pass either x (P is recomputed in the same pass, bit-identical to `softmax`)
    or probs = softmax(x). The keep bits come from the packed mask or from seed and offset.
    out=dy works in place."""
    op = "softmax_dropout_backward"
    dy = _float32(dy, op, "dy")
    if (x is None) == (probs is None):
        raise ArgumentError(
            f"{op}: give exactly one of x= (probabilities recomputed) or probs= (softmax(x))"
        )
    name = "x" if probs is None else "probs"
    src = _float32(x if probs is None else probs, op, name)
    if src.shape != dy.shape:
        raise ArgumentError(f"{op}: {name} must have dy's shape {dy.shape}, got {src.shape}")
    prim = _softmax_primitive(op, dy.shape, axis, p, mode, True, shard)
    mask, seed, offset = _seed_or_mask(op, mask, seed, offset, prim.mask_bytes)
    dx = as_output(out, dy.shape, F32, dy, op)
    if out is not None and np.may_share_memory(dx, src):
        raise ArgumentError(f"{op}: out overlaps {name}")
    prim.backward(dy, src, probs is None, mask, seed, offset, dx)
    return dx
