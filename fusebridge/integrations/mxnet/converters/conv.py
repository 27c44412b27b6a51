"""MXNet's 2-D image ops over NCHW data: Convolution as ONNX's Conv, and Pooling as MaxPool or
AveragePool (GlobalMaxPool, GlobalAveragePool with global_pool): one row of POOLS a kind.

Both frameworks agree on the filter layout ([num_filter, C / num_group, ky, kx]) and on what a
window is; MXNet's pad is symmetric ((y, x) on both sides, ONNX's [top, left, bottom, right]),
and its pooling_convention 'full' rounds the output size up, as ONNX's ceil_mode does."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    bad_attribute,
    positive_attribute,
    unsupported_attribute,
)
from fusebridge.integrations.mxnet.symbol import MXNode


def _count_include_pad(cx) -> dict[str, object]:
    """AveragePool's options: MXNet's count_include_pad is optional<bool>, None (its default)
    counting the padding."""
    return {"count_include_pad": int(cx.attr("count_include_pad", "bool?", None) is not False)}


# pool_type -> (ONNX op, its global form, the ONNX options it reads from the node).
POOLS = {
    "max": ("MaxPool", "GlobalMaxPool", lambda cx: {}),
    "avg": ("AveragePool", "GlobalAveragePool", _count_include_pad),
}
_MXNET_POOLS = ("max", "avg", "sum", "lp")  # what MXNet 1.9.1 takes


def _image(cx) -> ir.Value:
    """Input 0, refused unless NCHW: the layout attribute None or NCHW, the rank 4 if known."""
    layout = cx.attr("layout", "str", "None")
    if layout not in ("None", "NCHW"):
        unsupported_attribute(cx, "layout", layout, "None or 'NCHW' (2-D images, channels first)")
    x = cx.input(0)
    if cx.rank(x) not in (None, 4):
        raise ModelFormatError(
            f"{cx.where()}: input 0 has rank {cx.rank(x)}, expected 4 (NCHW) for a 2-D kernel"
        )
    return x


def _kernel(cx) -> list[int]:
    kernel = cx.attr("kernel", "ints")
    if kernel is None or not 1 <= len(kernel) <= 3 or min(kernel) < 1:
        bad_attribute(cx, "kernel", kernel, "1 to 3 sizes >= 1")
    if len(kernel) != 2:
        unsupported_attribute(cx, "kernel", kernel, "two sizes (y, x): only 2-D is supported")
    return list(kernel)


def _pair(cx, key: str, default: int, minimum: int) -> list[int]:
    """A (y, x) attribute; absent or () means `default` in both."""
    value = cx.attr(key, "ints", ()) or (default, default)
    if len(value) != 2 or min(value) < minimum:
        bad_attribute(cx, key, value, f"two sizes (y, x) >= {minimum}, as the kernel has")
    return list(value)


@CONVERTERS.register("Convolution")
def _convolution(cx, node: MXNode) -> None:
    x = _image(cx)
    kernel = _kernel(cx)
    filters = positive_attribute(cx, "num_filter")
    groups = positive_attribute(cx, "num_group", 1)
    if filters % groups:
        bad_attribute(cx, "num_group", groups, f"a divisor of num_filter ({filters})")
    no_bias = cx.attr("no_bias", "bool", False)
    if len(node.inputs) != 3 - no_bias:
        raise ModelFormatError(
            f"{cx.where()}: {len(node.inputs)} inputs, expected data, weight"
            + ("" if no_bias else ", bias")
        )
    inputs = [x] + [cx.input(k) for k in range(1, len(node.inputs))]
    weight = cx.array(inputs[1])
    if weight is not None and (
        weight.ndim != 4 or weight.shape[:1] + weight.shape[2:] != (filters, *kernel)
    ):
        raise ModelFormatError(
            f"{cx.where()}: weight has shape {weight.shape}, expected [{filters}, C / num_group, "
            f"{kernel[0]}, {kernel[1]}] (num_filter, kernel)"
        )
    bias = None if no_bias else cx.array(inputs[2])
    if bias is not None and bias.shape != (filters,):
        raise ModelFormatError(
            f"{cx.where()}: bias has shape {bias.shape}, expected [num_filter = {filters}]"
        )
    pad = _pair(cx, "pad", 0, 0)
    attrs = {
        "kernel_shape": kernel,
        "strides": _pair(cx, "stride", 1, 1),
        "dilations": _pair(cx, "dilate", 1, 1),
        "pads": pad + pad,
        "group": groups,
    }
    cx.define(cx.add("Conv", inputs, attrs))


@CONVERTERS.register("Pooling")
def _pooling(cx, node: MXNode) -> None:
    x = _image(cx)
    kind = cx.attr("pool_type", "str", "max")
    if kind not in _MXNET_POOLS:
        bad_attribute(cx, "pool_type", kind, f"one of {', '.join(_MXNET_POOLS)}")
    if kind not in POOLS:
        unsupported_attribute(cx, "pool_type", kind, f"one of {', '.join(POOLS)}")
    op, global_op, options = POOLS[kind]
    if cx.attr("global_pool", "bool", False):  # the whole image: kernel, stride, pad unused
        cx.define(cx.add(global_op, [x]))
        return
    kernel = _kernel(cx)
    stride, pad = _pair(cx, "stride", 1, 1), _pair(cx, "pad", 0, 0)
    if any(p >= k for p, k in zip(pad, kernel)):
        bad_attribute(cx, "pad", tuple(pad), f"each below the kernel's size {tuple(kernel)}")
    convention = cx.attr("pooling_convention", "str", "valid")
    if convention not in ("valid", "full", "same"):
        bad_attribute(cx, "pooling_convention", convention, "'valid', 'full' or 'same'")
    if convention == "same" or (
        convention == "full" and any(s + p > k for s, p, k in zip(stride, pad, kernel))
    ):
        # 'full' with stride + pad > kernel: for some input sizes MXNet's last window lies
        # wholly in the padding and is kept (0, or the lowest float for max), ONNX drops it.
        unsupported_attribute(
            cx,
            "pooling_convention",
            convention,
            f"'valid', or 'full' where stride + pad <= kernel in each dim (stride "
            f"{tuple(stride)}, pad {tuple(pad)}, kernel {tuple(kernel)})",
        )
    attrs = {
        "kernel_shape": kernel,
        "strides": stride,
        "pads": pad + pad,
        "ceil_mode": int(convention == "full"),
        **options(cx),
    }
    cx.define(cx.add(op, [x], attrs))
