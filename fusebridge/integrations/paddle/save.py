"""An optimized model written back as a Paddle 3 inference model (`prefix.json` +
`prefix.pdiparams`, PIR): standard ONNX nodes become Paddle's own ops, our fused GRU the
`fusebridge_fusion_gru` custom operator (op_library.py). Built with Paddle's own static API and
saved by `paddle.static.save_inference_model`, so Paddle writes the files; Paddle Inference
runs them in a process that called `register()`.

One mapper per op type; whether every node can be written is decided before anything is built,
and the nodes that cannot are listed at once (as paddle2onnx's mappers do)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, kernels, ops
from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.builder import model_opset
from fusebridge.graph.checks import qualified_op
from fusebridge.integrations.converters import ConverterRegistry, ir_node_label

# Constants up to this many elements are written into the program (assign_value); larger ones
# become parameters, saved in the .pdiparams.
_INLINE_MAX = 64

# IR op type (`domain.op` outside ONNX's domain) -> (paddle, node, its inputs as Paddle values)
# -> the Paddle values of its outputs.
MAPPERS = ConverterRegistry("Paddle mapping")


_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}
_BINARY |= {"Less": "less_than", "Greater": "greater_than", "Equal": "equal"}
_UNARY = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Exp": "exp", "Sqrt": "sqrt"}


@MAPPERS.register(*_BINARY)
def _binary(paddle, node, inputs):
    return [getattr(paddle, _BINARY[node.op_type])(*inputs)]


@MAPPERS.register(*_UNARY)
def _unary(paddle, node, inputs):
    return [getattr(paddle.nn.functional, _UNARY[node.op_type])(inputs[0])]


@MAPPERS.register("Identity")
def _identity(paddle, node, inputs):
    return [inputs[0]]


@MAPPERS.register("Where")
def _where(paddle, node, inputs):
    return [paddle.where(*inputs)]


@MAPPERS.register("MatMul")
def _matmul(paddle, node, inputs):
    return [paddle.matmul(*inputs)]


@MAPPERS.register("Gather")
def _gather(paddle, node, inputs):
    # An embedding lookup: rows of a 2-D table (checked by _check).
    return [paddle.nn.functional.embedding(inputs[1], weight=inputs[0])]


@MAPPERS.register("Softmax")
def _softmax(paddle, node, inputs):
    return [paddle.nn.functional.softmax(inputs[0], axis=ops.attribute(node, "axis"))]


@MAPPERS.register("Transpose")
def _transpose(paddle, node, inputs):
    perm = ops.attribute(node, "perm")  # ONNX's default: the axes reversed
    return [
        paddle.transpose(inputs[0], list(range(inputs[0].ndim))[::-1] if perm is None else perm)
    ]


@MAPPERS.register("Reshape")
def _reshape(paddle, node, inputs):
    shape = node.inputs[1].const_value.numpy()  # a constant (checked by _check)
    return [paddle.reshape(inputs[0], [int(d) for d in shape])]


@MAPPERS.register("LayerNormalization")
def _layer_norm(paddle, node, inputs):
    x, scale, bias = (inputs + [None, None])[:3]
    dims = list(node.inputs[1].const_value.shape)
    rank = len(x.shape)  # Paddle knows every rank when it builds the program
    if ops.attribute(node, "axis") % rank != rank - len(dims):
        # Nothing is saved: the files are written after the whole program is built.
        raise UnsupportedOpError(
            f"save_paddle: {ir_node_label(node)}: normalizes from axis "
            f"{ops.attribute(node, 'axis')} of a rank {rank} input but its scale has "
            f"{len(dims)} dims; Paddle's layer_norm normalizes the scale's (the last) dims"
        )
    eps = float(ops.attribute(node, "epsilon"))
    return [paddle.nn.functional.layer_norm(x, dims, weight=scale, bias=bias, epsilon=eps)]


# Inputs a mapper reads as constants itself instead of as Paddle values: FusionGRU's weights,
# which are written packed (the layout the kernel reads), so no run packs them again.
_READ_AS_CONSTANTS = {f"{conventions.DOMAIN}.FusionGRU": range(2, 6)}


def _parameter(paddle, array: np.ndarray):
    """A persistable parameter holding `array` (saved in the .pdiparams)."""
    init = paddle.nn.initializer.Assign(np.ascontiguousarray(array))
    return paddle.static.create_parameter(
        list(array.shape), array.dtype.name, default_initializer=init
    )


@MAPPERS.register(f"{conventions.DOMAIN}.FusionGRU")
def _fusion_gru(paddle, node, inputs):
    from fusebridge.integrations.paddle.op_library import register

    x, lengths, _, _, _, _, h0 = (inputs + [None] * 7)[:7]
    weights = (list(node.inputs) + [None] * 6)[2:6]
    wx, wh, b, bh = (None if v is None else v.const_value.numpy() for v in weights)
    packed = kernels.pack_gru_weights(wx, wh, b, bh)
    if lengths is None:  # every sentence as long as the padding: T for each of the N
        layout = ops.attribute(node, "layout")
        steps = paddle.ones_like(x[:, :, 0], dtype="int64")
        lengths = paddle.sum(steps, axis=1 if layout == "ntc" else 0)
    weights = [packed.wx, packed.wh, packed.bias_x, packed.bias_hc]
    y = register().fusebridge_fusion_gru(
        x, lengths, *(_parameter(paddle, w) for w in weights), h0,
        ops.attribute(node, "direction"),
        ops.attribute(node, "layout"), bool(ops.attribute(node, "linear_before_reset")),
        bool(ops.attribute(node, "origin_mode")), ops.attribute(node, "activation"),
        ops.attribute(node, "gate_activation"),
    )  # fmt: skip
    return [y]


def _check(node: ir.Node, opset: int) -> str | None:
    """Why `node` of a model of standard opset `opset` cannot be written, or None. The mappers
    read standard attributes with their defaults at opset 17 (ops.attribute): where an older
    opset's op means something else, it is refused here."""
    if qualified_op(node) not in MAPPERS:
        return "no Paddle mapping"
    if node.op_type == "Softmax" and node.domain in ("", "ai.onnx") and opset < 13:
        return f"Softmax of opset {opset} works on the input flattened to 2-D from its axis"
    used = [o for o in node.outputs[1:] if o.uses() or o.is_graph_output()]
    if used:
        return f"its output {used[0].name!r} is used (only the first output is written)"
    if node.op_type == "Gather":
        table = node.inputs[0]
        if ops.attribute(node, "axis") != 0 or table.shape is None or len(table.shape) != 2:
            return "only a row lookup in a 2-D table (axis 0) is written"
    if node.op_type == "Reshape" and (
        node.inputs[1].const_value is None or ops.attribute(node, "allowzero")
    ):
        return "the shape must be a constant (allowzero 0)"
    if node.op_type == "LayerNormalization" and node.inputs[1].const_value is None:
        return "the scale must be a constant"
    if node.op_type == "FusionGRU":
        if ops.attribute(node, "layout") == "lod":
            return "a LoD GRU (Paddle's custom operators take padded input and lengths)"
        if any(v is not None and v.const_value is None for v in node.inputs[2:6]):
            return "its weights must be constants (they are written packed)"
    return None


