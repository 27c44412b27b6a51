"""Sequence-typed values (SplitToSequence, as torch writes for a loop over frames): the Session's
ONNX Runtime partitions declare them as sequences, and the portable export of a model that
passes strict shape inference passes it too."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb


def _frames_model() -> onnx.ModelProto:
    """x [T, N, 4] split into frames; a Loop runs a GRU step on each, reading the sequence
    from around it."""
    rng = np.random.default_rng(0)
    body = helper.make_graph(
        [
            helper.make_node("SequenceAt", ["seq", "i"], ["frame"]),
            helper.make_node("Unsqueeze", ["frame", "axis0"], ["frame3"]),
            helper.make_node(
                "GRU", ["frame3", "W", "R", "B", "", "h"], ["y", "h_out"], hidden_size=6
            ),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Squeeze", ["y", "axis0"], ["y_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "N", 6]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, "N", 6]),
            helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [1, "N", 6]),
        ],
    )
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0, keepdims=0),
        helper.make_node("SequenceLength", ["seq"], ["n"]),
        helper.make_node("Loop", ["n", "", "h0"], ["hn", "ys"], body=body),
    ]
    weights = {
        "axis0": np.array([0], np.int64),
        "W": rng.standard_normal((1, 18, 4)).astype(np.float32),
        "R": rng.standard_normal((1, 18, 6)).astype(np.float32),
        "B": rng.standard_normal((1, 36)).astype(np.float32),
    }
    graph = helper.make_graph(
        nodes,
        "frames",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", 4]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, "N", 6]),
        ],
        [
            helper.make_tensor_value_info("hn", TensorProto.FLOAT, [1, "N", 6]),
            helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["T", 1, "N", 6]),
        ],
        initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    # With its value_info (seq: a sequence), as exporters write it.
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)


def test_sequence_values_run_and_export_portable(tmp_path):
    path, portable_path = tmp_path / "frames.onnx", tmp_path / "portable.onnx"
    onnx.save(_frames_model(), path)
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((7, 3, 4)).astype(np.float32),
        "h0": rng.standard_normal((1, 3, 6)).astype(np.float32),
    }
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    want = dict(zip(["hn", "ys"], want))
    model = fb.load(path)
    bounds = output_bounds(model, feeds, (SESSION, ONNXRUNTIME))
    check_outputs(fb.Session(model).run(feeds), want, bounds, "frames")
    fb.save_onnx(model, portable_path, portable=True)
    onnx.shape_inference.infer_shapes(onnx.load(portable_path), strict_mode=True, check_type=True)
    plain = ort.InferenceSession(str(portable_path), providers=["CPUExecutionProvider"])
    check_outputs(dict(zip(["hn", "ys"], plain.run(None, feeds))), want, bounds, "portable")
