"""Paddle's ops that pick elements by index: lookup_table(_v2) (rows of an embedding table, ids
checked when the model runs), gather, gather_nd and arg_max."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    PADDLE_DTYPES,
    attribute,
    axis_attribute,
    choice,
    declared_dims,
    define_out,
    one_var,
    refuse_tensor_inputs,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

_INDEX_TYPES = (ir.DataType.INT32, ir.DataType.INT64)


@CONVERTERS.register("lookup_table", "lookup_table_v2", lod="Ids")
def _lookup_table(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    wv, idsv = one_var(cx, op, "W"), one_var(cx, op, "Ids")
    table = cx.param(wv)
    if table.ndim != 2:
        raise ModelFormatError(f"{cx.where()}: W {wv!r} must be 2-D, got shape {table.shape}")
    rows = table.shape[0]
    pad = attribute(cx, op, "padding_idx", "int", -1)
    # Paddle's kernels give zeros where an id equals padding_idx (-1: none). Its Python APIs
    # write -1 or a row (padding_idx = -k becomes rows - k before saving); for a padding_idx
    # outside the table, which only a hand-made program holds, an id equal to it is refused at
    # run time like every id outside [0, rows) (_ids_in_range), where Paddle gives zeros.
    if 0 <= pad < rows:
        # Rows looked up by padding_idx read as zeros: a new table with that row zeroed.
        table = table.copy()
        table[pad] = 0
        w = cx.const(table, f"{wv}/padded")
    else:
        w = cx.value(wv)
    ids = cx.value(idsv)
    if ids.dtype not in (ir.DataType.INT64, ir.DataType.INT32, None):
        raise ModelFormatError(
            f"{cx.where()}: Ids {idsv!r} must be int64 or int32 (as Paddle's kernels take), got "
            f"{ids.dtype}"
        )
    if op.type == "lookup_table":  # v1 takes ids [..., 1]
        ids = cx.add("Squeeze", [ids, cx.ints([-1], f"{out}/axis")], name=f"{out}/ids")
    ids = _ids_in_range(cx, ids, rows, out)
    y = cx.add("Gather", [w, ids], {"axis": 0}, name=out, dtype=w.dtype)
    # ONNX Runtime's error names the node: the name says what failed in Paddle's terms.
    y.producer().name = (
        f"{out} ({op.type}: every id in {idsv!r} must lie in [0, {rows}); "
        f"a negative id i is reported as i - {rows})"
    )
    define_out(cx, op, y)


def _ids_in_range(cx, ids: ir.Value, rows: int, out: str) -> ir.Value:
    """ids with every negative id moved below -rows, so that the Gather fails on it.

    Paddle refuses ids outside [0, rows) (lookup_table; lookup_table_v2 means to, its CPU
    kernel skips the check for -1 and reads before the table). ONNX's Gather takes [-rows,
    rows) and wraps the negatives: -1 would read the last row. Standard ops cannot raise, but
    Gather does on an index outside [-rows, rows), in ONNX Runtime and in onnx.reference alike:
    Where(ids < 0, ids - rows, ids) sends every negative id there, and ids >= rows already
    are. The check is part of the graph: the fused model, the portable export and a saved
    .onnx keep it, and nothing happens to valid ids."""
    dtype = ids.dtype.numpy() if ids.dtype is not None else np.int64
    zero = cx.const(np.array(0, dtype), f"{out}/0")
    negative = cx.add("Less", [ids, zero], name=f"{out}/negative", dtype=ir.DataType.BOOL)
    shifted = cx.add(
        "Sub", [ids, cx.const(np.array(rows, dtype), f"{out}/rows")], name=f"{out}/below"
    )
    return cx.add("Where", [negative, shifted, ids], name=f"{out}/checked", dtype=ids.dtype)


def _index(cx, op: OpDesc) -> tuple[str, ir.Value]:
    """(name, value) of input Index, int32 or int64 as Paddle's gather kernels require."""
    var = one_var(cx, op, "Index")
    index = cx.value(var)
    dtype = index.dtype or cx.dtype_of(var)
    if dtype not in (*_INDEX_TYPES, None):
        raise ModelFormatError(
            f"{cx.where()}: Index {var!r} must be int32 or int64 (as Paddle's {op.type} "
            f"takes), got {dtype}"
        )
    return var, index


@CONVERTERS.register("gather", lod=None)
def _gather(cx, op: OpDesc) -> None:
    """Gather along `axis`. Paddle takes an index of rank 0 (the axis goes, as in ONNX), 1, or
    2 with a last dimension of 1 (read as its flat form); a negative index i reads i + size as
    ONNX's does, and both refuse one outside [-size, size)."""
    refuse_tensor_inputs(cx, op, ("Axis", "AxisTensor"), "axis")
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    axis = axis_attribute(cx, op, "axis", rank, 0) % rank
    var, index = _index(cx, op)
    dims = declared_dims(cx, var)
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


@CONVERTERS.register("gather_nd", lod=None)
def _gather_nd(cx, op: OpDesc) -> None:
    """GatherND (batch_dims 0): Index [..., k] picks X[i_1, ..., i_k] (negative indices wrap,
    in Paddle as in ONNX). ONNX takes int64 indices and 1 <= k <= rank(X); Paddle's k = 0
    too."""
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    var, index = _index(cx, op)
    dims = declared_dims(cx, var)
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
    define_out(
        cx, op, cx.add("GatherND", [cx.value(xv), index], name=out, dtype=cx.value(xv).dtype)
    )


@CONVERTERS.register("arg_max", lod=None)
def _arg_max(cx, op: OpDesc) -> None:
    refuse_tensor_inputs(cx, op, ("AxisTensor",), "axis")  # PIR's argmax by a computed axis
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    x = cx.value(xv)
    keepdims = int(attribute(cx, op, "keepdims", "bool", False))
    flatten = attribute(cx, op, "flatten", "bool", False)
    if flatten:
        x = cx.add("Reshape", [x, cx.ints([-1], f"{out}/flat")], name=f"{out}/flat")
        axis = 0
    else:
        axis = axis_attribute(cx, op, "axis", cx.rank_of(xv), -1)
    y = cx.add(
        "ArgMax", [x], {"axis": axis, "keepdims": keepdims}, name=out, dtype=ir.DataType.INT64
    )
    if flatten and keepdims:
        # Paddle keeps X's rank then ([1] * rank, e.g. [1, 1, 1]); ArgMax of the flat X gives [1].
        ones = cx.ints([1] * cx.rank_of(xv), f"{out}/kept")
        y = cx.add("Reshape", [y, ones], name=out)
    dtype = choice(cx, op, "dtype", (2, 3, -1), -1)
    if dtype == 2:
        y = cx.cast(y, PADDLE_DTYPES[dtype], out)
    # No LoD on the output, whatever the axis: Paddle 3.3.1's arg_max drops X's LoD (a LoD
    # feed's arg_max along the features is fetched as a plain tensor).
    define_out(cx, op, y)
