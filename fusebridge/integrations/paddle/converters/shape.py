"""Converters for the shape and tensor-building ops Paddle 3 programs hold around nn.GRU /
nn.LSTM (the initial state built from the input's shape) and transformer blocks: shape, slice,
stack, assign_value, assign, layer_norm, gather, gather_nd, split, gelu. Registered in
CONVERTERS like op_converters.py's; PIR programs reach them through pir_program.py's
translation."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    _PADDLE_DTYPES,
    _attr,
    _axis,
    _choice,
    _many,
    _names,
    _one,
    _opt,
    _out,
    _scalar,
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


# -- gather, split, gelu -------------------------------------------------------------------------
_INDEX_TYPES = (ir.DataType.INT32, ir.DataType.INT64)


def _refuse_tensor_inputs(cx, op: OpDesc, slots: tuple[str, ...], instead: str) -> None:
    """Refuses the tensor forms of attributes (PIR's computed operands land there too)."""
    for slot in slots:
        if _names(op, slot):
            raise UnsupportedOpError(
                f"{cx.where()}: input {slot} = {list(_names(op, slot))} (a computed "
                f"{instead}) is not supported; only the attribute {instead}"
            )


def _index(cx, op: OpDesc) -> tuple[str, ir.Value]:
    """(name, value) of input Index, int32 or int64 as Paddle's gather kernels require."""
    var = _one(cx, op, "Index")
    index = cx.value(var)
    dtype = index.dtype or cx.dtype_of(var)
    if dtype not in (*_INDEX_TYPES, None):
        raise ModelFormatError(
            f"{cx.where()}: Index {var!r} must be int32 or int64 (as Paddle's {op.type} "
            f"takes), got {dtype}"
        )
    return var, index


def _dims(cx, var: str) -> tuple[int, ...] | None:
    """var's declared dims (-1: unknown), or None when it has no VarDesc."""
    if cx.is_param(var):
        return cx.param(var).shape
    desc = cx.block.vars.get(var)
    return tuple(desc.shape) if desc is not None else None


@converter("gather", lod=None)
def _gather(cx, op: OpDesc) -> None:
    """Gather along `axis`. Paddle takes an index of rank 0 (the axis goes, as in ONNX), 1, or
    2 with a last dimension of 1 (read as its flat form); a negative index i reads i + size as
    ONNX's does, and both refuse one outside [-size, size)."""
    _refuse_tensor_inputs(cx, op, ("Axis", "AxisTensor"), "axis")
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = _axis(cx, op, "axis", rank, 0) % rank
    var, index = _index(cx, op)
    dims = _dims(cx, var)
    if dims is not None and (len(dims) > 2 or (len(dims) == 2 and dims[1] not in (-1, 0, 1))):
        raise ModelFormatError(
            f"{cx.where()}: Index {var!r} of shape {list(dims)} must be 0-D, 1-D or [N, 1] "
            "(as Paddle's gather takes)"
        )
    if dims is not None and len(dims) == 2:
        index = cx.add("Reshape", [index, cx.ints([-1], f"{out}/flat")], name=f"{out}/index")
    y = cx.add("Gather", [cx.value(xv), index], {"axis": axis}, name=out, dtype=cx.value(xv).dtype)
    # Along the features the words stay X's: its LoD too. Paddle 3.3.1 copies X's LoD to Out
    # also along axis 0, where the rows are new and the offsets no longer fit them: none here.
    cx.define(out, y, cx.offsets.get(xv) if axis != 0 else None)


@converter("gather_nd", lod=None)
def _gather_nd(cx, op: OpDesc) -> None:
    """GatherND (batch_dims 0): Index [..., k] picks X[i_1, ..., i_k] (negative indices wrap,
    in Paddle as in ONNX). ONNX takes int64 indices and 1 <= k <= rank(X); Paddle's k = 0
    too."""
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "X")
    var, index = _index(cx, op)
    dims = _dims(cx, var)
    rank = cx.rank_of(xv)
    if dims is not None and (not dims or dims[-1] > rank):
        raise ModelFormatError(
            f"{cx.where()}: Index {var!r} of shape {list(dims)} must have a last dimension "
            f"of at most {rank} (the rank of X)"
        )
    if dims is not None and dims[-1] == 0:
        # Paddle gives X whole per index row; ONNX's GatherND takes 1 <= k.
        raise UnsupportedOpError(
            f"{cx.where()}: Index {var!r} of shape {list(dims)} (last dimension 0: X whole "
            "for each row) is not supported"
        )
    if index.dtype != ir.DataType.INT64:
        index = cx.cast(index, ir.DataType.INT64, f"{out}/index")
    _out(cx, op, cx.add("GatherND", [cx.value(xv), index], name=out, dtype=cx.value(xv).dtype))


