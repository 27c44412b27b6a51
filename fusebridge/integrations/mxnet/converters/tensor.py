"""MXNet's ops that make a tensor or pass one on: _zeros, _ones and _full (data when small, else
a ConstantOfShape), and the identities (_copy, BlockGrad, ...)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx_ir as ir

from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    typed_scalar,
)
from fusebridge.integrations.mxnet.symbol import MXNode

# A fill of up to this many elements is made at load, as data the folds and passes can read
# (a bias of ones, a small initial state): at most 4 KiB of float32, so a graph of n such
# nodes costs about 70x its JSON. A larger one is a ConstantOfShape: no memory until it runs.
_DENSE_FILL = 1024
# No machine maps more than this (the 47-bit user address space of x86-64 and arm64): a fill
# this large can never run, so it is refused at load.
_ADDRESSABLE = 1 << 47
# The dtype names MXNet's creation ops take (mshadow's type names).
_FILL_DTYPES = {
    name: np.dtype(t)
    for name, t in (
        ("float32", np.float32),
        ("float64", np.float64),
        ("float16", np.float16),
        ("bfloat16", ml_dtypes.bfloat16),
        ("uint8", np.uint8),
        ("int8", np.int8),
        ("int32", np.int32),
        ("int64", np.int64),
        ("bool", np.bool_),
    )
}


@CONVERTERS.register("_copy", "identity", "BlockGrad", "stop_gradient", "_copyto")
def _identity(cx, node: MXNode) -> None:
    x = cx.input(0)
    cx.define(cx.add("Identity", [x]), known=[cx.array(x)])


@CONVERTERS.register("_zeros", "_ones", "_full")
def _filled(cx, node: MXNode) -> None:
    """A tensor of one value: data when small, else ConstantOfShape (see _DENSE_FILL)."""
    shape = cx.attr("shape", "ints")
    if shape is None or any(d < 0 for d in shape):
        bad_attribute(cx, "shape", shape, "dims >= 0 (0: inferred when it runs)")
    name = cx.attr("dtype", "str", "float32")
    if name not in _FILL_DTYPES:
        bad_attribute(cx, "dtype", name, f"one of {', '.join(_FILL_DTYPES)}")
    dtype = _FILL_DTYPES[name]
    if 0 in shape:
        if node.op != "_zeros":
            raise UnsupportedOpError(f"{cx.where()}: shape {shape} has dims inferred at run time")
        # gluon's RNN begin state (L*D, 0, H): the batch is known only when it runs.
        cx.zero_states.add((cx.index, 0))
        return
    fill = {"_zeros": 0.0, "_ones": 1.0}.get(node.op)
    value = typed_scalar(cx, "value", cx.attr("value", "float") if fill is None else fill, dtype)
    count = math.prod(shape)  # Python ints: no overflow
    if count * dtype.itemsize > _ADDRESSABLE:
        bad_attribute(
            cx, "shape", shape, f"at most {_ADDRESSABLE} bytes of {dtype} (47-bit addresses)"
        )
    if count <= _DENSE_FILL:
        cx.spend(count * dtype.itemsize)
        cx.define(cx.const(np.full(shape, value, dtype), node.name))
        return
    dims = cx.ints(list(shape), f"{node.name}/shape")
    attrs = {"value": ir.tensor(value.reshape(1))}
    cx.define(cx.add("ConstantOfShape", [dims], attrs, dtype=ir.DataType.from_numpy(dtype)))