def save_paddle(model: ir.Model, prefix: str | os.PathLike) -> Path:
    """Writes `model` (usually `fb.optimize(fb.load(...))[0]`) as a Paddle 3 inference model:
    prefix.json + prefix.pdiparams; returns the .json path. Needs paddle; builds and loads our
    custom operators (`register()`), which a process running the saved model needs too."""
    refusals = [
        f"{ir_node_label(n)} ({why})"
        for n in model.graph
        if (why := _check(n, model_opset(model))) is not None
    ]
    refusals += [
        f"input {v.name!r} (its rank is unknown)" for v in model.graph.inputs if v.shape is None
    ]
    if refusals:
        raise UnsupportedOpError(
            f"save_paddle: {len(refusals)} node(s) or input(s) cannot be written as Paddle ops: "
            + "; ".join(refusals)
        )
    from fusebridge.integrations.paddle.legacy import import_paddle, static_mode

    paddle = import_paddle(pir=True)
    prefix = Path(prefix)
    with static_mode(paddle, pir=True):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            feeds = _build(paddle, model)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        inputs, outputs = feeds
        paddle.static.save_inference_model(str(prefix), inputs, outputs, exe, program=main)
    return prefix.with_suffix(".json")


def _build(paddle, model: ir.Model) -> tuple[list, list]:
    """The program of `model` inside the current program_guard: (feed vars, fetch vars)."""
    values: dict[ir.Value, Any] = {}
    feeds = []
    for v in model.graph.inputs:
        shape = [-1 if not isinstance(d, int) else d for d in v.shape]
        feeds.append(paddle.static.data(v.name, shape, v.dtype.numpy().name))
        values[v] = feeds[-1]

    def value(v: ir.Value | None):
        if v is None:
            return None
        if v not in values:
            array = v.const_value.numpy()  # neither a feed nor computed: an initializer
            if array.size <= _INLINE_MAX or array.dtype.kind not in "f":
                values[v] = paddle.assign(np.ascontiguousarray(array))
            else:
                values[v] = _parameter(paddle, array)
        return values[v]

    for node in model.graph:
        op = qualified_op(node)
        mapper = MAPPERS.lookup(op, f"save_paddle: {ir_node_label(node)}")
        constants = _READ_AS_CONSTANTS.get(op, ())
        inputs = [None if i in constants else value(v) for i, v in enumerate(node.inputs)]
        outs = mapper(paddle, node, inputs)
        values[node.outputs[0]] = outs[0]
    return feeds, [values[v] for v in model.graph.outputs]


__all__ = ["save_paddle"]
