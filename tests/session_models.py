"""ONNX models for Session tests, made from helper nodes: opset 17 and fusebridge's domain."""

from __future__ import annotations

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
