"""fold_constants (fuse_passes/constant_folding.py): what it folds, and that a node whose output
size comes from its inputs' values is never evaluated, whatever the file says."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxscript.optimizer._constant_folding import FoldConstantsPass

import fusebridge as fb
from fusebridge.fuse_passes import constant_folding


def _model(path, nodes, initializers, x_shape=(2, 3)):
    nodes = [*nodes, helper.make_node("Mul", ["x", "z"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(a, n) for n, a in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, path)
    return path


def test_a_slice_and_concat_of_constants_folds_and_runs_as_before(tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    starts, ends, axes = (np.array([v], np.int64) for v in (2, 4, 0))
    nodes = [
        helper.make_node("Slice", ["w", "s", "e", "a"], ["tail"]),
        helper.make_node("Slice", ["w", "s0", "s", "a"], ["head"]),
        helper.make_node("Concat", ["tail", "head"], ["swapped"], axis=0),
        helper.make_node("Slice", ["swapped", "s0", "two", "a"], ["z"]),
    ]
    consts = {"w": w, "s": starts, "e": ends, "a": axes}
    consts |= {"s0": np.array([0], np.int64), "two": np.array([2], np.int64)}
    path = _model(tmp_path / "fold.onnx", nodes, consts)
    model = fb.load(path)
    report = model.meta["fusebridge.load_report"].get("fold_constants")
    assert report.fired == 4 and [n.op_type for n in model.graph] == ["Mul"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(fb.Session(model).run({"x": x})["y"], want)


@pytest.mark.parametrize(
    "op, inputs, initializers",
    [
        ("Range", ["s", "l", "d"], {"s": 0.0, "l": 3e9, "d": 1.0}),
        ("Expand", ["one", "shape"], {"one": [1.0], "shape": [60000, 60000]}),
        ("Tile", ["one", "shape"], {"one": [1.0], "shape": [3_000_000_000]}),
        ("ConstantOfShape", ["shape"], {"shape": [60000, 60000]}),
        ("Add", ["col", "row"], {"col": np.ones((4096, 1)), "row": np.ones((1, 4096))}),
    ],
)
def test_an_op_whose_size_comes_from_values_is_never_evaluated(
    tmp_path, monkeypatch, op, inputs, initializers
):
    def typed(value):
        a = np.asarray(value)
        return a.astype(np.int64 if a.dtype.kind == "i" else np.float32)

    consts = {name: typed(v) for name, v in initializers.items()}
    path = _model(tmp_path / "big.onnx", [helper.make_node(op, inputs, ["z"])], consts, (1,))
    evaluated = []
    original = FoldConstantsPass.process_node

    def spy(self, node, is_function):
        evaluated.append(node.op_type)
        return original(self, node, is_function)

    monkeypatch.setattr(FoldConstantsPass, "process_node", spy)
    model = fb.load(path)
    assert op not in evaluated
    assert [n.op_type for n in model.graph] == [op, "Mul"]
    assert constant_folding.output_bound(model.graph.node(0)) in (None, 4096 * 4096)


def test_sizes_given_by_constant_nodes_are_bounded_too(tmp_path, monkeypatch):
    """The shape of an Expand from a Constant node (as torch writes them), not an initializer:
    the folder knows its value, so the bound must too."""
    shape = onnx.numpy_helper.from_array(np.array([60000, 60000], np.int64), "shape_value")
    nodes = [
        helper.make_node("Constant", [], ["shape"], value=shape),
        helper.make_node("Expand", ["one", "shape"], ["z"]),
    ]
    path = _model(tmp_path / "big.onnx", nodes, {"one": np.ones(1, np.float32)}, (1,))
    evaluated = []
    original = FoldConstantsPass.process_node
    monkeypatch.setattr(
        FoldConstantsPass,
        "process_node",
        lambda self, node, f: evaluated.append(node.op_type) or original(self, node, f),
    )
    model = fb.load(path)
    assert "Expand" not in evaluated
    assert [n.op_type for n in model.graph] == ["Expand", "Mul"]
