"""Paddle's arithmetic: the elementwise ops (Y placed in X's dimensions from `axis`; one ONNX op
per row of ELEMENTWISE, floordiv by its formula), scale, sum, mean, and the products mul, fc,
matmul and matmul_v2 as ONNX ops."""

from __future__ import annotations

import math

import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    col_dims,
    define_out,
    many_vars,
    one_var,
    optional_var,
    scalar_like,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


def elementwise_placement(cx, op: OpDesc) -> tuple[int, int, int]:
    """(k, rank of the placed operand, trailing ones it needs) for an elementwise op.

    Paddle aligns Y with X's dimensions starting at `axis` (-1: at the end, as numpy does);
    trailing ones on Y make numpy's right-aligned broadcasting do the same. When X has the
    lower rank, Paddle places X inside Y's dimensions the same way: k is the operand placed,
    X (0) or Y (1)."""
    x_rank, y_rank = cx.rank_of(one_var(cx, op, "X")), cx.rank_of(one_var(cx, op, "Y"))
    axis = attribute(cx, op, "axis", "int", -1)
    k = 0 if x_rank < y_rank else 1
    rank, big_rank = (x_rank, y_rank) if k == 0 else (y_rank, x_rank)
    trailing = 0 if axis == -1 else big_rank - axis - rank
    if trailing < 0 or axis < -1:
        raise UnsupportedOpError(
            f"{cx.where()}: axis {axis} does not place {'XY'[k]} (rank {rank}) inside "
            f"{'YX'[k]} (rank {big_rank})"
        )
    return k, rank, trailing


def elementwise_operands(cx, op: OpDesc, out: str) -> list[ir.Value]:
    """X and Y as values that broadcast the numpy way (the placed one with its trailing ones)."""
    xv, yv = one_var(cx, op, "X"), one_var(cx, op, "Y")
    k, rank, trailing = elementwise_placement(cx, op)
    var = (xv, yv)[k]
    if trailing and cx.is_param(var):
        p = cx.param(var)
        placed = cx.const(p.reshape(p.shape + (1,) * trailing), f"{var}/aligned")
    elif trailing:
        axes = cx.ints(list(range(rank, rank + trailing)), f"{out}/axes")
        placed = cx.add("Unsqueeze", [cx.value(var), axes], name=f"{out}/{'xy'[k]}")
    else:
        placed = cx.value(var)
    return [placed, cx.value(yv)] if k == 0 else [cx.value(xv), placed]


# Paddle's binary elementwise ops whose function one ONNX op computes (on numpy-broadcast
# operands, elementwise_operands). A new op of this family is a row here.
ELEMENTWISE = {
    "elementwise_add": "Add",
    "elementwise_sub": "Sub",
    "elementwise_mul": "Mul",
    "elementwise_div": "Div",
    "elementwise_max": "Max",
    "elementwise_min": "Min",
    "elementwise_pow": "Pow",
}


