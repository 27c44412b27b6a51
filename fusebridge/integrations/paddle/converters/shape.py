"""Paddle's ops that move or reshape data: concat, stack, split, slice, reshape2, transpose2, and
shape (the initial state Paddle 3 programs build around nn.GRU / nn.LSTM from the input's
shape). PIR programs reach them through pir_program.py's translation."""

from __future__ import annotations

import math

import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    axis_attribute,
    declared_dims,
    define_out,
    int_list,
    many_vars,
    one_var,
    optional_var,
    permutation,
    refuse_tensor_inputs,
    show,
    slot_names,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


@CONVERTERS.register("shape", lod=None)
def _shape(cx, op: OpDesc) -> None:
    """Shape; legacy `shape` declares int32 (PIR's shape64 int64): the declared type wins."""
    out = one_var(cx, op, "Out", outputs=True)
    shape = cx.add("Shape", [cx.value(one_var(cx, op, "Input"))], name=out, dtype=ir.DataType.INT64)
    dtype = cx.dtype_of(out) or ir.DataType.INT64
    define_out(
        cx, op, shape if dtype == ir.DataType.INT64 else cx.cast(shape, dtype, f"{out}/cast")
    )


@CONVERTERS.register("concat")
def _concat(cx, op: OpDesc) -> None:
    if optional_var(cx, op, "AxisTensor"):
        raise UnsupportedOpError(
            f"{cx.where()}: an AxisTensor input is not supported (use attr axis)"
        )
    out = one_var(cx, op, "Out", outputs=True)
    xs = many_vars(cx, op, "X")
    axis = axis_attribute(cx, op, "axis", cx.rank_of(xs[0]), 0)
    define_out(cx, op, cx.add("Concat", [cx.value(v) for v in xs], {"axis": axis}, name=out))


