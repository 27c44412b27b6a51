"""Paddle's reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod; PIR's sum,
mean, max, min, prod) as ONNX's Reduce ops: one row of REDUCTIONS each.

Paddle reduces over `dim` (all axes when reduce_all is set or dim is empty), keeping them as
ones when keep_dim is set. The result has the output variable's declared dtype: Paddle's sum
of bool or int32 gives int64 and `out_dtype` asks for another, and Paddle casts X to it before
it reduces (so a sum of int32 cannot overflow int32), as done here."""

from __future__ import annotations

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    define_out,
    int_list,
    one_var,
    show,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

REDUCTIONS = {
    "reduce_sum": "ReduceSum",
    "reduce_mean": "ReduceMean",
    "reduce_max": "ReduceMax",
    "reduce_min": "ReduceMin",
    "reduce_prod": "ReduceProd",
}


@CONVERTERS.register(*REDUCTIONS, lod=None)
def _reduce(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    rank = cx.rank_of(xv)
    dims = int_list(cx, op, "dim")
    if any(not -max(rank, 1) <= d < max(rank, 1) for d in dims):
        raise ModelFormatError(
            f"{cx.where()}: attribute dim = {show(dims)} has an axis outside "
            f"[{-rank}, {rank}) for {xv!r} of rank {rank}"
        )
    everything = attribute(cx, op, "reduce_all", "bool", False) or not dims or rank == 0
    axes = None if everything else sorted({d % rank for d in dims})
    keepdims = attribute(cx, op, "keep_dim", "bool", False)
    x = cx.value(xv)
    dtype = cx.dtype_of(out)
    if dtype is not None and x.dtype is not None and dtype != x.dtype:
        x = cx.cast(x, dtype, f"{out}/x")
    define_out(cx, op, cx.reduce(REDUCTIONS[op.type], x, axes, keepdims, name=out))
