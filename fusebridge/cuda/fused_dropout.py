"""Dropout fused into the op that makes its input, on the cuda engine: softmax (the dropout in
the softmax's output pass, one warp a row) and matmul (cuBLAS through CuPy, then one pass that
adds the bias and drops). Bits as fusebridge.kernels' fused ops: element i of the output draws
Philox (seed, offset, i), i its flat index in the whole output. float32; TF32 is not used
(CuPy's matmul leaves it off unless CUPY_TF32 is set)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebridge.cuda import arguments as args
from fusebridge.cuda.device import Launcher, launcher_for, same_device
from fusebridge.cuda.dropout import dropout_backward, primitive, stream_args
from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_flag, as_probability, buffer_bytes
from fusebridge.kernels.dropout import _mode
from fusebridge.kernels.fused_dropout import _matmul_shapes, softmax_geometry, unbroadcast

Shard = tuple[Sequence[int], Sequence[int]]
SOURCE = "softmax_dropout.cu"
F32 = "float32"


def _f32(launcher: Launcher, x: object, op: str, name: str) -> Any:
    arr = same_device(op, launcher, name, x)
    args.float_dtype(op, name, arr, (F32,))
    return args.contiguous(op, name, arr)


def _seed_or_mask(launcher, op, mask, seed, offset, nbytes) -> tuple[Any, tuple | None]:
    if (mask is None) == (seed is None):
        raise ArgumentError(
            f"{op}: give exactly one of mask= (kept by the forward) or seed= (to recompute it)"
        )
    if mask is None:
        return None, stream_args(launcher, seed, offset, op)
    return args.as_mask(launcher, mask, nbytes, op), None


# ---- softmax --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaSoftmaxDropoutDescriptor:
    device: str
    shape: tuple[int, ...]
    axis: int
    global_shape: tuple[int, ...]
    start: tuple[int, ...]
    p: float
    mode: str
    training: bool


class SoftmaxDropoutPrimitive:
    def __init__(self, desc: CudaSoftmaxDropoutDescriptor, launcher: Launcher) -> None:
        self.desc, self.launcher = desc, launcher
        self.decision = args.Decision.of(desc.p, desc.mode, desc.training)
        shape, axis = desc.shape, desc.axis
        self.len, self.inner = shape[axis], math.prod(shape[axis + 1 :])
        self.numel = math.prod(shape)
        self.rows = self.numel // self.len if self.len else 0
        self.mask_bytes = -(-self.numel // 8)
        self.map = args.shard_map(launcher, shape, desc.global_shape, desc.start)
        self.decision_args = self.decision.args()

    def geometry(self, *arrays: Any) -> tuple:
        m = self.map
        vec = self.inner == 1 and self.len % 4 == 0 and args.vectorizable(*arrays, itemsize=4)
        return (
            np.int64(self.rows),
            np.int64(self.len),
            np.int64(self.inner),
            np.int64(m.base),
            np.int32(m.nd),
            m.dims,
        ), np.int32(vec)

    def forward(self, x, y, words, stream) -> None:
        if self.rows == 0:
            return
        geometry, vec = self.geometry(x, y)
        self.launcher.launch(
            SOURCE,
            "softmax_dropout_forward",
            self.rows,
            (x, y, words, *geometry, *stream, *self.decision_args, vec),
        )

    def backward(self, dy, src, from_x, mask, stream, dx) -> None:
        if self.rows == 0:
            return
        geometry, vec = self.geometry(dy, src, dx)
        stream = stream or args.NO_STREAM
        self.launcher.launch(
            SOURCE,
            "softmax_dropout_backward",
            self.rows,
            (dy, src, np.int32(from_x), mask, dx, *geometry, *stream, *self.decision_args, vec),
        )


def _softmax_primitive(launcher, op, shape, axis, p, mode, training, shard):
    axis, global_shape, start = softmax_geometry(op, shape, axis, shard)
    desc = CudaSoftmaxDropoutDescriptor(
        launcher.device,
        tuple(shape),
        axis,
        tuple(global_shape),
        tuple(start),
        as_probability(p, op),
        _mode(mode, op),
        as_flag(training, op, "training"),
    )
    return args.cached(op, desc, lambda d: SoftmaxDropoutPrimitive(d, launcher))


def softmax_dropout(
    x: Any,
    p: float,
    *,
    axis: int = -1,
    seed: int | Any,
    offset: int | Any = 0,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: Shard | None = None,
    out: Any = None,
) -> Any:
    """dropout(softmax(x, axis)) in one pass over the rows: y, or (y, packed mask) with
    return_mask. The bits are those of `dropout` of the softmax; out=x works in place."""
    op = "softmax_dropout"
    launcher, x = launcher_for(op, "x", x)
    x = _f32(launcher, x, op, "x")
    return_mask = as_flag(return_mask, op, "return_mask")
    prim = _softmax_primitive(launcher, op, tuple(x.shape), axis, p, mode, training, shard)
    stream = stream_args(launcher, seed, offset, op)
    y = args.output(launcher, out, x.shape, F32, op, in_place=x)
    words = args.mask_words(launcher, prim.numel, op, zeros=True) if return_mask else None
    prim.forward(x, y, words, stream)
    return (y, args.mask_view(words, prim.numel)) if return_mask else y


def softmax(x: Any, axis: int = -1, *, out: Any = None) -> Any:
    """softmax(x, axis) by softmax_dropout's kernel with p = 0: the probabilities it drops."""
    op = "softmax"
    launcher, x = launcher_for(op, "x", x)
    x = _f32(launcher, x, op, "x")
    prim = _softmax_primitive(
        launcher, op, tuple(x.shape), axis, 0.0, "upscale_in_train", True, None
    )
    y = args.output(launcher, out, x.shape, F32, op, in_place=x)
    prim.forward(x, y, None, args.NO_STREAM)
    return y


