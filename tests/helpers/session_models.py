"""ONNX models for Session tests, made from helper nodes: opset 17 and fusebridge's domain."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

import fusebridge as fb

F32 = TensorProto.FLOAT


def info(name: str, elem: int = F32, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(nodes, inputs, outputs, initializers=(), *, check: bool = True) -> ir.Model:
    """The model, passed through onnx.checker unless check is False."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(fb.conventions.DOMAIN, 1)],
        ir_version=10,
    )
    if check:
        onnx.checker.check_model(proto)
    return ir.from_proto(proto)


def training_step_model() -> ir.Model:
    """x [5, 8] @ w -> training Dropout (p 0.4, no seed; mask) -> y, and DropoutGrad(dy, mask)
    -> dx: something for each step of the training pipeline (a stream to give, a MatMul +
    dropout to fuse, a mask to recompute)."""
    w = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node(
            "Dropout", ["h"], ["y", "mask"], "drop", domain=fb.conventions.DOMAIN, p=0.4
        ),
        helper.make_node(
            "DropoutGrad", ["dy", "mask"], ["dx"], "grad", domain=fb.conventions.DOMAIN, p=0.4
        ),
    ]
    return make_model(
        nodes,
        [info("x", shape=[5, 8]), info("dy", shape=[5, 6])],
        [info("y", shape=[5, 6]), info("dx", shape=[5, 6])],
        [helper.make_tensor("w", F32, w.shape, w.reshape(-1))],
    )
