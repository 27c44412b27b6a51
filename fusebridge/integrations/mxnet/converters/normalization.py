"""MXNet's BatchNorm at inference, as ONNX's BatchNormalization: (x - moving_mean) /
sqrt(moving_var + eps) * gamma + beta over the channel axis.

MXNet normalizes by the moving statistics whenever it does not train, whatever
use_global_stats says (checked on 1.9.1), so that attribute is not read. fix_gamma (True by
default; gluon writes False unless scale=False) treats gamma as ones."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    check_axes,
    dim_of,
    dims_after,
    dims_product,
    finite_attribute,
    shape_of,
    unsupported_attribute,
)
from fusebridge.integrations.mxnet.symbol import MXNode


@CONVERTERS.register("BatchNorm")
def _batch_norm(cx, node: MXNode) -> None:
    if cx.attr("output_mean_var", "bool", False):
        # MXNet's second and third outputs are the mean and the inverse standard deviation.
        unsupported_attribute(cx, "output_mean_var", True, "False (the normalized data alone)")
    if len(node.inputs) != 5:
        raise ModelFormatError(
            f"{cx.where()}: {len(node.inputs)} inputs, expected data, gamma, beta, "
            "moving_mean, moving_var"
        )
    eps = finite_attribute(cx, "eps", 1e-3)
    if eps < 0:
        bad_attribute(cx, "eps", eps, "a number >= 0")
    x, gamma, beta, mean, var = (cx.input(k) for k in range(5))
    if cx.attr("fix_gamma", "bool", True):
        gamma = _ones_like(cx, gamma)
    axis = cx.attr("axis", "int", 1)
    check_axes(cx, "axis", [axis], cx.rank(x))
    attrs = {"epsilon": eps}
    if axis == 1 or (cx.rank(x) is not None and axis % cx.rank(x) == 1):
        cx.define(cx.add("BatchNormalization", [x, gamma, beta, mean, var], attrs))
        return
    # Another channel axis, rank-agnostic: x viewed as [before, C, after], normalized, reshaped.
    view = [dims_product(cx, x, 0, axis), dim_of(cx, x, axis), dims_after(cx, x, axis)]
    three = cx.add("Reshape", [x, cx.add("Concat", view, {"axis": 0})])
    y = cx.add("BatchNormalization", [three, gamma, beta, mean, var], attrs)
    cx.define(cx.add("Reshape", [y, shape_of(cx, x, 0)]))


def _ones_like(cx, gamma: ir.Value) -> ir.Value:
    """Ones of gamma's shape and dtype: folded when gamma is a parameter (as in every export)."""
    if cx.array(gamma) is not None:
        return cx.fold("ones", gamma, np.ones_like)
    dtype = gamma.dtype.numpy() if gamma.dtype is not None else np.float32
    one = cx.const(np.ones((), dtype), f"{cx.node.name}/one")
    return cx.add("Expand", [one, shape_of(cx, gamma, 0)])
