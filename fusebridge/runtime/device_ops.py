"""Standard ONNX ops run on the device by a Session(device="cuda"): each written once with the
launcher's array module `xp` (CuPy on a GPU, numpy under the tests' emulation), so the glue
around our kernels (an embedding look-up, a projection, masks) stays on the device instead of
crossing to an ONNX Runtime CPU partition and back. Semantics are ONNX's at the model's opset
(axes as an input from opset 13 on); tests/runtime/test_session_device.py checks each op
against ONNX Runtime. Every op here has one output.

Inputs that are shapes or axes (Reshape's shape, Squeeze's and Unsqueeze's axes) are read on
the host: the array module needs their values as Python integers to lay out the result."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from fusebridge import ops
from fusebridge.conventions import OFFSETS_SUFFIX, ONNX_OPSET
from fusebridge.ops import standard
from fusebridge.random import OFFSET_INPUT, OFFSET_OUTPUT, SEED_INPUT

# The schema slots of our ops whose values are small integer metadata read on the host (the
# cuda engine takes offsets and lengths as host arrays, as torch's pack_padded_sequence does).
HOST_SLOTS = frozenset({"offsets", "lengths", "seed", "offset"})


def is_metadata(name: str) -> bool:
    """A value kept on the host: a LoD value's offsets, the random stream's state (its seed and
    offset in, the next offset out: Key(seed, out["rng_offset_out"]) reads a host integer)."""
    return name.endswith(OFFSETS_SUFFIX) or name in (SEED_INPUT, OFFSET_INPUT, OFFSET_OUTPUT)


@dataclasses.dataclass(frozen=True)
class DeviceOp:
    """make(xp, node, opset) -> f(*inputs) -> the output; `host`: the input positions read on
    the host (shapes, axes)."""

    make: Callable[[Any, ir.Node, int], Callable[..., Any]]
    host: tuple[int, ...] = ()


def _attr(node: ir.Node, name: str, opset: int) -> Any:
    return ops.attribute(node, name, opset)


def _function(name: str) -> DeviceOp:
    """An op that is one function of the array module with ONNX's (numpy's) broadcasting."""
    return DeviceOp(lambda xp, node, opset: getattr(xp, name))


def _identity(xp, node, opset):
    return lambda x: x


def _div(xp, node, opset):
    def div(a, b):
        if a.dtype.kind in "iu":
            # ONNX Runtime divides integers as C does, towards zero; // floors. a - fmod(a, b)
            # is a multiple of b, so its floor division is exact.
            return (a - xp.fmod(a, b)) // b
        return a / b

    return div


def _relu(xp, node, opset):
    return lambda x: xp.maximum(x, 0)  # 0 is a Python int: x's dtype is kept


def _sigmoid(xp, node, opset):
    # 1 / (1 + exp(-x)) overflows exp for x below about -88 in float32; the tanh form does not.
    return lambda x: 0.5 * (xp.tanh(0.5 * x) + 1)


def _gather(xp, node, opset):
    axis = _attr(node, "axis", opset)

    def gather(data, indices):
        # ONNX counts a negative index from the end of the axis. One out of [-n, n) is an
        # error: numpy raises IndexError; CuPy checks no bounds on the device and wraps it.
        indices = xp.where(indices < 0, indices + data.shape[axis], indices)
        return xp.take(data, indices, axis=axis)

    return gather


def _gemm(xp, node, opset):
    alpha, beta = _attr(node, "alpha", opset), _attr(node, "beta", opset)
    trans_a, trans_b = _attr(node, "transA", opset), _attr(node, "transB", opset)

    def gemm(a, b, c=None):
        y = xp.matmul(a.T if trans_a else a, b.T if trans_b else b)
        if alpha != 1.0:
            y = y * y.dtype.type(alpha)
        if c is not None:
            y = y + (c if beta == 1.0 else c * c.dtype.type(beta))
        return y

    return gemm


def _axes(node: ir.Node, opset: int, given: Any) -> list[int] | None:
    """Squeeze's or Unsqueeze's axes: the attribute before opset 13, the input from 13 on."""
    if opset < 13:
        axes = _attr(node, "axes", opset)
        return None if axes is None else list(axes)
    return None if given is None else [int(a) for a in np.asarray(given).reshape(-1)]


def _squeeze(xp, node, opset):
    def squeeze(x, axes=None):
        axes = _axes(node, opset, axes)
        return xp.squeeze(x) if axes is None else xp.squeeze(x, axis=tuple(axes))

    return squeeze


def _unsqueeze(xp, node, opset):
    def unsqueeze(x, axes=None):
        axes = _axes(node, opset, axes)
        rank = x.ndim + len(axes)
        new = {a % rank for a in axes}
        dims = iter(x.shape)
        return x.reshape([1 if d in new else next(dims) for d in range(rank)])

    return unsqueeze


def _reshape(xp, node, opset):
    allowzero = _attr(node, "allowzero", opset) if opset >= 14 else 0

    def reshape(x, shape):
        # 0 copies the input's dimension (unless allowzero); -1 is the array module's own.
        dims = [int(d) for d in np.asarray(shape).reshape(-1)]
        dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
        return x.reshape(dims)

    return reshape


def _transpose(xp, node, opset):
    perm = _attr(node, "perm", opset)
    # Contiguous: our kernels refuse strided device arrays rather than copy them unseen.
    return lambda x: xp.ascontiguousarray(xp.transpose(x, None if perm is None else list(perm)))


def _concat(xp, node, opset):
    axis = _attr(node, "axis", opset)
    return lambda *xs: xp.concatenate(xs, axis=axis)


def _cast(xp, node, opset):
    dtype = ir.DataType(_attr(node, "to", opset)).numpy()
    return lambda x: x.astype(dtype)


def _shape(xp, node, opset):
    start = _attr(node, "start", opset) if opset >= 15 else 0
    end = _attr(node, "end", opset) if opset >= 15 else None
    return lambda x: xp.array(x.shape[slice(start, end)], dtype=xp.int64)


def _softmax(xp, node, opset):
    axis = _attr(node, "axis", opset)

    def softmax(x):
        shape = x.shape
        a = axis % max(x.ndim, 1)
        if opset < 13:  # before 13: over every axis from `axis` on, as one
            x = x.reshape(math.prod(shape[:a]), math.prod(shape[a:]))
            a = 1
        e = xp.exp(x - x.max(axis=a, keepdims=True))
        return (e / e.sum(axis=a, keepdims=True)).reshape(shape)

    return softmax


TABLE: dict[str, DeviceOp] = {
    "Identity": DeviceOp(_identity),
    "Add": _function("add"),
    "Sub": _function("subtract"),
    "Mul": _function("multiply"),
    "Div": DeviceOp(_div),
    "Less": _function("less"),
    "Greater": _function("greater"),
    "Equal": _function("equal"),
    "Where": _function("where"),
    "MatMul": _function("matmul"),
    "Tanh": _function("tanh"),
    "Relu": DeviceOp(_relu),
    "Sigmoid": DeviceOp(_sigmoid),
    "Gather": DeviceOp(_gather),
    "Gemm": DeviceOp(_gemm),
    "Squeeze": DeviceOp(_squeeze, host=(1,)),
    "Unsqueeze": DeviceOp(_unsqueeze, host=(1,)),
    "Reshape": DeviceOp(_reshape, host=(1,)),
    "Transpose": DeviceOp(_transpose),
    "Concat": DeviceOp(_concat),
    "Cast": DeviceOp(_cast),
    "Shape": DeviceOp(_shape),
    "Softmax": DeviceOp(_softmax),
}
# What the array module computes with: no strings, none of the types numpy lacks (bfloat16,
# float8, int4).
_DEVICE_TYPES = frozenset(
    getattr(ir.DataType, name)
    for name in ("BOOL", "FLOAT16", "FLOAT", "DOUBLE", "INT8", "INT16", "INT32", "INT64")
    + ("UINT8", "UINT16", "UINT32", "UINT64")
)


def _tensor_ok(v: ir.Value | None) -> bool:
    """A value the device holds: a tensor of a numeric type (or of a type not known yet, which
    onnx's inference left open: numeric in every graph we run)."""
    if v is None:
        return True
    if v.type is not None and not isinstance(v.type, ir.TensorType):
        return False  # a sequence or an optional
    return v.dtype is None or v.dtype in _DEVICE_TYPES


def supports(node: ir.Node, opset: int) -> bool:
    """Whether `node` (a standard op of a model at default-domain opset `opset`) runs here.
    Before opset 11 some ops read otherwise (Reshape's shape an attribute, Concat's axis
    optional): those models' standard ops run in ONNX Runtime."""
    if not standard.is_standard(node) or node.op_type not in TABLE or len(node.outputs) != 1:
        return False
    if opset < 11:
        return False
    if node.op_type == "Cast":
        to = _attr(node, "to", opset)
        if to is None or ir.DataType(to) not in _DEVICE_TYPES:
            return False
    return all(map(_tensor_ok, [*node.inputs, *node.outputs]))


def prepare(node: ir.Node, xp: Any, opset: int) -> Callable[[Sequence[Any]], list[Any]]:
    """run(inputs) -> [output] of a node `supports` accepts, on arrays of `xp`; the inputs in
    `host_inputs` are host arrays. A node's attributes are read here, once."""
    f = TABLE[node.op_type].make(xp, node, opset)

    def run(inputs: Sequence[Any]) -> list[Any]:
        while inputs and inputs[-1] is None:  # an absent optional input at the end
            inputs = inputs[:-1]
        y = f(*inputs)
        # numpy makes a scalar of a 0-d result (CuPy a 0-d array): an array, as ONNX's.
        return [y if isinstance(y, xp.ndarray) else xp.asarray(y)]

    return run


def host_inputs(node: ir.Node) -> tuple[int, ...]:
    return TABLE[node.op_type].host


def opset_of(opset_imports: dict[str, int]) -> int:
    """The model's default-domain opset ("" or "ai.onnx")."""
    for domain in ("", "ai.onnx"):
        if domain in opset_imports:
            return opset_imports[domain]
    return ONNX_OPSET
