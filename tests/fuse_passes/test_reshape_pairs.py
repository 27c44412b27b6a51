"""reshape_pairs: Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) for a constant s2. Oracle:
onnx.reference on the model before the pass, for each case's input; structure: how many Reshapes
are left; refusals where s2 is computed or the middle value has another reader."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from fusebridge.fuse_passes.gru_layout import ReshapePairs


def chain(s2, allowzero=0, second_reader=False, computed=False, x_shape=("A", 4, 6)):
    """x -> Reshape(s1 = [0, 0, 2, 3]) -> mid -> Reshape(s2) -> y (opset 17)."""
    inits = [helper.make_tensor("s1", TensorProto.INT64, [4], [0, 0, 2, 3])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    if computed:
        inputs.append(helper.make_tensor_value_info("s2", TensorProto.INT64, [len(s2)]))
    else:
        inits.append(helper.make_tensor("s2", TensorProto.INT64, [len(s2)], s2))
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["mid"], name="first"),
        helper.make_node("Reshape", ["mid", "s2"], ["y"], name="second", allowzero=allowzero),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if second_reader:
        nodes.append(helper.make_node("Neg", ["mid"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "chain", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model)


def rewritten(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    model = ir.from_proto(proto)
    report = ReshapePairs("reshape_pairs")(model).report
    return ir.to_proto(model), report.fired


def outputs(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ReferenceEvaluator(proto).run(None, feeds)


@pytest.mark.parametrize(
    ("s2", "allowzero"),
    [
        ([5, -1, 6], 0),  # torch's dynamo export: a constant target
        ([5, -1, 6], 1),  # ... with allowzero 1, which a target without 0 ignores
        ([0, 24], 0),  # a 0 copies the middle shape's dim 0, the same as x's
        ([-1], 0),
    ],
)
def test_two_reshapes_become_one_with_the_same_values(s2, allowzero):
    proto = chain(s2, allowzero, x_shape=(5, 4, 6))
    x = np.random.default_rng(0).standard_normal((5, 4, 6)).astype(np.float32)
    after, fired = rewritten(proto)
    assert fired == 1
    assert [n.op_type for n in after.graph.node] == ["Reshape"]
    np.testing.assert_array_equal(outputs(after, {"x": x})[0], outputs(proto, {"x": x})[0])


def test_a_computed_target_or_a_second_reader_of_the_middle_is_left():
    x = np.ones((5, 4, 6), np.float32)
    for proto, feeds in (
        (chain([5, -1, 6], computed=True), {"x": x, "s2": np.array([5, -1, 6], np.int64)}),
        (chain([5, -1, 6], second_reader=True), {"x": x}),
    ):
        after, fired = rewritten(proto)
        assert fired == 0
        assert [n.op_type for n in after.graph.node].count("Reshape") == 2
        for got, want in zip(outputs(after, feeds), outputs(proto, feeds)):
            np.testing.assert_array_equal(got, want)


def test_a_zero_copying_an_unknown_middle_dim_beside_minus_one_is_left():
    """[0, -1] copies dim 0 of the middle shape, which equals x's only through s1: with the
    middle's dims unknown the rule cannot resolve the 0, so both Reshapes stay."""
    proto = chain([0, -1], x_shape=("A", "B", 6))
    after, fired = rewritten(proto)
    assert fired == 0
    x = np.random.default_rng(1).standard_normal((3, 4, 6)).astype(np.float32)
    np.testing.assert_array_equal(outputs(after, {"x": x})[0], outputs(proto, {"x": x})[0])