@CONVERTERS.register("stack", lod=None)
def _stack(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Y", outputs=True)
    xs = many_vars(cx, op, "X")
    axis = axis_attribute(cx, op, "axis", cx.rank_of(xs[0]) + 1, 0)
    where = cx.ints([axis], f"{out}/axis")
    parts = [cx.add("Unsqueeze", [cx.value(v), where], name=f"{out}/{k}") for k, v in enumerate(xs)]
    define_out(cx, op, cx.add("Concat", parts, {"axis": axis}, name=out), "Y")


def _split_sizes(cx, op: OpDesc, xv: str, axis: int, count: int, out: str) -> ir.Value | None:
    """Split's sizes input: None for `num` equal parts, else the `sections` (one -1: the
    rest of the axis, computed here when the axis size is known, else in the graph)."""
    num = attribute(cx, op, "num", "int", 0)
    sections = [int(s) for s in attribute(cx, op, "sections", "ints", [])]
    dims = declared_dims(cx, xv)
    size = dims[axis] if dims is not None and dims[axis] >= 0 else None
    if num and sections:
        raise ModelFormatError(
            f"{cx.where()}: attributes num = {num} and sections = {show(sections)} are "
            "both set; Paddle's split API writes one of them"
        )
    parts = num or len(sections)
    if num < 0 or parts == 0:
        raise ModelFormatError(
            f"{cx.where()}: attribute num = {num} with sections = {show(sections)}: "
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
            f"{cx.where()}: attribute sections = {show(sections)}: entries must be "
            "sizes or a single -1"
        )
    # Paddle: the sections sum to the size, or with a -1 to less (the -1 part is not empty).
    elif size is not None and (known >= size if -1 in sections else known != size):
        rest = "less than" if -1 in sections else "equal to"
        raise ModelFormatError(
            f"{cx.where()}: attribute sections = {show(sections)} sums to {known}, "
            f"which must be {rest} the size {size} of axis {axis} of {xv!r}"
        )
    if parts != count:
        raise ModelFormatError(
            f"{cx.where()}: {parts} parts (num = {num}, sections = {show(sections)}) "
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


@CONVERTERS.register("split", lod=None)
def _split(cx, op: OpDesc) -> None:
    """Split along `axis` into `num` equal parts or the `sections` sizes; Out lists the parts.
    Paddle keeps X's LoD on every part when axis != 0 (the rows stay X's), drops it on 0."""
    refuse_tensor_inputs(cx, op, ("AxisTensor",), "axis")
    refuse_tensor_inputs(cx, op, ("SectionsTensorList",), "sections")
    outs = slot_names(op, "Out", outputs=True)
    if not outs:
        raise ModelFormatError(f"{cx.where()}: output Out must name one variable or more")
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = axis_attribute(cx, op, "axis", rank, 0) % rank
    sizes = _split_sizes(cx, op, xv, axis, len(outs), outs[0])
    inputs = [cx.value(xv)] + ([sizes] if sizes is not None else [])
    parts = cx.add("Split", inputs, {"axis": axis}, name=outs[0], num_outputs=len(outs))
    parts = parts if isinstance(parts, tuple) else (parts,)
    offsets = cx.offsets.get(xv)
    for k, (var, part) in enumerate(zip(outs, parts)):
        if k:
            part.name = cx.unique(var)
        cx.define(var, part, offsets if axis != 0 else None)


def _bounds(cx, op: OpDesc, which: str, count: int, out: str) -> ir.Value:
    """slice's starts or ends: the attribute, or its 1-D tensor input (StartsTensor)."""
    tensor = optional_var(cx, op, f"{which.capitalize()}Tensor")
    if slot_names(op, f"{which.capitalize()}TensorList"):
        raise UnsupportedOpError(
            f"{cx.where()}: input {which.capitalize()}TensorList is not supported (use "
            f"{which} or {which.capitalize()}Tensor)"
        )
    if tensor:
        return cx.cast(cx.value(tensor), ir.DataType.INT64, f"{out}/{which}")
    values = int_list(cx, op, which)
    if len(values) != count:
        raise ModelFormatError(
            f"{cx.where()}: attribute {which} = {show(values)} has {len(values)} "
            f"entries, expected one per axis ({count})"
        )
    return cx.ints(values, f"{out}/{which}")


@CONVERTERS.register("slice", lod=None)
def _slice(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "Input")
    rank = cx.rank_of(xv)
    axes = int_list(cx, op, "axes")
    if not axes or any(not -rank <= a < rank for a in axes):
        raise ModelFormatError(
            f"{cx.where()}: attribute axes = {show(axes)} must name axes of the rank "
            f"{rank} input {xv!r}"
        )
    starts = _bounds(cx, op, "starts", len(axes), out)
    ends = _bounds(cx, op, "ends", len(axes), out)
    y = cx.add(
        "Slice", [cx.value(xv), starts, ends, cx.ints(axes, f"{out}/axes")], name=f"{out}/slice"
    )
    decrease = int_list(cx, op, "decrease_axis")
    if decrease:
        y = cx.add("Squeeze", [y, cx.ints(decrease, f"{out}/decrease")], name=out)
    else:
        y = cx.add("Identity", [y], name=out)
    define_out(cx, op, y)


def _reshape_shape(cx, op: OpDesc) -> list[int]:
    """reshape2's `shape` attribute: sizes, 0 (copy X's) or one -1 (inferred)."""
    shape = attribute(cx, op, "shape", "ints")
    if any(d < -1 for d in shape) or shape.count(-1) > 1:
        raise ModelFormatError(
            f"{cx.where()}: attribute shape = {show(shape)}: entries must be sizes, 0 "
            "or a single -1"
        )
    return shape


@CONVERTERS.register("reshape2", lod=None)
def _reshape(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    shape_list = slot_names(op, "ShapeTensor")
    shape_var = optional_var(cx, op, "Shape")
    if shape_list:
        parts = [cx.cast(cx.value(v), ir.DataType.INT64, f"{out}/dim") for v in shape_list]
        shape = cx.add("Concat", parts, {"axis": 0}, name=f"{out}/shape")
    elif shape_var:
        shape = cx.cast(cx.value(shape_var), ir.DataType.INT64, f"{out}/shape")
    else:
        shape = cx.ints(_reshape_shape(cx, op), f"{out}/shape")
    # Paddle's 0 copies the input dimension, as ONNX Reshape does with allowzero = 0.
    xv = one_var(cx, op, "X")
    y = cx.add("Reshape", [cx.value(xv), shape], name=out)
    # Paddle 3.3.1's reshape2 copies X's LoD to Out whatever the shape, also when the rows
    # change and the offsets no longer fit them. Keep it where the words provably stay the
    # rows: an attribute shape that starts with 0, or with -1 while the other entries hold
    # exactly X's other (known) dimensions ([0, -1], [-1, 2, 2] on [-1, 4]); else no LoD.
    offsets = cx.offsets.get(xv)
    from_attr = not shape_list and not shape_var
    if offsets is not None and from_attr and _keeps_first_dim(cx, xv, _reshape_shape(cx, op)):
        cx.define(out, y, offsets)
    else:
        define_out(cx, op, y)


def _keeps_first_dim(cx, xv: str, shape: list[int]) -> bool:
    """Whether reshaping X to `shape` (Paddle's 0 and -1 included) surely keeps X's rows."""
    desc = cx.block.vars.get(xv)
    if not shape or desc is None:
        return False
    if shape[0] == 0:
        return True
    x_rest = list(desc.shape[1:])
    rest = [x_rest[i] if d == 0 and i < len(x_rest) else d for i, d in enumerate(shape[1:])]
    known = all(d > 0 for d in x_rest + rest)
    return shape[0] == -1 and known and math.prod(rest) == math.prod(x_rest)


@CONVERTERS.register("transpose2", lod=None)
def _transpose(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    perm = permutation(cx, op, xv)
    define_out(cx, op, cx.add("Transpose", [cx.value(xv)], {"perm": perm}, name=out))


def _axes(cx, op: OpDesc) -> list[int]:
    refuse_tensor_inputs(cx, op, ("AxesTensor", "AxesTensorList"), "axes")
    return int_list(cx, op, "axes")


@CONVERTERS.register("unsqueeze2", lod=None)
def _unsqueeze(cx, op: OpDesc) -> None:
    """Ones inserted at `axes`, one after the other as Paddle's GetUnsqueezeShape inserts them
    (a negative axis counts from the end of the shape so far; an insertion at or before an
    earlier one moves it right), given to ONNX as the ones' final places."""
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    places: list[int] = []
    for axis in _axes(cx, op):
        size = rank + len(places)
        if not -size - 1 <= axis <= size:
            raise ModelFormatError(
                f"{cx.where()}: attribute axes holds {axis}, outside [{-size - 1}, {size}] "
                f"for a shape of rank {size} ({xv!r} of rank {rank} and the ones before it)"
            )
        at = axis + size + 1 if axis < 0 else axis
        places = [p + 1 if p >= at else p for p in places] + [at]
    if not places:
        raise ModelFormatError(f"{cx.where()}: attribute axes is empty")
    axes = cx.ints(sorted(places), f"{out}/axes")
    define_out(cx, op, cx.add("Unsqueeze", [cx.value(xv), axes], name=out))


@CONVERTERS.register("squeeze2", lod=None)
def _squeeze(cx, op: OpDesc) -> None:
    """The size-1 axes among `axes` removed (all size-1 axes when empty); Paddle keeps an
    axis listed whose size is not 1, so each one's size must be known from the program."""
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    axes = _axes(cx, op)
    if any(not -rank <= a < rank for a in axes):
        raise ModelFormatError(
            f"{cx.where()}: attribute axes = {show(axes)} must name axes of {xv!r} (rank {rank})"
        )
    dims = declared_dims(cx, xv) or (-1,) * rank
    listed = sorted({a % rank for a in axes}) if axes else list(range(rank))
    unknown = [a for a in listed if dims[a] < 0]
    if unknown:
        raise UnsupportedOpError(
            f"{cx.where()}: the size of axis {unknown[0]} of {xv!r} (dims {list(dims)}) is known "
            "only at run time, and Paddle squeezes it only if it is 1"
        )
    squeezed = [a for a in listed if dims[a] == 1]
    x = cx.value(xv)
    if not squeezed:
        define_out(cx, op, cx.add("Identity", [x], name=out))
        return
    define_out(cx, op, cx.add("Squeeze", [x, cx.ints(squeezed, f"{out}/axes")], name=out))


@CONVERTERS.register("flatten_contiguous_range", lod=None)
def _flatten_range(cx, op: OpDesc) -> None:
    """Axes start_axis..stop_axis (inclusive) merged into one."""
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    x = cx.value(xv)
    if rank == 0:  # Paddle flattens a 0-d tensor to [1]
        define_out(cx, op, cx.add("Reshape", [x, cx.ints([1], f"{out}/shape")], name=out))
        return
    start = axis_attribute(cx, op, "start_axis", rank, 1) % rank
    stop = axis_attribute(cx, op, "stop_axis", rank, -1) % rank
    if start > stop:
        raise ModelFormatError(
            f"{cx.where()}: start_axis {start} comes after stop_axis {stop} (rank {rank})"
        )
    if stop == rank - 1:  # Reshape's 0 copies the leading sizes
        shape = cx.ints([0] * start + [-1], f"{out}/shape")
    else:
        whole = cx.add("Shape", [x], name=f"{out}/xshape", dtype=ir.DataType.INT64)

        def part(begin: int, end: int) -> ir.Value:
            bounds = [cx.ints([begin], f"{out}/b"), cx.ints([end], f"{out}/e")]
            return cx.add("Slice", [whole, *bounds], name=f"{out}/dims")

        pieces = ([part(0, start)] if start else []) + [cx.ints([-1], f"{out}/merged")]
        shape = cx.add("Concat", [*pieces, part(stop + 1, rank)], {"axis": 0}, name=f"{out}/shape")
    define_out(cx, op, cx.add("Reshape", [x, shape], name=out))
