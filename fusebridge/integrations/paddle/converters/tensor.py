"""Paddle's ops that make a tensor or change its dtype: fill_constant (also a training program's
loss gradient), fill_any_like (full_like, zeros_like), range (arange), assign_value, assign and
cast."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    PADDLE_DTYPES,
    attribute,
    choice,
    define_out,
    int_list,
    number,
    one_var,
    refuse_tensor_inputs,
    show,
    slot_names,
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
# fill_constant is made a constant at load up to this many elements; a larger one is made at
# run time (ConstantOfShape), when the model runs and asks for it.
_MAX_CONSTANT_ELEMENTS = 1 << 20
_INT64_MAX = (1 << 63) - 1


def _fill_value(cx, op: OpDesc) -> float:
    text = attribute(cx, op, "str_value", "str", "")  # Paddle's exact spelling of the value
    if not text:
        return attribute(cx, op, "value", "float", 0.0)
    try:
        return float(text)
    except ValueError:
        raise ModelFormatError(
            f"{cx.where()}: attribute str_value = {text!r} is not a number"
        ) from None


@CONVERTERS.register("fill_constant", lod=None)
def _fill_constant(cx, op: OpDesc) -> None:
    """A constant; with ShapeTensor / ShapeTensorList (a shape computed in the graph, as
    nn.GRU's initial state from the input's batch size), ConstantOfShape at run time."""
    if slot_names(op, "ValueTensor"):
        raise UnsupportedOpError(
            f"{cx.where()}: input ValueTensor (a value computed in the graph) is not "
            "supported; only the value attribute"
        )
    dtype = PADDLE_DTYPES[choice(cx, op, "dtype", tuple(PADDLE_DTYPES))]
    shape = attribute(cx, op, "shape", "ints", [])
    dynamic = slot_names(op, "ShapeTensor") or slot_names(op, "ShapeTensorList")
    if dynamic:
        out = one_var(cx, op, "Out", outputs=True)
        parts = [
            cx.add(
                "Reshape",
                [cx.cast(cx.value(v), ir.DataType.INT64, f"{out}/d"), cx.ints([-1], f"{out}/flat")],
                name=f"{out}/dim",
            )
            for v in dynamic
        ]
        dims = (
            parts[0]
            if len(parts) == 1
            else cx.add("Concat", parts, {"axis": 0}, name=f"{out}/shape")
        )
        fill = number(cx, _fill_value(cx, op), dtype.numpy(), "value")
        result = cx.add(
            "ConstantOfShape", [dims], {"value": ir.tensor(fill.reshape(1))}, name=out, dtype=dtype
        )
        cx.define(out, result)
        return
    if any(d < 0 for d in shape):
        raise UnsupportedOpError(
            f"{cx.where()}: shape {show(shape)} has a size known only at run time"
        )
    if math.prod(shape) > _INT64_MAX:
        raise ModelFormatError(
            f"{cx.where()}: shape {show(shape)} has more than 2**63 - 1 elements"
        )
    fill = number(cx, _fill_value(cx, op), dtype.numpy(), "value")
    out = one_var(cx, op, "Out", outputs=True)
    if math.prod(shape) > _MAX_CONSTANT_ELEMENTS:
        # Made at run time: the file's few bytes must not make load allocate gigabytes.
        result = cx.add(
            "ConstantOfShape",
            [cx.ints(shape, f"{out}/shape")],
            {"value": ir.tensor(fill.reshape(1))},
            name=out,
            dtype=dtype,
        )
        cx.define(out, result)
        return
    cx.define(out, cx.const(np.full(shape, fill), out))


@CONVERTERS.register("assign_value", lod=None)
def _assign_value(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    dtype = PADDLE_DTYPES[choice(cx, op, "dtype", tuple(PADDLE_DTYPES))]
    if dtype not in _ASSIGN_VALUES:
        raise UnsupportedOpError(f"{cx.where()}: dtype {dtype} is not supported")
    shape = int_list(cx, op, "shape")
    if any(d < 0 for d in shape) or math.prod(shape) > _MAX_ASSIGNED:
        raise ModelFormatError(
            f"{cx.where()}: shape {show(shape)} must be sizes of at most {_MAX_ASSIGNED} elements"
        )
    # Paddle 3 writes `values` (SCALARS); older programs the list of the dtype.
    name, kind = ("values", "scalars") if "values" in op.attrs else _ASSIGN_VALUES[dtype]
    values = list(attribute(cx, op, name, kind, []))
    if len(values) != math.prod(shape):
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} holds {len(values)} values for shape {show(shape)}"
        )
    define_out(cx, op, cx.const(np.array(values, dtype.numpy()).reshape(shape), out))


@CONVERTERS.register("assign")
def _assign(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    define_out(cx, op, cx.add("Identity", [cx.value(one_var(cx, op, "X"))], name=out))


@CONVERTERS.register("cast")
def _cast(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    to = choice(cx, op, "out_dtype", tuple(PADDLE_DTYPES))
    dtype = PADDLE_DTYPES[to]
    define_out(cx, op, cx.cast(cx.value(one_var(cx, op, "X")), dtype, out))


def _dtype_or_input(cx, op: OpDesc, x: ir.Value) -> ir.DataType:
    """The `dtype` attribute as an ONNX type; -1 (and absent): X's."""
    code = choice(cx, op, "dtype", (-1, *PADDLE_DTYPES), -1)
    return PADDLE_DTYPES[code] if code != -1 else (x.dtype or ir.DataType.FLOAT)


@CONVERTERS.register("fill_any_like", lod=None)
def _fill_any_like(cx, op: OpDesc) -> None:
    """A tensor of X's shape filled with `value` (of `dtype`, -1: X's)."""
    refuse_tensor_inputs(cx, op, ("ValueTensor",), "value")
    out = one_var(cx, op, "Out", outputs=True)
    x = cx.value(one_var(cx, op, "X"))
    dtype = _dtype_or_input(cx, op, x)
    fill = number(cx, attribute(cx, op, "value", "float", 0.0), dtype.numpy(), "value")
    shape = cx.add("Shape", [x], name=f"{out}/shape", dtype=ir.DataType.INT64)
    filled = cx.add(
        "ConstantOfShape", [shape], {"value": ir.tensor(fill.reshape(1))}, name=out, dtype=dtype
    )
    define_out(cx, op, filled)


@CONVERTERS.register("range", lod=None)
def _range(cx, op: OpDesc) -> None:
    """start, start + step, ... before end, of Out's declared dtype (PIR's arange `dtype`;
    legacy range: Start's): ONNX's Range, which counts ceil((end - start) / step) elements as
    Paddle does, on the three one-element inputs made scalars."""
    out = one_var(cx, op, "Out", outputs=True)
    dtype = cx.dtype_of(out) or cx.dtype_of(one_var(cx, op, "Start")) or ir.DataType.INT64
    scalars = []
    for slot in ("Start", "End", "Step"):
        v = cx.value(one_var(cx, op, slot))
        if v.dtype != dtype:
            v = cx.cast(v, dtype, f"{out}/{slot.lower()}")
        scalars.append(cx.add("Reshape", [v, cx.ints([], f"{out}/scalar")], name=f"{out}/{slot}"))
    define_out(cx, op, cx.add("Range", scalars, name=out))
