"""Converters for the shape and tensor-building ops Paddle 3 programs hold around nn.GRU /
nn.LSTM (the initial state built from the input's shape) and transformer blocks: shape, slice,
stack, assign_value, assign, layer_norm. Registered in CONVERTERS like op_converters.py's;
PIR programs reach them through pir_program.py's translation."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.op_converters import (
    _PADDLE_DTYPES,
    _attr,
    _axis,
    _choice,
    _many,
    _names,
    _one,
    _opt,
    _out,
    _shown,
    converter,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

# assign_value's attribute per data type (Paddle's assign_value op).
_ASSIGN_VALUES = {
    ir.DataType.INT32: ("int32_values", "ints"),
    ir.DataType.INT64: ("int64_values", "ints"),
    ir.DataType.FLOAT: ("fp32_values", "floats"),
    ir.DataType.BOOL: ("bool_values", "bools"),
}
_MAX_ASSIGNED = 1 << 20


@converter("shape", lod=None)
def _shape(cx, op: OpDesc) -> None:
    """Shape; legacy `shape` declares int32 (PIR's shape64 int64): the declared type wins."""
    out = _one(cx, op, "Out", outputs=True)
    shape = cx.add("Shape", [cx.value(_one(cx, op, "Input"))], name=out, dtype=ir.DataType.INT64)
    dtype = cx.dtype_of(out) or ir.DataType.INT64
    _out(cx, op, shape if dtype == ir.DataType.INT64 else cx.cast(shape, dtype, f"{out}/cast"))


def _int_list(cx, op: OpDesc, name: str) -> list[int]:
    return list(_attr(cx, op, name, "ints", []))


def _bounds(cx, op: OpDesc, which: str, count: int, out: str) -> ir.Value:
    """slice's starts or ends: the attribute, or its 1-D tensor input (StartsTensor)."""
    tensor = _opt(cx, op, f"{which.capitalize()}Tensor")
    if _names(op, f"{which.capitalize()}TensorList"):
        raise UnsupportedOpError(
            f"{cx.where()}: input {which.capitalize()}TensorList is not supported (use "
            f"{which} or {which.capitalize()}Tensor)"
        )
    if tensor:
        return cx.cast(cx.value(tensor), ir.DataType.INT64, f"{out}/{which}")
    values = _int_list(cx, op, which)
    if len(values) != count:
        raise ModelFormatError(
            f"{cx.where()}: attribute {which} = {_shown.repr(values)} has {len(values)} "
            f"entries, expected one per axis ({count})"
        )
    return cx.ints(values, f"{out}/{which}")


@converter("slice", lod=None)
def _slice(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "Input")
    rank = cx.rank_of(xv)
    axes = _int_list(cx, op, "axes")
    if not axes or any(not -rank <= a < rank for a in axes):
        raise ModelFormatError(
            f"{cx.where()}: attribute axes = {_shown.repr(axes)} must name axes of the rank "
            f"{rank} input {xv!r}"
        )
    starts = _bounds(cx, op, "starts", len(axes), out)
    ends = _bounds(cx, op, "ends", len(axes), out)
    y = cx.add(
        "Slice", [cx.value(xv), starts, ends, cx.ints(axes, f"{out}/axes")], name=f"{out}/slice"
    )
    decrease = _int_list(cx, op, "decrease_axis")
    if decrease:
        y = cx.add("Squeeze", [y, cx.ints(decrease, f"{out}/decrease")], name=out)
    else:
        y = cx.add("Identity", [y], name=out)
    _out(cx, op, y)


@converter("stack", lod=None)
def _stack(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Y", outputs=True)
    xs = _many(cx, op, "X")
    axis = _axis(cx, op, "axis", cx.rank_of(xs[0]) + 1, 0)
    where = cx.ints([axis], f"{out}/axis")
    parts = [cx.add("Unsqueeze", [cx.value(v), where], name=f"{out}/{k}") for k, v in enumerate(xs)]
    _out(cx, op, cx.add("Concat", parts, {"axis": axis}, name=out), "Y")


@converter("assign_value", lod=None)
def _assign_value(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    dtype = _PADDLE_DTYPES[_choice(cx, op, "dtype", tuple(_PADDLE_DTYPES))]
    if dtype not in _ASSIGN_VALUES:
        raise UnsupportedOpError(f"{cx.where()}: dtype {dtype} is not supported")
    shape = _int_list(cx, op, "shape")
    if any(d < 0 for d in shape) or math.prod(shape) > _MAX_ASSIGNED:
        raise ModelFormatError(
            f"{cx.where()}: shape {_shown.repr(shape)} must be sizes of at most "
            f"{_MAX_ASSIGNED} elements"
        )
    # Paddle 3 writes `values` (SCALARS); older programs the list of the dtype.
    name, kind = ("values", "scalars") if "values" in op.attrs else _ASSIGN_VALUES[dtype]
    values = list(_attr(cx, op, name, kind, []))
    if len(values) != math.prod(shape):
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} holds {len(values)} values for shape "
            f"{_shown.repr(shape)}"
        )
    _out(cx, op, cx.const(np.array(values, dtype.numpy()).reshape(shape), out))


@converter("assign")
def _assign(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    _out(cx, op, cx.add("Identity", [cx.value(_one(cx, op, "X"))], name=out))


@converter("layer_norm", lod=None)
def _layer_norm(cx, op: OpDesc) -> None:
    """LayerNormalization over the axes from begin_norm_axis; Paddle's Scale and Bias are
    flat [prod(normalized dims)], reshaped to those dims when they are known."""
    out = _one(cx, op, "Y", outputs=True)
    xv = _one(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = _attr(cx, op, "begin_norm_axis", "int", 1)
    if not 1 <= axis < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute begin_norm_axis = {axis} must lie in [1, {rank})"
        )
    dims = cx.block.vars[xv].shape[axis:] if xv in cx.block.vars else ()
    epsilon = _attr(cx, op, "epsilon", "float", 1e-5)
    x = cx.value(xv)
    affine = []
    for slot, fill in (("Scale", 1.0), ("Bias", 0.0)):
        var = _opt(cx, op, slot)
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
    _out(cx, op, y, "Y")