def softmax_dropout_backward(
    dy: Any,
    p: float,
    *,
    x: Any = None,
    probs: Any = None,
    mask: Any = None,
    seed: int | Any = None,
    offset: int | Any = 0,
    axis: int = -1,
    mode: str = "upscale_in_train",
    shard: Shard | None = None,
    out: Any = None,
) -> Any:
    """dx for y = softmax_dropout(x, p, ...): P * (g - sum(g * P, axis)) with g = dy * keep *
    scale; P recomputed from x or given as probs; bits from the mask or from seed and offset.
    out=dy works in place."""
    op = "softmax_dropout_backward"
    launcher, dy = launcher_for(op, "dy", dy)
    dy = _f32(launcher, dy, op, "dy")
    if (x is None) == (probs is None):
        raise ArgumentError(
            f"{op}: give exactly one of x= (probabilities recomputed) or probs= (softmax(x))"
        )
    name = "x" if probs is None else "probs"
    src = _f32(launcher, x if probs is None else probs, op, name)
    if tuple(src.shape) != tuple(dy.shape):
        raise ArgumentError(f"{op}: {name} must have dy's shape {tuple(dy.shape)}, got {src.shape}")
    prim = _softmax_primitive(launcher, op, tuple(dy.shape), axis, p, mode, True, shard)
    mask, stream = _seed_or_mask(launcher, op, mask, seed, offset, prim.mask_bytes)
    dx = args.output(launcher, out, dy.shape, F32, op, src, mask, in_place=dy)
    prim.backward(dy, src, probs is None, mask, stream, dx)
    return dx


# ---- matmul ---------------------------------------------------------------------------------


def _operand(x: Any, transpose: bool) -> Any:
    return x.swapaxes(-1, -2) if transpose else x


def _matmul(launcher, op, a, b, bias, transpose_a, transpose_b, out) -> tuple[Any, Any]:
    """(y = op(a) @ op(b) by cuBLAS, bias checked), every argument checked first."""
    a, b = _f32(launcher, a, op, "a"), _f32(launcher, b, op, "b")
    transpose_a = as_flag(transpose_a, op, "transpose_a")
    transpose_b = as_flag(transpose_b, op, "transpose_b")
    *_, n, _, shape = _matmul_shapes(op, a, b, transpose_a, transpose_b)
    buffer_bytes(shape, 4, op, "the output")
    if bias is not None:
        bias = _f32(launcher, bias, op, "bias")
        if tuple(bias.shape) != (n,):
            raise ArgumentError(f"{op}: bias must have shape (N,) = ({n},), got {bias.shape}")
    y = args.output(launcher, out, shape, F32, op, a, b, bias)
    launcher.xp.matmul(_operand(a, transpose_a), _operand(b, transpose_b), out=y)
    return y, bias