def _split_sizes(cx, op: OpDesc, xv: str, axis: int, count: int, out: str) -> ir.Value | None:
    """Split's sizes input: None for `num` equal parts, else the `sections` (one -1: the
    rest of the axis, computed here when the axis size is known, else in the graph)."""
    num = _attr(cx, op, "num", "int", 0)
    sections = [int(s) for s in _attr(cx, op, "sections", "ints", [])]
    dims = _dims(cx, xv)
    size = dims[axis] if dims is not None and dims[axis] >= 0 else None
    if num and sections:
        raise ModelFormatError(
            f"{cx.where()}: attributes num = {num} and sections = {_shown.repr(sections)} are "
            "both set; Paddle's split API writes one of them"
        )
    parts = num or len(sections)
    if num < 0 or parts == 0:
        raise ModelFormatError(
            f"{cx.where()}: attribute num = {num} with sections = {_shown.repr(sections)}: "
            "expected num > 0 or a non-empty sections"
        )
    known = sum(s for s in sections if s != -1)
    if num:
        if size is not None and size % num:
            raise ModelFormatError(
                f"{cx.where()}: attribute num = {num} does not divide the size {size} of axis "
                f"{axis} of {xv!r}"
            )
    elif any(s < -1 for s in sections) or sections.count(-1) > 1:
        raise ModelFormatError(
            f"{cx.where()}: attribute sections = {_shown.repr(sections)}: entries must be "
            "sizes or a single -1"
        )
    # Paddle: the sections sum to the size, or with a -1 to less (the -1 part is not empty).
    elif size is not None and (known >= size if -1 in sections else known != size):
        rest = "less than" if -1 in sections else "equal to"
        raise ModelFormatError(
            f"{cx.where()}: attribute sections = {_shown.repr(sections)} sums to {known}, "
            f"which must be {rest} the size {size} of axis {axis} of {xv!r}"
        )
    if parts != count:
        raise ModelFormatError(
            f"{cx.where()}: {parts} parts (num = {num}, sections = {_shown.repr(sections)}) "
            f"for {count} Out variables"
        )
    if num:
        return None
    if -1 not in sections:
        return cx.ints(sections, f"{out}/sections")
    if size is not None:
        return cx.ints([size - known if s == -1 else s for s in sections], f"{out}/sections")
    # The axis size is known only at run time: the -1 entry is size - known.
    k = sections.index(-1)
    shape = cx.add("Shape", [cx.value(xv)], name=f"{out}/shape", dtype=ir.DataType.INT64)
    length = cx.add(
        "Gather", [shape, cx.ints([axis], f"{out}/axis")], {"axis": 0}, name=f"{out}/size"
    )
    rest = cx.add("Sub", [length, cx.ints([known], f"{out}/known")], name=f"{out}/rest")
    pieces = [cx.ints(sections[:k], f"{out}/head"), rest, cx.ints(sections[k + 1 :], f"{out}/tail")]
    return cx.add("Concat", pieces, {"axis": 0}, name=f"{out}/sections")


@converter("split", lod=None)
def _split(cx, op: OpDesc) -> None:
    """Split along `axis` into `num` equal parts or the `sections` sizes; Out lists the parts.
    Paddle keeps X's LoD on every part when axis != 0 (the rows stay X's), drops it on 0."""
    _refuse_tensor_inputs(cx, op, ("AxisTensor",), "axis")
    _refuse_tensor_inputs(cx, op, ("SectionsTensorList",), "sections")
    outs = _names(op, "Out", outputs=True)
    if not outs:
        raise ModelFormatError(f"{cx.where()}: output Out must name one variable or more")
    xv = _one(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = _axis(cx, op, "axis", rank, 0) % rank
    sizes = _split_sizes(cx, op, xv, axis, len(outs), outs[0])
    inputs = [cx.value(xv)] + ([sizes] if sizes is not None else [])
    parts = cx.add("Split", inputs, {"axis": axis}, name=outs[0], num_outputs=len(outs))
    parts = parts if isinstance(parts, tuple) else (parts,)
    offsets = cx.offsets.get(xv)
    for k, (var, part) in enumerate(zip(outs, parts)):
        if k:
            part.name = cx.unique(var)
        cx.define(var, part, offsets if axis != 0 else None)


@converter("gelu")
def _gelu(cx, op: OpDesc) -> None:
    """GELU from standard ops (ONNX's Gelu is opset 20): approximate False, the exact
    0.5 x (1 + erf(x / sqrt 2)); True, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    out = _one(cx, op, "Out", outputs=True)
    x = cx.value(_one(cx, op, "X"))

    def const(value: float, what: str) -> ir.Value:
        return _scalar(cx, value, x, f"{out}/{what}", what)

    if _attr(cx, op, "approximate", "bool", False):
        cube = cx.add("Mul", [cx.add("Mul", [x, x], name=f"{out}/x2"), x], name=f"{out}/x3")
        inner = cx.add(
            "Add",
            [x, cx.add("Mul", [cube, const(0.044715, "c")], name=f"{out}/cx3")],
            name=f"{out}/inner",
        )
        scaled = cx.add("Mul", [inner, const(math.sqrt(2 / math.pi), "k")], name=f"{out}/arg")
        curve = cx.add("Tanh", [scaled], name=f"{out}/tanh")
    else:
        scaled = cx.add("Mul", [x, const(math.sqrt(0.5), "k")], name=f"{out}/arg")
        curve = cx.add("Erf", [scaled], name=f"{out}/erf")
    one_plus = cx.add("Add", [curve, const(1.0, "one")], name=f"{out}/1p")
    half_x = cx.add("Mul", [x, const(0.5, "half")], name=f"{out}/half_x")
    _out(cx, op, cx.add("Mul", [half_x, one_plus], name=out))
