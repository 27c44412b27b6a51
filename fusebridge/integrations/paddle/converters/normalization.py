"""Paddle's normalizations: layer_norm as ONNX's LayerNormalization (transformer blocks), and
batch_norm at inference (the saved running mean and variance) as BatchNormalization."""

from __future__ import annotations

import math

import numpy as np

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    define_out,
    one_var,
    optional_var,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


@CONVERTERS.register("layer_norm", lod=None)
def _layer_norm(cx, op: OpDesc) -> None:
    """LayerNormalization over the axes from begin_norm_axis; Paddle's Scale and Bias are
    flat [prod(normalized dims)], reshaped to those dims when they are known."""
    out = one_var(cx, op, "Y", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = attribute(cx, op, "begin_norm_axis", "int", 1)
    if not 1 <= axis < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute begin_norm_axis = {axis} must lie in [1, {rank})"
        )
    dims = cx.block.vars[xv].shape[axis:] if xv in cx.block.vars else ()
    epsilon = attribute(cx, op, "epsilon", "float", 1e-5)
    x = cx.value(xv)
    affine = []
    for slot, fill in (("Scale", 1.0), ("Bias", 0.0)):
        var = optional_var(cx, op, slot)
        if var is None:
            size = math.prod(dims) if dims and min(dims) > 0 else None
            if size is None:
                raise UnsupportedOpError(
                    f"{cx.where()}: without {slot}, the normalized dims of {xv!r} must be known"
                )
            affine.append(cx.const(np.full(dims, fill, np.float32), f"{out}/{slot.lower()}"))
            continue
        p = cx.param(var)
        if len(dims) > 1 and min(dims) > 0 and p.size == math.prod(dims):
            affine.append(cx.const(p.reshape(dims), f"{var}/shaped"))
        elif len(dims) > 1 or p.ndim != 1:
            raise UnsupportedOpError(
                f"{cx.where()}: {slot} {var!r} {list(p.shape)} for normalized dims "
                f"{list(dims)} is not supported"
            )
        else:
            affine.append(cx.value(var))
    y = cx.add(
        "LayerNormalization", [x, *affine], {"axis": axis, "epsilon": float(epsilon)}, name=out
    )
    define_out(cx, op, y, "Y")


@CONVERTERS.register("batch_norm", lod=None)
def _batch_norm(cx, op: OpDesc) -> None:
    """(x - mean) / sqrt(variance + epsilon) * scale + bias over the channel axis (1, or the
    last for NHWC data), with the saved statistics: is_test or use_global_stats must be set
    (otherwise Paddle normalizes by the batch's own statistics, training's arithmetic)."""
    out = one_var(cx, op, "Y", outputs=True)
    xv = one_var(cx, op, "X")
    if not (
        attribute(cx, op, "is_test", "bool", False)
        or attribute(cx, op, "use_global_stats", "bool", False)
    ):
        raise UnsupportedOpError(
            f"{cx.where()}: is_test and use_global_stats are both False (the batch's own "
            "statistics, as in training); only inference batch_norm is supported"
        )
    rank = cx.rank_of(xv)
    layout = choice(cx, op, "data_layout", ("NCHW", "NHWC", "AnyLayout"), "NCHW")
    if rank < 2:
        raise ModelFormatError(f"{cx.where()}: X {xv!r} has rank {rank}; expected 2 or more")
    stats = [cx.value(one_var(cx, op, s)) for s in ("Scale", "Bias", "Mean", "Variance")]
    epsilon = float(attribute(cx, op, "epsilon", "float", 1e-5))
    x = cx.value(xv)
    last = layout == "NHWC" and rank > 2
    if last:  # channels last: moved to axis 1 and back
        to_first = [0, rank - 1, *range(1, rank - 1)]
        x = cx.add("Transpose", [x], {"perm": to_first}, name=f"{out}/nc")
    y = cx.add(
        "BatchNormalization", [x, *stats], {"epsilon": epsilon}, name=f"{out}/nc" if last else out
    )
    if last:
        y = cx.add("Transpose", [y], {"perm": [0, *range(2, rank), 1]}, name=out)
    define_out(cx, op, y, "Y")
