"""Hand-built ONNX models (onnx.helper) for the import tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gru_model(
    *,
    direction: str = "forward",
    linear_before_reset: int = 1,
    layout: int = 0,
    input_size: int = 5,
    hidden: int = 6,
    with_lens: bool = True,
    with_h0: bool = False,
    with_bias: bool = True,
    y_h: bool = True,
    activations: list[str] | None = None,
    projection: str | None = None,  # None, "matmul", "matmul_add", "add_matmul"
    projection_size: int | None = None,
    seed: int = 0,
) -> onnx.ModelProto:
    """X [T, N, I] (or [N, T, I] with layout 1) -> [MatMul (+ Add) ->] GRU -> Y (+ Y_h)."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    inits, nodes = [], []
    x_in = "X"
    feature = input_size
    if projection:
        feature = projection_size or input_size + 3
        w1 = rng.standard_normal((input_size, feature)).astype(np.float32) * 0.4
        b1 = rng.standard_normal(feature).astype(np.float32) * 0.2
        inits += [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1")]
        mm = "proj" if projection == "matmul" else "mm"
        nodes.append(helper.make_node("MatMul", ["X", "W1"], [mm]))
        if projection == "matmul_add":
            nodes.append(helper.make_node("Add", ["mm", "b1"], ["proj"]))
        elif projection == "add_matmul":
            nodes.append(helper.make_node("Add", ["b1", "mm"], ["proj"]))
        x_in = "proj"
    w = rng.standard_normal((d, 3 * hidden, feature)).astype(np.float32) * 0.4
    r = rng.standard_normal((d, 3 * hidden, hidden)).astype(np.float32) * 0.4
    b = rng.standard_normal((d, 6 * hidden)).astype(np.float32) * 0.3
    inits += [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    gru_inputs = [x_in, "W", "R", "B" if with_bias else "", "seq_lens" if with_lens else ""]
    if with_bias:
        inits.append(numpy_helper.from_array(b, "B"))
    if with_h0:
        gru_inputs.append("h0")
    attrs = {
        "hidden_size": hidden,
        "direction": direction,
        "linear_before_reset": linear_before_reset,
    }
    if layout:
        attrs["layout"] = 1
    if activations:
        attrs["activations"] = activations * d
        if "Affine" in activations:
            attrs["activation_alpha"] = [1.0] * 2 * d
            attrs["activation_beta"] = [0.0] * 2 * d
    nodes.append(helper.make_node("GRU", gru_inputs, ["Y", "Y_h"] if y_h else ["Y"], **attrs))
    seq = ["T", "N"] if not layout else ["N", "T"]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [*seq, input_size])]
    if with_lens:
        inputs.append(helper.make_tensor_value_info("seq_lens", TensorProto.INT32, ["N"]))
    if with_h0:
        h0_shape = [d, "N", hidden] if not layout else ["N", d, hidden]
        inputs.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, h0_shape))
    y_shape = ["T", d, "N", hidden] if not layout else ["N", "T", d, hidden]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)]
    if y_h:
        yh_shape = [d, "N", hidden] if not layout else ["N", d, hidden]
        outputs.append(helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, yh_shape))
    graph = helper.make_graph(nodes, "gru", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
