"""Dropout (standalone, with an optional 1-bit packed mask) and DropoutGrad (its backward, from
the mask or from the forward's seed and offset). Element i draws from Philox (seed, offset, i):
docs/dropout.md, The bit contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.graph.checks import describe
from fusebridge.kernels import reference
from fusebridge.kernels.dropout import MODES as KERNEL_MODES
from fusebridge.ops.common import OpDef, ReferenceOp, Run, given, per_engine, require_seed, scalar
from fusebridge.ops.schema import Attribute, OpSchema, distinct_axes, probability

MODES: tuple[str, ...] = tuple(KERNEL_MODES)

P = Attribute("p", 0.5, doc="probability of dropping an element, in [0, 1]", check=probability)
MODE = Attribute("mode", "upscale_in_train", MODES)
AXES = Attribute(
    "axes",
    (),
    doc="mask shared along these axes (each once, in [-rank, rank))",
    check=distinct_axes,
)


def keep_scale(p: float, mode: str) -> float:
    """What a kept element is multiplied by in training: 1 / (1 - p) (upscale_in_train, p of
    float32 precision, as the kernels use it) or 1."""
    p32 = float(np.float32(p))
    return 1.0 / (1.0 - p32) if mode == "upscale_in_train" and p32 < 1.0 else 1.0


@dataclasses.dataclass(frozen=True)
class DropoutAttributes:
    p: float = 0.5
    mode: str = "upscale_in_train"
    axes: tuple[int, ...] = ()
    is_test: int = 0

    @property
    def inference_scale(self) -> float:
        """What an is_test Dropout multiplies by: 1 (upscale_in_train) or 1 - p."""
        return 1.0 if self.mode == "upscale_in_train" else 1.0 - self.p


@dataclasses.dataclass(frozen=True)
class DropoutGradAttributes:
    p: float = 0.5
    mode: str = "upscale_in_train"
    axes: tuple[int, ...] = ()


DROPOUT_SCHEMA = OpSchema(
    "Dropout",
    ("X", "seed?", "offset?"),
    ("Y", "mask?"),
    (P, MODE, AXES, Attribute("is_test", 0, (0, 1), "1: inference (no mask drawn)")),
    "Standalone dropout; element i draws from Philox (seed, offset, i) "
    "(docs/dropout.md, The bit contract). mask: the 1-bit packed keep mask (uint8).",
    ("X", "uint8"),
    ("X", 1),
    attributes_type=DropoutAttributes,
)
DROPOUT_GRAD_SCHEMA = OpSchema(
    "DropoutGrad",
    ("dY", "mask?", "seed?", "offset?"),
    ("dX",),
    (P, MODE, AXES),
    "The backward of a training dropout (Dropout, MatMulDropout, SoftmaxDropout): "
    "dX = dY * keep * scale. keep comes from the packed mask the forward wrote, or, "
    "without a mask, is recomputed from the forward's (seed, offset) over dY's shape "
    "(the pass recompute_dropout_mask: no mask kept between the passes). Give one of "
    "mask and seed.",
    output_ranks=("X",),
    attributes_type=DropoutGradAttributes,
)


def mask_or_seed(node: ir.Node, mask_slot: int) -> None:
    """A dropout backward takes the forward's mask, or its seed to recompute the bits."""
    mask, seed = given(node, mask_slot), given(node, mask_slot + 1)
    if mask == seed:
        raise ArgumentError(
            f"{describe(node)}: give one of mask (kept by the forward) "
            f"and seed (to recompute it), got {'both' if mask else 'neither'}"
        )


def mask_or_seed_arguments(mask: np.ndarray | None, seed: np.ndarray | None) -> dict:
    return {"mask": mask} if mask is not None else {"seed": scalar(seed, "seed")}


def check_axes_fit(axes: tuple[int, ...], x: np.ndarray, where: str = "") -> None:
    """Raises ModelFormatError where axes do not fit x's rank: for a dropout whose input rank
    was unknown when it was parsed (an MXNet symbol declares no shapes)."""
    if why := distinct_axes(axes, np.ndim(x)):
        raise ModelFormatError(
            f"{where}attribute axes = {axes}: {why} (input shaped {list(np.shape(x))})"
        )


def _run_check(node: ir.Node) -> Callable[[np.ndarray], None] | None:
    """An inference dropout with axes whose input rank is unknown: its axes against each run's
    input (OpDef.run_check)."""
    attrs = DROPOUT_SCHEMA.parse(node)
    if not (attrs.is_test and attrs.axes) or node.inputs[0].shape is not None:
        return None
    at = f"Session: {describe(node)}: "
    return lambda x: check_axes_fit(attrs.axes, x, at)


