"""Paddle's comparison ops as ONNX's: one row of COMPARISONS each (the ONNX op, and whether its
result is negated), giving bool. The operands broadcast as numpy's do: Paddle 3.3's compare
kernels ignore the `axis` attribute that Paddle 2.x placed Y by (an axis that would place it
elsewhere fails to broadcast in 3.3), so a program with another axis is refused."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    define_out,
    one_var,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

COMPARISONS: dict[str, tuple[str, bool]] = {
    "less_than": ("Less", False),
    "less_equal": ("LessOrEqual", False),
    "greater_than": ("Greater", False),
    "greater_equal": ("GreaterOrEqual", False),
    "equal": ("Equal", False),
    "not_equal": ("Equal", True),
}


@CONVERTERS.register(*COMPARISONS, lod=None)
def _compare(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    onnx_op, negated = COMPARISONS[op.type]
    axis = attribute(cx, op, "axis", "int", -1)
    if axis != -1:
        raise UnsupportedOpError(
            f"{cx.where()}: attribute axis = {axis}: Paddle 3.3 broadcasts the operands as "
            "numpy does whatever the axis (Paddle 2.x placed Y at it), so the result depends "
            "on the Paddle version; only axis = -1 is supported"
        )
    operands = [cx.value(one_var(cx, op, "X")), cx.value(one_var(cx, op, "Y"))]
    bool_ = ir.DataType.BOOL
    y = cx.add(onnx_op, operands, name=f"{out}/eq" if negated else out, dtype=bool_)
    define_out(cx, op, cx.add("Not", [y], name=out, dtype=bool_) if negated else y)
