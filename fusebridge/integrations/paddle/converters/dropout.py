"""Paddle's dropout as our Dropout: p and mode checked as Paddle checks them, the seed from the
Seed input or the fix_seed attribute, and the packed 1-bit Mask made only when dropout_grad
reads it."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ArgumentError, ModelFormatError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    define_out,
    one_var,
    optional_var,
    slot_names,
)
from fusebridge.integrations.paddle.program_desc import OpDesc
from fusebridge.kernels.arguments import as_probability
from fusebridge.ops.dropout import MODES


def _probability(cx, op: OpDesc) -> float:
    """dropout_prob, which Paddle requires in [0, 1] (as_probability: NaN refused too)."""
    value = attribute(cx, op, "dropout_prob", "float", 0.5)
    try:
        return as_probability(value, cx.where(), "attribute dropout_prob")
    except ArgumentError as e:
        raise ModelFormatError(str(e)) from None


def dropout_attributes(cx, op: OpDesc) -> dict[str, object]:
    """p and mode of a dropout or dropout_grad, checked as Paddle checks them."""
    return {
        "p": _probability(cx, op),
        # Paddle's default implementation is downgrade_in_infer.
        "mode": choice(cx, op, "dropout_implementation", sorted(MODES), "downgrade_in_infer"),
    }


@CONVERTERS.register("dropout")
def _dropout(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    attrs = {
        **dropout_attributes(cx, op),
        "is_test": int(attribute(cx, op, "is_test", "bool", False)),
    }
    inputs = [cx.value(one_var(cx, op, "X"))]
    if not attrs["is_test"]:
        # Paddle's order: a Seed tensor, else the seed attribute with fix_seed, else its global
        # generator (no seed input here: explicit_rng gives the op a stream).
        seed_var = optional_var(cx, op, "Seed")
        if seed_var:
            seed = cx.cast(cx.value(seed_var), ir.DataType.INT64, f"{out}/seed64")
            inputs.append(cx.add("Reshape", [seed, cx.ints([], f"{out}/0d")], name=f"{out}/seed"))
        elif attribute(cx, op, "fix_seed", "bool", False):
            seed = np.array(attribute(cx, op, "seed", "int", 0), np.int64)
            inputs.append(cx.const(seed, f"{out}/seed"))
    # The Mask (uint8, one byte a value in Paddle) is our packed 1-bit mask: made only when an
    # op reads it (dropout_grad in a training program).
    mask = slot_names(op, "Mask", outputs=True)
    if attrs["is_test"] or not mask or mask[0] not in cx.read:
        define_out(cx, op, cx.add("Dropout", inputs, attrs, name=out, domain=conventions.DOMAIN))
        return
    mask_var = one_var(cx, op, "Mask", outputs=True)
    y, packed = cx.add("Dropout", inputs, attrs, name=out, domain=conventions.DOMAIN, num_outputs=2)
    packed.type = ir.TensorType(ir.DataType.UINT8)
    define_out(cx, op, y)
    cx.define(mask_var, packed)