def _dropout_binding(
    engine, node: ir.Node, attrs: DropoutAttributes, constants: dict, reuse: bool
) -> Run:
    if attrs.is_test:
        scale = attrs.inference_scale
        if len(node.outputs) > 1:
            raise ArgumentError(f"{describe(node)}: is_test has no mask output")
        # Axes were checked against the rank when it was known (schema.parse); where it was
        # not (an MXNet symbol declares no shapes), against each run's input.
        unchecked = attrs.axes if node.inputs[0].shape is None else ()

        def run_test(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
            x = inputs[0]
            if unchecked:
                check_axes_fit(unchecked, x)  # the Session's step names the node before it
            return [x if scale == 1.0 else x * x.dtype.type(scale)]

        return run_test
    require_seed(node, 1)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, seed, offset = inputs
        out = engine.dropout(
            x,
            attrs.p,
            seed=scalar(seed, "seed"),
            offset=scalar(offset, "offset"),
            axes=attrs.axes,
            mode=attrs.mode,
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _grad_binding(
    engine, node: ir.Node, attrs: DropoutGradAttributes, constants: dict, reuse: bool
) -> Run:
    mask_or_seed(node, 1)

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        dy, mask, seed, offset = inputs
        dx = engine.dropout_backward(
            dy,
            attrs.p,
            offset=scalar(offset, "offset"),
            axes=attrs.axes,
            mode=attrs.mode,
            **mask_or_seed_arguments(mask, seed),
        )
        return [dx]

    return run


def mask_shape(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[int, ...]:
    """The mask's shape: 1 along the shared axes."""
    shared = {axis % len(shape) for axis in axes}
    return tuple(1 if i in shared else n for i, n in enumerate(shape))


def reference_dropout(x: np.ndarray, p: float, mode: str, axes, seed, offset) -> tuple:
    """reference.dropout of x under (seed, offset): (y in x's dtype, packed mask)."""
    seed = scalar(seed, "seed")
    offset = scalar(offset, "offset")
    y, mask = reference.dropout(x, p, seed, offset, mask_shape(x.shape, axes), mode)
    return y.astype(x.dtype), mask


def reference_backward(dy, p: float, mode: str, axes, mask, seed, offset) -> np.ndarray:
    """dy * keep * scale, keep from the packed mask or redrawn from (seed, offset)."""
    shape = mask_shape(dy.shape, axes)
    if mask is None:  # recomputed: the bits the forward drew over the same shape
        ones = np.ones(shape, np.float32)
        mask = reference.dropout(ones, p, scalar(seed, "seed"), scalar(offset, "offset"), shape)[1]
    keep = reference.unpack_mask(mask, shape)
    return reference.apply(dy, np.broadcast_to(keep, dy.shape), keep_scale(p, mode))


class Dropout(ReferenceOp):
    schema = DROPOUT_SCHEMA

    # seed, offset positionally: onnx.reference also passes ONNX Dropout's `seed` attribute.
    def _run(self, x, *rng, **_):
        seed, offset = (*rng, None, None)[:2]
        a = self.attrs()
        if a.is_test:
            return (x * x.dtype.type(a.inference_scale),)
        return reference_dropout(x, a.p, a.mode, a.axes, seed, offset)[: self.n_outputs]


class DropoutGrad(ReferenceOp):
    schema = DROPOUT_GRAD_SCHEMA

    def _run(self, dy, mask=None, seed=None, offset=None, **_):
        a = self.attrs()
        return (reference_backward(dy, a.p, a.mode, a.axes, mask, seed, offset),)


def lower(op, node: ir.Node) -> list[ir.Value]:
    attrs = DROPOUT_SCHEMA.parse(node)
    if not attrs.is_test:
        raise UnsupportedOpError(
            f"{describe(node)}: a training dropout (is_test 0) draws its mask from Philox "
            "(seed, offset); ONNX Dropout's generator is the runtime's own, so the bits would "
            "differ: export the inference graph"
        )
    if len(node.outputs) > 1:
        raise UnsupportedOpError(f"{describe(node)}: an inference dropout has no mask output")
    x = node.inputs[0]
    if attrs.inference_scale == 1.0:
        return [op.Identity(x)]
    scale = op.const(np.float32(attrs.inference_scale), "keep_scale")
    return [op.Mul(x, op.CastLike(scale, x))]


OPS = (
    OpDef(DROPOUT_SCHEMA, Dropout, per_engine(_dropout_binding), lower, run_check=_run_check),
    OpDef(DROPOUT_GRAD_SCHEMA, DropoutGrad, per_engine(_grad_binding)),
)
