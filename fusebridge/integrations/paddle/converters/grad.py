"""Converters for the backward ops paddle.static.append_backward adds to a training program:
each `*_grad` op becomes the ONNX ops of its formula, and `dropout_grad` our DropoutGrad over
the packed mask its forward dropout kept (the pass recompute_dropout_mask can then drop it).

A gradient slot Paddle leaves empty (a variable that stops gradient) produces nothing. Where an
operand was broadcast in the forward, its gradient is summed over the broadcast axes: the
leading and trailing axes its rank and Paddle's `axis` leave out, and the axes its declared
shape (VarDesc, or the parameter's data) gives size 1. A size -1 (known only at run time) is
taken to match the other operand's, as Paddle's own InferShape does when it cannot check."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    axis_attribute,
    col_dims,
    number,
    one_var,
    permutation,
    slot_names,
)
from fusebridge.integrations.paddle.converters.dropout import dropout_attributes
from fusebridge.integrations.paddle.converters.math import (
    elementwise_operands,
    elementwise_placement,
    weight_2d,
)
from fusebridge.integrations.paddle.program_desc import OpDesc


def _target(cx, op: OpDesc, slot: str) -> str | None:
    """The variable a gradient output slot writes, or None when Paddle left it empty."""
    return one_var(cx, op, slot, outputs=True) if slot_names(op, slot, outputs=True) else None


def _declared_shape(cx, var: str) -> tuple[int, ...]:
    if cx.is_param(var):
        return cx.param(var).shape
    desc = cx.block.vars.get(var)
    return desc.shape if desc is not None else ()


def _sum_to(cx, grad: ir.Value, var: str, lead: int, trailing: int, name: str) -> ir.Value:
    """grad, of the broadcast result's rank, summed down to the shape of operand `var` that
    the forward placed after `lead` axes and before `trailing` ones."""
    rank = lead + cx.rank_of(var) + trailing
    outer = list(range(lead)) + list(range(rank - trailing, rank))
    if outer:
        grad = cx.add(
            "ReduceSum", [grad, cx.ints(outer, f"{name}/outer")], {"keepdims": 0}, name=f"{name}/o"
        )
    inner = [i for i, d in enumerate(_declared_shape(cx, var)) if d == 1]
    if inner:
        grad = cx.add(
            "ReduceSum", [grad, cx.ints(inner, f"{name}/ones")], {"keepdims": 1}, name=f"{name}/i"
        )
    return grad


def _last_two_swapped(cx, value: ir.Value, rank: int, name: str) -> ir.Value:
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return cx.add("Transpose", [value], {"perm": perm}, name=name)


# -- the loss and its reduction ------------------------------------------------------------
@CONVERTERS.register("mean_grad", lod=None)
def _mean_grad(cx, op: OpDesc) -> None:
    target = _target(cx, op, "X@GRAD")
    if target is None:
        return
    x, dout = cx.value(one_var(cx, op, "X")), cx.value(one_var(cx, op, "Out@GRAD"))
    count = cx.cast(
        cx.add("Size", [x], name=f"{target}/size", dtype=ir.DataType.INT64),
        dout.dtype,
        f"{target}/count",
    )
    share = cx.add("Div", [dout, count], name=f"{target}/share")
    shape = cx.add("Shape", [x], name=f"{target}/shape", dtype=ir.DataType.INT64)
    cx.define(target, cx.add("Expand", [share, shape], name=target))


# -- activations: the gradient from the forward's output -------------------------------------
@CONVERTERS.register("tanh_grad", "sigmoid_grad", "relu_grad", lod=None)
def _activation_grad(cx, op: OpDesc) -> None:
    target = _target(cx, op, "X@GRAD")
    if target is None:
        return
    y, dout = cx.value(one_var(cx, op, "Out")), cx.value(one_var(cx, op, "Out@GRAD"))
    one = cx.const(np.array(1, y.dtype.numpy()), f"{target}/1")
    if op.type == "relu_grad":  # dy where y > 0
        zero = cx.const(np.array(0, y.dtype.numpy()), f"{target}/0")
        positive = cx.add("Greater", [y, zero], name=f"{target}/pos", dtype=ir.DataType.BOOL)
        cx.define(target, cx.add("Where", [positive, dout, zero], name=target, dtype=dout.dtype))
        return
    if op.type == "tanh_grad":  # dy * (1 - y^2)
        square = cx.add("Mul", [y, y], name=f"{target}/y2")
        slope = cx.add("Sub", [one, square], name=f"{target}/slope")
    else:  # sigmoid: dy * y * (1 - y)
        rest = cx.add("Sub", [one, y], name=f"{target}/1-y")
        slope = cx.add("Mul", [y, rest], name=f"{target}/slope")
    cx.define(target, cx.add("Mul", [dout, slope], name=target))


@CONVERTERS.register("softmax_grad", lod=None)
def _softmax_grad(cx, op: OpDesc) -> None:
    # dx = y * (dy - sum(dy * y) along the axis)
    target = _target(cx, op, "X@GRAD")
    if target is None:
        return
    y, dout = cx.value(one_var(cx, op, "Out")), cx.value(one_var(cx, op, "Out@GRAD"))
    axis = axis_attribute(cx, op, "axis", cx.rank_of(one_var(cx, op, "Out")), -1)
    weighted = cx.add("Mul", [dout, y], name=f"{target}/dy*y")
    total = cx.add(
        "ReduceSum",
        [weighted, cx.ints([axis], f"{target}/axis")],
        {"keepdims": 1},
        name=f"{target}/sum",
    )
    centred = cx.add("Sub", [dout, total], name=f"{target}/centred")
    cx.define(target, cx.add("Mul", [y, centred], name=target))


# -- elementwise and products ------------------------------------------------------------
@CONVERTERS.register(
    "elementwise_add_grad", "elementwise_sub_grad", "elementwise_mul_grad", lod=None
)
def _elementwise_grad(cx, op: OpDesc) -> None:
    dout = cx.value(one_var(cx, op, "Out@GRAD"))
    k, rank, trailing = elementwise_placement(cx, op)
    big_rank = cx.rank_of(one_var(cx, op, "XY"[1 - k]))
    kind = op.type.split("_")[1]
    operands = None
    for i, slot in enumerate(("X@GRAD", "Y@GRAD")):
        target = _target(cx, op, slot)
        if target is None:
            continue
        grad = dout
        if kind == "sub" and i == 1:
            grad = cx.add("Neg", [dout], name=f"{target}/neg")
        elif kind == "mul":  # d(x*y)/dx = y, broadcast as in the forward
            operands = operands or elementwise_operands(cx, op, f"{target}/operands")
            grad = cx.add("Mul", [dout, operands[1 - i]], name=f"{target}/prod")
        placed = i == k
        lead = big_rank - rank - trailing if placed else 0
        var = one_var(cx, op, "XY"[i])
        grad = _sum_to(cx, grad, var, lead, trailing if placed else 0, target)
        cx.define(target, grad)


@CONVERTERS.register("mul_grad", lod=None)
def _mul_grad(cx, op: OpDesc) -> None:
    # out2d = x2d @ y2d: dx2d = dout2d @ y2d^T, dy2d = x2d^T @ dout2d, reshaped back.
    xv, yv = one_var(cx, op, "X"), one_var(cx, op, "Y")
    x_cols = col_dims(cx, op, "x_num_col_dims", xv)
    y_cols = col_dims(cx, op, "y_num_col_dims", yv)
    dx_var, dy_var = _target(cx, op, "X@GRAD"), _target(cx, op, "Y@GRAD")
    name = dx_var or dy_var
    if name is None:
        return
    dout2d = cx.add(
        "Flatten", [cx.value(one_var(cx, op, "Out@GRAD"))], {"axis": x_cols}, name=f"{name}/dout2d"
    )
    if dx_var:
        y2d = weight_2d(cx, yv, y_cols, dx_var)
        dx2d = cx.add("Gemm", [dout2d, y2d], {"transB": 1}, name=f"{dx_var}/2d")
        shape = cx.add("Shape", [cx.value(xv)], name=f"{dx_var}/shape", dtype=ir.DataType.INT64)
        cx.define(dx_var, cx.add("Reshape", [dx2d, shape], name=dx_var))
    if dy_var:
        x2d = cx.add("Flatten", [cx.value(xv)], {"axis": x_cols}, name=f"{dy_var}/x2d")
        dy2d = cx.add("Gemm", [x2d, dout2d], {"transA": 1}, name=f"{dy_var}/2d")
        shape = cx.add("Shape", [cx.value(yv)], name=f"{dy_var}/shape", dtype=ir.DataType.INT64)
        cx.define(dy_var, cx.add("Reshape", [dy2d, shape], name=dy_var))


def _matmul_grad(cx, op: OpDesc, tx: str, ty: str, alpha: float) -> None:
    xv, yv, dv = one_var(cx, op, "X"), one_var(cx, op, "Y"), one_var(cx, op, "Out@GRAD")
    ranks = {v: cx.rank_of(v) for v in (xv, yv)}
    if min(ranks.values()) < 2:
        raise UnsupportedOpError(f"{cx.where()}: 1-D operands are not supported, got {ranks}")
    trans_x, trans_y = attribute(cx, op, tx, "bool", False), attribute(cx, op, ty, "bool", False)
    values = {xv: cx.value(xv), yv: cx.value(yv), dv: cx.value(dv)}
    out_rank = max(ranks.values())

    def swapped(var: str, name: str) -> ir.Value:
        return _last_two_swapped(cx, values[var], ranks.get(var, out_rank), f"{name}/{var}T")

    # out = op(x) @ op(y) gives d op(x) = dout @ op(y)^T and d op(y) = op(x)^T @ dout; undoing
    # op() leaves one product each: (left, transposed?, right, transposed?).
    products = {
        xv: (yv, trans_y, dv, True) if trans_x else (dv, False, yv, not trans_y),
        yv: (dv, True, xv, trans_x) if trans_y else (xv, not trans_x, dv, False),
    }
    for var, slot in ((xv, "X@GRAD"), (yv, "Y@GRAD")):
        target = _target(cx, op, slot)
        if target is None:
            continue
        a, ta, b, tb = products[var]
        left = swapped(a, target) if ta else values[a]
        right = swapped(b, target) if tb else values[b]
        grad = cx.add("MatMul", [left, right], name=f"{target}/matmul")
        if alpha != 1.0:
            alpha_value = number(cx, alpha, grad.dtype.numpy(), "alpha")
            scale = cx.const(alpha_value, f"{target}/alpha")
            grad = cx.add("Mul", [grad, scale], name=f"{target}/scaled")
        grad = _sum_to(cx, grad, var, out_rank - ranks[var], 0, target)
        cx.define(target, grad)


@CONVERTERS.register("matmul_v2_grad", lod=None)
def _matmul_v2_grad(cx, op: OpDesc) -> None:
    _matmul_grad(cx, op, "trans_x", "trans_y", 1.0)


@CONVERTERS.register("matmul_grad", lod=None)
def _matmul_v1_grad(cx, op: OpDesc) -> None:
    _matmul_grad(cx, op, "transpose_X", "transpose_Y", attribute(cx, op, "alpha", "float", 1.0))


@CONVERTERS.register("transpose2_grad", lod=None)
def _transpose_grad(cx, op: OpDesc) -> None:
    target = _target(cx, op, "X@GRAD")
    if target is None:
        return
    perm = permutation(cx, op, one_var(cx, op, "Out@GRAD"))
    inverse = [int(i) for i in np.argsort(perm)]
    dout = cx.value(one_var(cx, op, "Out@GRAD"))
    cx.define(target, cx.add("Transpose", [dout], {"perm": inverse}, name=target))


# -- dropout -----------------------------------------------------------------------------
@CONVERTERS.register("dropout_grad", lod=None)
def _dropout_grad(cx, op: OpDesc) -> None:
    target = _target(cx, op, "X@GRAD")
    if target is None:
        return
    if attribute(cx, op, "is_test", "bool", False):
        raise UnsupportedOpError(f"{cx.where()}: is_test = true has no backward")
    mask_var = one_var(cx, op, "Mask")
    mask = cx.value(mask_var)
    producer = mask.producer()
    if producer is None or producer.domain != conventions.DOMAIN or producer.op_type != "Dropout":
        raise UnsupportedOpError(
            f"{cx.where()}: Mask {mask_var!r} must be the Mask output of a training dropout op"
        )
    attrs = dropout_attributes(cx, op)
    dout = cx.value(one_var(cx, op, "Out@GRAD"))
    cx.define(
        target, cx.add("DropoutGrad", [dout, mask], attrs, name=target, domain=conventions.DOMAIN)
    )
