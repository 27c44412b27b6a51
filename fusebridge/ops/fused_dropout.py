"""MatMulDropout and SoftmaxDropout (the producer and the dropout in one pass over memory, with
the bits of the producer followed by Dropout) and SoftmaxDropoutGrad."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.ops.common import OpDef, ReferenceOp, Run, per_engine, require_seed, scalar
from fusebridge.ops.dropout import (
    MODE,
    P,
    mask_or_seed,
    mask_or_seed_arguments,
    reference_backward,
    reference_dropout,
)
from fusebridge.ops.schema import Attribute, OpSchema, axis_in_rank

SOFTMAX_AXIS = Attribute("axis", -1, doc="the softmax axis, in [-rank, rank)", check=axis_in_rank)


@dataclasses.dataclass(frozen=True)
class MatMulDropoutAttributes:
    p: float = 0.5
    mode: str = "upscale_in_train"
    transpose_a: int = 0
    transpose_b: int = 0


@dataclasses.dataclass(frozen=True)
class SoftmaxDropoutAttributes:
    p: float = 0.5
    mode: str = "upscale_in_train"
    axis: int = -1


MATMUL_DROPOUT_SCHEMA = OpSchema(
    "MatMulDropout",
    ("A", "B", "bias?", "seed?", "offset?"),
    ("Y", "mask?"),
    (P, MODE, Attribute("transpose_a", 0, (0, 1)), Attribute("transpose_b", 0, (0, 1))),
    "Dropout(MatMul(A, B) + bias) in one pass: each block of the product is dropped "
    "while in cache. Output element (batch, m, n) draws index batch*M*N + m*N + n, so "
    "the bits are those of MatMul followed by Dropout (the matmul_dropout rule).",
    ("X", "uint8"),
    ("X", 1),
    attributes_type=MatMulDropoutAttributes,
)
SOFTMAX_DROPOUT_SCHEMA = OpSchema(
    "SoftmaxDropout",
    ("X", "seed?", "offset?"),
    ("Y", "mask?"),
    (P, MODE, SOFTMAX_AXIS),
    "Dropout(Softmax(X, axis)) in one pass per row; the bits of Softmax followed by "
    "Dropout (the softmax_dropout rule).",
    ("X", "uint8"),
    ("X", 1),
    attributes_type=SoftmaxDropoutAttributes,
)
SOFTMAX_DROPOUT_GRAD_SCHEMA = OpSchema(
    "SoftmaxDropoutGrad",
    ("dY", "X", "mask?", "seed?", "offset?"),
    ("dX",),
    (P, MODE, SOFTMAX_AXIS),
    "The backward of SoftmaxDropout from the forward's input: P = Softmax(X, axis) "
    "recomputed (the probabilities are not kept), g = dY * keep * scale, dX = P * (g - "
    "sum(g * P, axis)). keep from the packed mask or recomputed from (seed, offset), "
    "as for DropoutGrad (the softmax_dropout_training rule).",
    output_ranks=("X",),
    attributes_type=SoftmaxDropoutAttributes,
)


def _matmul_binding(
    engine, node: ir.Node, attrs: MatMulDropoutAttributes, constants: dict, reuse: bool
) -> Run:
    require_seed(node, 3)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        a, b, bias, seed, offset = inputs
        out = engine.matmul_dropout(
            a,
            b,
            attrs.p,
            seed=scalar(seed, "seed"),
            offset=scalar(offset, "offset"),
            bias=bias,
            transpose_a=bool(attrs.transpose_a),
            transpose_b=bool(attrs.transpose_b),
            mode=attrs.mode,
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _softmax_binding(
    engine, node: ir.Node, attrs: SoftmaxDropoutAttributes, constants: dict, reuse: bool
) -> Run:
    require_seed(node, 1)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, seed, offset = inputs
        out = engine.softmax_dropout(
            x,
            attrs.p,
            axis=attrs.axis,
            seed=scalar(seed, "seed"),
            offset=scalar(offset, "offset"),
            mode=attrs.mode,
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _softmax_grad_binding(
    engine, node: ir.Node, attrs: SoftmaxDropoutAttributes, constants: dict, reuse: bool
) -> Run:
    mask_or_seed(node, 2)

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        dy, x, mask, seed, offset = inputs
        dx = engine.softmax_dropout_backward(
            dy,
            attrs.p,
            x=x,
            offset=scalar(offset, "offset"),
            axis=attrs.axis,
            mode=attrs.mode,
            **mask_or_seed_arguments(mask, seed),
        )
        return [dx]

    return run


def _softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


class MatMulDropout(ReferenceOp):
    schema = MATMUL_DROPOUT_SCHEMA

    def _run(self, a, b, bias=None, seed=None, offset=None, **_):
        at = self.attrs()
        a = np.swapaxes(a, -1, -2) if at.transpose_a else a
        b = np.swapaxes(b, -1, -2) if at.transpose_b else b
        product = np.matmul(a.astype(np.float64), b.astype(np.float64))
        if bias is not None:
            product = product + bias
        y, mask = reference_dropout(product, at.p, at.mode, (), seed, offset)
        return (y.astype(np.float32), mask)[: self.n_outputs]


class SoftmaxDropout(ReferenceOp):
    schema = SOFTMAX_DROPOUT_SCHEMA

    def _run(self, x, *rng, **_):
        seed, offset = (*rng, None, None)[:2]
        at = self.attrs()
        y, mask = reference_dropout(_softmax64(x, at.axis), at.p, at.mode, (), seed, offset)
        return (y.astype(np.float32), mask)[: self.n_outputs]


class SoftmaxDropoutGrad(ReferenceOp):
    schema = SOFTMAX_DROPOUT_GRAD_SCHEMA

    def _run(self, dy, x, mask=None, seed=None, offset=None, **_):
        a = self.attrs()
        g = reference_backward(dy, a.p, a.mode, (), mask, seed, offset).astype(np.float64)
        probs = _softmax64(x, a.axis)
        dx = probs * (g - (g * probs).sum(axis=a.axis, keepdims=True))
        return (dx.astype(np.float32),)


OPS = (
    OpDef(MATMUL_DROPOUT_SCHEMA, MatMulDropout, per_engine(_matmul_binding)),
    OpDef(SOFTMAX_DROPOUT_SCHEMA, SoftmaxDropout, per_engine(_softmax_binding)),
    OpDef(SOFTMAX_DROPOUT_GRAD_SCHEMA, SoftmaxDropoutGrad, per_engine(_softmax_grad_binding)),
)
