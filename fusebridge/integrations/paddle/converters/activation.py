"""Paddle's activation ops as standard ONNX ops (opset 17): one ONNX op where ONNX has the same
function, else its formula from ONNX ops. PIR programs reach them through pir_program.py's
translation (pd_op.hardsigmoid -> hard_sigmoid, leaky_relu's negative_slope -> alpha, ...).
The formulas are Paddle's (phi's activation functors, checked against Paddle 3.3.1 by
tests/integrations/paddle/test_op_converters.py): attribute defaults as Paddle's op makers
fill them in."""

from __future__ import annotations

import math
from collections.abc import Callable

import onnx_ir as ir

from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    axis_attribute,
    define_out,
    one_var,
    scalar_like,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

# Paddle op -> the ONNX op of the same function, and its attributes from Paddle's:
# (onnx name, paddle name, default).
_DIRECT: dict[str, tuple[str, tuple[tuple[str, str, float], ...]]] = {
    "relu": ("Relu", ()),
    "tanh": ("Tanh", ()),
    "sigmoid": ("Sigmoid", ()),
    "exp": ("Exp", ()),
    "sqrt": ("Sqrt", ()),
    "abs": ("Abs", ()),
    "log": ("Log", ()),
    "softsign": ("Softsign", ()),
    "leaky_relu": ("LeakyRelu", (("alpha", "alpha", 0.02),)),
    "elu": ("Elu", (("alpha", "alpha", 1.0),)),
    "hard_sigmoid": ("HardSigmoid", (("alpha", "slope", 0.2), ("beta", "offset", 0.5))),
}


def _direct(onnx_op: str, attrs: tuple[tuple[str, str, float], ...]) -> Callable:
    def convert(cx, op: OpDesc) -> None:
        out = one_var(cx, op, "Out", outputs=True)
        values = {
            name: float(attribute(cx, op, paddle, "float", default))
            for name, paddle, default in attrs
        }
        define_out(cx, op, cx.add(onnx_op, [cx.value(one_var(cx, op, "X"))], values, name=out))

    return convert


for _paddle_op, (_onnx_op, _attrs) in _DIRECT.items():
    # Paddle 3.3.1's abs drops its input's LoD (the others keep it): so does ours.
    CONVERTERS.register(_paddle_op, lod=None if _paddle_op == "abs" else "X")(
        _direct(_onnx_op, _attrs)
    )


class _Formula:
    """Builds one op's formula: x, constants of x's dtype, and named ONNX nodes."""

    def __init__(self, cx, op: OpDesc) -> None:
        self.cx, self.op = cx, op
        self.out = one_var(cx, op, "Out", outputs=True)
        self.x = cx.value(one_var(cx, op, "X"))

    def const(self, value: float, what: str) -> ir.Value:
        return scalar_like(self.cx, value, self.x, f"{self.out}/{what}", what)

    def attr(self, name: str, default: float) -> float:
        return float(attribute(self.cx, self.op, name, "float", default))

    def fixed(self, name: str, value: float) -> float:
        """An attribute Paddle 3.3 writes but its kernel ignores (the value is fixed), where
        Paddle 2.x honoured it: a program holding another value is refused, not guessed."""
        written = self.attr(name, value)
        if abs(written - value) > 1e-6 * abs(value):
            raise UnsupportedOpError(
                f"{self.cx.where()}: attribute {name} = {written}: Paddle 3.3 runs {self.op.type} "
                f"with {name} = {value} whatever the program says (Paddle 2.x with the value "
                "written), so the result depends on the Paddle version; only the default is "
                "supported"
            )
        return value

    def node(self, op_type: str, inputs: list[ir.Value], what: str, **attrs) -> ir.Value:
        return self.cx.add(op_type, inputs, attrs or None, name=f"{self.out}/{what}")

    def done(self, op_type: str, inputs: list[ir.Value]) -> None:
        define_out(self.cx, self.op, self.cx.add(op_type, inputs, name=self.out))

    def softplus(self, beta: float, threshold: float) -> list[ir.Value]:
        """Paddle's softplus as Where's inputs: x where beta * x > threshold, else
        log(1 + exp(beta x)) / beta."""
        b = self.const(beta, "beta")
        scaled = self.node("Mul", [self.x, b], "bx")
        smooth = self.node("Div", [self.node("Softplus", [scaled], "sp"), b], "spb")
        linear = self.node("Greater", [scaled, self.const(threshold, "threshold")], "linear")
        return [linear, self.x, smooth]


@CONVERTERS.register("silu", "swish")
def _silu(cx, op: OpDesc) -> None:
    """x * sigmoid(x) (Paddle 3's swish has no beta)."""
    f = _Formula(cx, op)
    f.done("Mul", [f.x, f.node("Sigmoid", [f.x], "sigmoid")])