def matmul_dropout(
    a: Any,
    b: Any,
    p: float,
    *,
    seed: int | Any,
    offset: int | Any = 0,
    bias: Any = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    mode: str = "upscale_in_train",
    training: bool = True,
    return_mask: bool = False,
    shard: Shard | None = None,
    out: Any = None,
) -> Any:
    """dropout(op(a) @ op(b) (+ bias)), float32, batched like matmul: the GEMM by cuBLAS, then
    one pass adding the bias and dropping. y, or (y, packed mask) with return_mask."""
    op = "matmul_dropout"
    launcher, a = launcher_for(op, "a", a)
    return_mask = as_flag(return_mask, op, "return_mask")
    b_arr = same_device(op, launcher, "b", b)
    # The output's dropout primitive checks p, mode, training and shard before the GEMM runs.
    _, _, _, shape = _matmul_shapes(
        op,
        a,
        b_arr,
        as_flag(transpose_a, op, "transpose_a"),
        as_flag(transpose_b, op, "transpose_b"),
    )
    prim = primitive(launcher, op, tuple(shape), F32, p, mode, training, (), None, shard)
    stream = stream_args(launcher, seed, offset, op)
    y, bias = _matmul(launcher, op, a, b_arr, bias, transpose_a, transpose_b, out)
    words = args.mask_words(launcher, prim.mask_numel, op) if return_mask else None
    prim.forward(y, y, words, stream, bias=bias, bias_n=shape[-1])
    return (y, args.mask_view(words, prim.mask_numel)) if return_mask else y


def matmul(
    a: Any,
    b: Any,
    *,
    bias: Any = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out: Any = None,
) -> Any:
    """op(a) @ op(b) (+ bias), float32, by the same cuBLAS call as matmul_dropout."""
    op = "matmul"
    launcher, a = launcher_for(op, "a", a)
    y, bias = _matmul(launcher, op, a, b, bias, transpose_a, transpose_b, out)
    if bias is not None:
        y += bias
    return y


def matmul_dropout_backward(
    dy: Any,
    a: Any,
    b: Any,
    p: float,
    *,
    mask: Any = None,
    seed: int | Any = None,
    offset: int | Any = 0,
    bias: Any = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    mode: str = "upscale_in_train",
    shard: Shard | None = None,
) -> tuple[Any, ...]:
    """(da, db), or (da, db, dbias) when the forward's bias is given, for y =
    matmul_dropout(a, b, p, ...): dz = dropout_backward(dy) from the mask or recomputed bits,
    then da = dz @ op(b)^T and db = op(a)^T @ dz by cuBLAS, mapped back through the
    transposes and summed over broadcast batches."""
    op = "matmul_dropout_backward"
    launcher, dy = launcher_for(op, "dy", dy)
    dy = _f32(launcher, dy, op, "dy")
    a, b = _f32(launcher, a, op, "a"), _f32(launcher, b, op, "b")
    ta, tb = as_flag(transpose_a, op, "transpose_a"), as_flag(transpose_b, op, "transpose_b")
    *_, n, _, shape = _matmul_shapes(op, a, b, ta, tb)
    if tuple(dy.shape) != tuple(shape):
        raise ArgumentError(f"{op}: dy must have the output's shape {shape}, got {dy.shape}")
    if bias is not None and tuple(_f32(launcher, bias, op, "bias").shape) != (n,):
        raise ArgumentError(f"{op}: bias must have shape (N,) = ({n},), got {bias.shape}")
    dz = dropout_backward(dy, p, mask=mask, seed=seed, offset=offset, mode=mode, shard=shard)
    xp = launcher.xp
    opa, opb = _operand(a, ta), _operand(b, tb)
    d_opa = xp.matmul(dz, opb.swapaxes(-1, -2))
    d_opb = xp.matmul(opa.swapaxes(-1, -2), dz)
    da = unbroadcast(_operand(d_opa, ta), tuple(a.shape))
    db = unbroadcast(_operand(d_opb, tb), tuple(b.shape))
    grads = (xp.ascontiguousarray(da), xp.ascontiguousarray(db))
    if bias is None:
        return grads
    return (*grads, dz.reshape(-1, n).sum(axis=0))