@CONVERTERS.register(*ELEMENTWISE)
def _elementwise(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    operands = elementwise_operands(cx, op, out)
    define_out(cx, op, cx.add(ELEMENTWISE[op.type], operands, name=out))


@CONVERTERS.register("elementwise_floordiv")
def _floordiv(cx, op: OpDesc) -> None:
    """floor(x / y), as Paddle's FloorDivideFunctor: on integers ONNX's Div truncates toward
    zero, so a quotient with a remainder and operands of unlike signs is one lower; on floats,
    Floor(Div)."""
    out = one_var(cx, op, "Out", outputs=True)
    x, y = elementwise_operands(cx, op, out)
    if x.dtype is None or x.dtype.numpy().kind == "f":
        q = cx.add("Div", [x, y], name=f"{out}/q")
        define_out(cx, op, cx.add("Floor", [q], name=out))
        return
    q = cx.add("Div", [x, y], name=f"{out}/trunc")
    rest = cx.add("Sub", [x, cx.add("Mul", [q, y], name=f"{out}/qy")], name=f"{out}/rest")
    zero = scalar_like(cx, 0, x, f"{out}/zero", "zero")

    def test(op_type: str, inputs: list[ir.Value], what: str) -> ir.Value:
        return cx.add(op_type, inputs, name=f"{out}/{what}", dtype=ir.DataType.BOOL)

    inexact = test("Not", [test("Equal", [rest, zero], "exact")], "inexact")
    unlike = test(
        "Xor", [test("Less", [rest, zero], "rneg"), test("Less", [y, zero], "yneg")], "unlike"
    )
    step = cx.cast(test("And", [inexact, unlike], "lower"), q.dtype, f"{out}/step")
    define_out(cx, op, cx.add("Sub", [q, step], name=out))


@CONVERTERS.register("scale")
def _scale(cx, op: OpDesc) -> None:
    x = cx.value(one_var(cx, op, "X"))
    out = one_var(cx, op, "Out", outputs=True)
    bias = attribute(cx, op, "bias", "float", 0.0)
    after = attribute(cx, op, "bias_after_scale", "bool", True)
    scale_tensor = optional_var(cx, op, "ScaleTensor")
    if scale_tensor:
        scale = cx.add("Cast", [cx.value(scale_tensor)], {"to": x.dtype}, name=f"{out}/s")
    else:
        scale_value = attribute(cx, op, "scale", "float", 1.0)
        scale = (
            None if scale_value == 1.0 else scalar_like(cx, scale_value, x, f"{out}/scale", "scale")
        )
    y = x
    if bias and not after:
        y = cx.add(
            "Add", [y, scalar_like(cx, bias, x, f"{out}/bias", "bias")], name=f"{out}/biased"
        )
    if scale is not None:
        y = cx.add("Mul", [y, scale], name=f"{out}/scaled")
    if bias and after:
        y = cx.add(
            "Add", [y, scalar_like(cx, bias, x, f"{out}/bias", "bias")], name=f"{out}/biased"
        )
    if y is x:
        y = cx.add("Identity", [x], name=out)
    define_out(cx, op, y)


@CONVERTERS.register("sum")
def _sum(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    define_out(cx, op, cx.add("Sum", [cx.value(v) for v in many_vars(cx, op, "X")], name=out))


@CONVERTERS.register("mean", lod=None)
def _mean(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    x = cx.value(one_var(cx, op, "X"))
    define_out(cx, op, cx.add("ReduceMean", [x], {"keepdims": 0}, name=out))


def weight_2d(cx, var: str, num_col_dims: int, out: str) -> ir.Value:
    if cx.is_param(var):
        p = cx.param(var)
        if p.ndim == 2 and num_col_dims == 1:
            return cx.value(var)
        return cx.const(p.reshape(math.prod(p.shape[:num_col_dims]), -1), f"{var}/2d")
    return cx.add("Flatten", [cx.value(var)], {"axis": num_col_dims}, name=f"{out}/y2d")


def _flattened_matmul(
    cx, x_var: str, x_cols: int, y2d: ir.Value, y_tail: ir.Value | None, out: str
) -> ir.Value:
    """x flattened to 2-D at x_cols, times y2d, reshaped back to x.shape[:x_cols] + tail;
    one MatMul when x is already [rows, K] (or flattens over its last axis only)."""
    x = cx.value(x_var)
    rank = cx.rank_of(x_var)
    if x_cols == rank - 1 and y_tail is None:
        return cx.add("MatMul", [x, y2d], name=out)
    x2d = cx.add("Flatten", [x], {"axis": x_cols}, name=f"{out}/x2d")
    if x_cols == 1 and y_tail is None:
        # Already [x.shape[0], N]: no reshape back, so a GRU after it can still fuse (lookup
        # tables give [words, 1, E], which mul flattens like this).
        return cx.add("MatMul", [x2d, y2d], name=out)
    prod = cx.add("MatMul", [x2d, y2d], name=f"{out}/2d")
    head = cx.add(
        "Slice",
        [
            cx.add("Shape", [x], name=f"{out}/xshape", dtype=ir.DataType.INT64),
            cx.ints([0], f"{out}/0"),
            cx.ints([x_cols], f"{out}/k"),
        ],
        name=f"{out}/head",
    )
    tail = y_tail if y_tail is not None else cx.ints([-1], f"{out}/tail")
    shape = cx.add("Concat", [head, tail], {"axis": 0}, name=f"{out}/shape")
    return cx.add("Reshape", [prod, shape], name=out)


@CONVERTERS.register("mul")
def _mul(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv, yv = one_var(cx, op, "X"), one_var(cx, op, "Y")
    x_cols = col_dims(cx, op, "x_num_col_dims", xv)
    y_cols = col_dims(cx, op, "y_num_col_dims", yv)
    y_rank = cx.rank_of(yv)
    tail = None
    if y_rank - y_cols != 1:
        if not cx.is_param(yv):
            raise UnsupportedOpError(f"{cx.where()}: Y of rank {y_rank} must be a parameter")
        tail = cx.ints(cx.param(yv).shape[y_cols:], f"{out}/tail")
    y2d = weight_2d(cx, yv, y_cols, out)
    define_out(cx, op, _flattened_matmul(cx, xv, x_cols, y2d, tail, out))


@CONVERTERS.register("fc", lod="Input")
def _fc(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv, wv = one_var(cx, op, "Input"), one_var(cx, op, "W")
    x_cols = col_dims(cx, op, "in_num_col_dims", xv)
    w = cx.value(wv)
    if attribute(cx, op, "padding_weights", "bool", False):
        # W is stored [K + 4, N + 4] (fc_fuse_pass pads it for MKL); Paddle's kernel reads only
        # W[:K, :N]. Ignoring the flag fails at run time (K + 4 rows against K columns).
        padded = cx.param(wv)
        if padded.ndim != 2 or min(padded.shape) <= 4:
            raise ModelFormatError(
                f"{cx.where()}: padding_weights = True needs W {wv!r} of shape [K + 4, N + 4], "
                f"got {padded.shape}"
            )
        w = cx.const(padded[:-4, :-4], f"{wv}/unpadded")
    y = _flattened_matmul(cx, xv, x_cols, w, None, f"{out}/matmul")
    b = optional_var(cx, op, "Bias")
    if b:
        bias = cx.const(cx.param(b).reshape(-1), f"{b}/row") if cx.is_param(b) else cx.value(b)
        y = cx.add("Add", [y, bias], name=f"{out}/biased")
    act = choice(cx, op, "activation_type", ("", "relu"), "")
    if act == "relu":
        y = cx.add("Relu", [y], name=out)
    define_out(cx, op, y)


def _matmul(cx, op: OpDesc, tx: str, ty: str, alpha: float) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    operands = []
    for slot, flag in (("X", tx), ("Y", ty)):
        var = one_var(cx, op, slot)
        v = cx.value(var)
        rank = cx.rank_of(var)
        if attribute(cx, op, flag, "bool", False) and rank >= 2:
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            v = cx.add("Transpose", [v], {"perm": perm}, name=f"{out}/{slot}T")
        operands.append(v)
    y = cx.add("MatMul", operands, name=out if alpha == 1.0 else f"{out}/matmul")
    if alpha != 1.0:
        y = cx.add("Mul", [y, scalar_like(cx, alpha, y, f"{out}/alpha", "alpha")], name=out)
    define_out(cx, op, y)


@CONVERTERS.register("matmul")
def _matmul_v1(cx, op: OpDesc) -> None:
    _matmul(cx, op, "transpose_X", "transpose_Y", attribute(cx, op, "alpha", "float", 1.0))


@CONVERTERS.register("matmul_v2")
def _matmul_v2(cx, op: OpDesc) -> None:
    _matmul(cx, op, "trans_x", "trans_y", 1.0)
