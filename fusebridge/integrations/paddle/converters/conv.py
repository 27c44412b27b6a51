"""Paddle's convolution and pooling over images (conv2d, depthwise_conv2d, pool2d) as ONNX's
Conv, MaxPool, AveragePool and their global forms.

Both frameworks agree on the filter layout ([out, in / groups, kh, kw]) and on what a window
is; what differs is spelled here: Paddle's paddings ([h, w] or [top, bottom, left, right] where
ONNX wants [top, left, bottom, right]), its padding_algorithm (SAME pads as ONNX's SAME_UPPER
and makes the dilations 1, VALID pads nothing), NHWC data (transposed to NCHW and back), and
adaptive pooling (a plain window when the output size divides the input's)."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.converters.common import (
    CONVERTERS,
    attribute,
    choice,
    declared_dims,
    define_out,
    int_list,
    one_var,
    show,
)
from fusebridge.integrations.paddle.program_desc import OpDesc

_LAYOUTS = ("NCHW", "NHWC", "AnyLayout")
_TO_NCHW, _TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _pair(cx, op: OpDesc, name: str, default: list[int]) -> list[int]:
    values = int_list(cx, op, name) or default
    if len(values) != 2 or min(values) < 1:
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} = {show(values)}: expected two sizes >= 1"
        )
    return values


def _window(cx, op: OpDesc) -> dict[str, object]:
    """ONNX's pads / auto_pad for the op's paddings and padding_algorithm."""
    algorithm = choice(cx, op, "padding_algorithm", ("EXPLICIT", "SAME", "VALID"), "EXPLICIT")
    if algorithm == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    paddings = int_list(cx, op, "paddings") or [0, 0]
    if algorithm == "VALID":
        paddings = [0, 0]
    if len(paddings) not in (2, 4) or min(paddings) < 0:
        raise ModelFormatError(
            f"{cx.where()}: attribute paddings = {show(paddings)}: expected [h, w] or "
            "[top, bottom, left, right], none negative"
        )
    if len(paddings) == 2:
        paddings = [paddings[0], paddings[0], paddings[1], paddings[1]]
    top, bottom, left, right = paddings
    return {"pads": [top, left, bottom, right]}


def _nchw(cx, op: OpDesc, slot: str, out: str) -> tuple[ir.Value, bool, str]:
    """(input as NCHW, whether it was NHWC, its variable); a 4-D input is required."""
    var = one_var(cx, op, slot)
    if cx.rank_of(var) != 4:
        raise UnsupportedOpError(
            f"{cx.where()}: {slot} {var!r} has rank {cx.rank_of(var)}; only 4-D images are "
            "supported"
        )
    layout = choice(cx, op, "data_format", _LAYOUTS, "NCHW")
    if layout == "NHWC":
        x = cx.add("Transpose", [cx.value(var)], {"perm": _TO_NCHW}, name=f"{out}/nchw")
        return x, True, var
    return cx.value(var), False, var


def _done(cx, op: OpDesc, y: ir.Value, nhwc: bool, out: str, slot: str = "Out") -> None:
    if nhwc:
        y = cx.add("Transpose", [y], {"perm": _TO_NHWC}, name=out)
    define_out(cx, op, y, slot)


@CONVERTERS.register("conv2d", "depthwise_conv2d", lod=None)
def _conv2d(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Output", outputs=True)
    x, nhwc, _ = _nchw(cx, op, "Input", out)
    wv = one_var(cx, op, "Filter")
    w = cx.param(wv) if cx.is_param(wv) else None
    if w is not None and w.ndim != 4:
        raise ModelFormatError(f"{cx.where()}: Filter {wv!r} must be 4-D, got shape {w.shape}")
    groups = attribute(cx, op, "groups", "int", 1)
    if groups < 1:
        raise ModelFormatError(f"{cx.where()}: attribute groups = {groups} must be >= 1")
    attrs = {
        "strides": _pair(cx, op, "strides", [1, 1]),
        "dilations": _pair(cx, op, "dilations", [1, 1]),
        "group": groups,
        **_window(cx, op),
    }
    if "auto_pad" in attrs:
        attrs["dilations"] = [1, 1]  # Paddle's UpdatePaddingAndDilation for SAME
    y = cx.add("Conv", [x, cx.value(wv)], attrs, name=f"{out}/nchw" if nhwc else out)
    _done(cx, op, y, nhwc, out, "Output")


@CONVERTERS.register("pool2d", lod=None)
def _pool2d(cx, op: OpDesc) -> None:
    out = one_var(cx, op, "Out", outputs=True)
    x, nhwc, xv = _nchw(cx, op, "X", out)
    kind = choice(cx, op, "pooling_type", ("max", "avg"))
    onnx_op = {"max": "MaxPool", "avg": "AveragePool"}[kind]
    name = f"{out}/nchw" if nhwc else out
    ksize = _pair(cx, op, "ksize", [])
    adaptive = attribute(cx, op, "adaptive", "bool", False)
    if adaptive and kind == "max":
        raise UnsupportedOpError(
            f"{cx.where()}: adaptive max pooling by pool2d is not supported: Paddle 3.3's "
            "Executor does not compute it as adaptive_max_pool2d does (to [1, 1] it gives "
            "each image's first element), so its result depends on the runtime"
        )
    if attribute(cx, op, "global_pooling", "bool", False) or (adaptive and ksize == [1, 1]):
        _done(cx, op, cx.add(f"Global{onnx_op}", [x], name=name), nhwc, out)
        return
    if adaptive:  # output size ksize: a window of in / out where that divides
        dims = declared_dims(cx, xv) or (-1,) * 4
        spatial = dims[1:3] if nhwc else dims[2:]
        if not all(d > 0 and d % k == 0 for d, k in zip(spatial, ksize)):
            raise UnsupportedOpError(
                f"{cx.where()}: adaptive pooling to {show(ksize)} from {xv!r} of spatial dims "
                f"{list(spatial)}: supported only when the output size divides the known input "
                "size"
            )
        window = [d // k for d, k in zip(spatial, ksize)]
        y = cx.add(onnx_op, [x], {"kernel_shape": window, "strides": window}, name=name)
        _done(cx, op, y, nhwc, out)
        return
    attrs = {
        "kernel_shape": ksize,
        "strides": _pair(cx, op, "strides", [1, 1]),
        "ceil_mode": int(attribute(cx, op, "ceil_mode", "bool", False)),
        **_window(cx, op),
    }
    if kind == "avg":
        attrs["count_include_pad"] = int(not attribute(cx, op, "exclusive", "bool", True))
    _done(cx, op, cx.add(onnx_op, [x], attrs, name=name), nhwc, out)