@CONVERTERS.register("square")
def _square(cx, op: OpDesc) -> None:
    f = _Formula(cx, op)
    f.done("Mul", [f.x, f.x])


@CONVERTERS.register("rsqrt")
def _rsqrt(cx, op: OpDesc) -> None:
    f = _Formula(cx, op)
    f.done("Reciprocal", [f.node("Sqrt", [f.x], "sqrt")])


@CONVERTERS.register("relu6")
def _relu6(cx, op: OpDesc) -> None:
    """min(max(x, 0), 6)."""
    f = _Formula(cx, op)
    f.done("Clip", [f.x, f.const(0.0, "zero"), f.const(f.fixed("threshold", 6.0), "threshold")])


@CONVERTERS.register("brelu")
def _brelu(cx, op: OpDesc) -> None:
    """min(max(x, t_min), t_max): legacy brelu, and PIR's hardtanh (F.hardtanh saves brelu
    with PIR off)."""
    f = _Formula(cx, op)
    low, high = f.attr("t_min", 0.0), f.attr("t_max", 24.0)
    f.done("Clip", [f.x, f.const(low, "t_min"), f.const(high, "t_max")])


@CONVERTERS.register("hard_swish")
def _hard_swish(cx, op: OpDesc) -> None:
    """x * min(max(x + 3, 0), 6) / 6."""
    f = _Formula(cx, op)
    shifted = f.node("Add", [f.x, f.const(f.fixed("offset", 3.0), "offset")], "shifted")
    limit = f.const(f.fixed("threshold", 6.0), "threshold")
    gate = f.node("Clip", [shifted, f.const(0.0, "zero"), limit], "clip")
    scaled = f.node("Div", [gate, f.const(f.fixed("scale", 6.0), "scale")], "gate")
    f.done("Mul", [f.x, scaled])


@CONVERTERS.register("softplus")
def _softplus(cx, op: OpDesc) -> None:
    f = _Formula(cx, op)
    f.done("Where", f.softplus(f.attr("beta", 1.0), f.attr("threshold", 20.0)))


@CONVERTERS.register("mish")
def _mish(cx, op: OpDesc) -> None:
    """x * tanh(softplus(x)), softplus linear above threshold."""
    f = _Formula(cx, op)
    softplus = f.node("Where", f.softplus(1.0, f.attr("threshold", 20.0)), "softplus")
    f.done("Mul", [f.x, f.node("Tanh", [softplus], "tanh")])


@CONVERTERS.register("softmax")
def _softmax(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    xv = one_var(cx, op, "X")
    axis = axis_attribute(cx, op, "axis", cx.rank_of(xv), -1)
    define_out(cx, op, cx.add("Softmax", [cx.value(xv)], {"axis": axis}, name=out))


@CONVERTERS.register("gelu")
def _gelu(cx, op: OpDesc) -> None:
    """GELU from standard ops (ONNX's Gelu is opset 20): approximate False, the exact
    0.5 x (1 + erf(x / sqrt 2)); True, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    out = one_var(cx, op, "Out", outputs=True)
    x = cx.value(one_var(cx, op, "X"))

    def const(value: float, what: str) -> ir.Value:
        return scalar_like(cx, value, x, f"{out}/{what}", what)

    if attribute(cx, op, "approximate", "bool", False):
        cube = cx.add("Mul", [cx.add("Mul", [x, x], name=f"{out}/x2"), x], name=f"{out}/x3")
        inner = cx.add(
            "Add",
            [x, cx.add("Mul", [cube, const(0.044715, "c")], name=f"{out}/cx3")],
            name=f"{out}/inner",
        )
        scaled = cx.add("Mul", [inner, const(math.sqrt(2 / math.pi), "k")], name=f"{out}/arg")
        curve = cx.add("Tanh", [scaled], name=f"{out}/tanh")
    else:
        # x / sqrt 2 as a Div: the form ONNX Runtime's GeluFusion matches (one Gelu op, and
        # BiasGelu with the Add before it), where a Mul by 1 / sqrt 2 stays five ops.
        scaled = cx.add("Div", [x, const(math.sqrt(2.0), "k")], name=f"{out}/arg")
        curve = cx.add("Erf", [scaled], name=f"{out}/erf")
    one_plus = cx.add("Add", [curve, const(1.0, "one")], name=f"{out}/1p")
    half_x = cx.add("Mul", [x, const(0.5, "half")], name=f"{out}/half_x")
    define_out(cx, op, cx.add("Mul", [half_x, one_plus], name=out))
