"""DropoutGrad and recompute_dropout_mask on hand-built graphs: producer -> Dropout (mask kept)
-> y, and DropoutGrad(dy, mask) -> dx. The oracle for dx is dy * keep * scale with keep drawn
by kernels/reference.py's Philox from the same (seed, offset); a whole Paddle training program
is in tests/integrations/paddle/test_training_program.py."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from helpers.error_bounds import assert_within
from helpers.graph_bounds import SESSION, output_bounds
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb
from fusebridge.fuse_passes import Pipeline, recompute_dropout_mask
from fusebridge.fuse_passes.pipelines import TRAINING_FUSIONS
from fusebridge.kernels import reference

DOMAIN = fb.conventions.DOMAIN
SEED, OFFSET = 2**63 + 11, 2**40 + 5
X = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
DY = np.random.default_rng(2).standard_normal((2, 3, 8)).astype(np.float32)


def _model(producer: str, *, p=0.25, mode="upscale_in_train", axes=(), grad_p=None) -> ir.Model:
    """x [2, 3, 8] -> producer -> Dropout(seed, offset) -> y; DropoutGrad(dy, mask) -> dx."""
    inits = [
        numpy_helper.from_array(np.eye(8, dtype=np.float32)[::-1].copy(), "w"),
        numpy_helper.from_array(np.array(SEED - 2**64, np.int64), "seed"),
        numpy_helper.from_array(np.array(OFFSET, np.int64), "offset"),
    ]
    nodes = {
        "none": [helper.make_node("Identity", ["x"], ["h"])],
        "matmul": [helper.make_node("MatMul", ["x", "w"], ["h"])],
        "softmax": [helper.make_node("Softmax", ["x"], ["h"], axis=-1)],
    }[producer]
    attrs = {"p": p, "mode": mode} | ({"axes": list(axes)} if axes else {})
    nodes.append(
        helper.make_node(
            "Dropout", ["h", "seed", "offset"], ["y", "mask"], "drop", domain=DOMAIN, **attrs
        )
    )
    grad_attrs = attrs | ({"p": grad_p} if grad_p is not None else {})
    nodes.append(
        helper.make_node("DropoutGrad", ["dy", "mask"], ["dx"], "grad", domain=DOMAIN, **grad_attrs)
    )
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3, 8])  # noqa: E731
    graph = helper.make_graph(
        nodes, "g", [value("x"), value("dy")], [value("y"), value("dx")], inits
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    )
    proto.ir_version = 8
    return ir.from_proto(proto)


def _expected_dx(p: float, mode: str, axes=()) -> np.ndarray:
    mask_shape = tuple(1 if i in axes else n for i, n in enumerate(DY.shape))
    _, packed = reference.dropout(DY, p, SEED, OFFSET, mask_shape, mode)
    keep = reference.unpack_mask(packed, mask_shape)
    p32 = np.float32(p)
    scale = 1 / (1 - p32) if mode == "upscale_in_train" and p32 < 1 else 1.0  # p 1: all dropped
    return reference.apply(DY, np.broadcast_to(keep, DY.shape), scale)


@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize(
    ("p", "mode", "axes"),
    [
        (0.25, "upscale_in_train", ()),
        (0.6, "downgrade_in_infer", ()),
        (0.5, "upscale_in_train", (1,)),  # a mask shared along axis 1 (MXNet's axes)
        (0.0, "upscale_in_train", ()),
        (1.0, "upscale_in_train", ()),
    ],
)
def test_dropout_grad_from_mask_and_recomputed(backend, p, mode, axes):
    stored = _model("none", p=p, mode=mode, axes=axes)
    recomputed = _model("none", p=p, mode=mode, axes=axes)
    assert recompute_dropout_mask(recomputed).recomputed == ("drop",)
    want = _expected_dx(p, mode, axes)
    for model in (stored, recomputed):
        got = fb.Session(model, backend=backend).run({"x": X, "dy": DY})
        np.testing.assert_array_equal(got["dx"], want)


@pytest.mark.parametrize(
    ("producer", "fused"), [("matmul", "MatMulDropout"), ("softmax", "SoftmaxDropout")]
)
def test_fused_dropouts_recompute_too(producer, fused):
    model = _model(producer)
    optimized, report = fb.optimize(model, "training")  # fusions, then recompute_dropout_mask
    assert [n.op_type for n in optimized.graph] == [fused, "DropoutGrad"]
    assert report.get("recompute_dropout_mask").notes == ("'drop': recomputed in its backward",)
    node, grad = list(optimized.graph)
    assert len(node.outputs) == 1
    assert grad.inputs[1] is None and grad.inputs[2:] == node.inputs[-2:]
    want = fb.Session(model).run({"x": X, "dy": DY})
    got = fb.Session(optimized).run({"x": X, "dy": DY})
    np.testing.assert_array_equal(got["dx"], want["dx"])
    np.testing.assert_array_equal(got["dx"], _expected_dx(0.25, "upscale_in_train"))
    bounds = output_bounds(model, {"x": X, "dy": DY}, (SESSION, SESSION))  # graph_bounds.py
    assert_within(got["y"], want["y"], bounds["y"], "y")


def test_a_backward_with_other_attributes_keeps_the_mask():
    model = _model("none", grad_p=0.5)
    report = recompute_dropout_mask(model)
    assert report.refused == (("drop", "DropoutGrad 'grad' has other ['p'] than the forward"),)
    assert "'drop': kept, DropoutGrad 'grad' has other ['p']" in report.text()


@pytest.mark.parametrize("inputs", [["dy"], ["dy", "mask", "seed"]])
def test_dropout_grad_needs_one_of_mask_and_seed(inputs):
    model = _model("none")
    grad = next(n for n in model.graph if n.op_type == "DropoutGrad")
    values = {v.name: v for v in (*model.graph.inputs, *model.graph.initializers.values())}
    values["mask"] = grad.inputs[1]
    grad.resize_inputs(len(inputs))
    for i, name in enumerate(inputs):
        grad.replace_input_with(i, values[name])
    with pytest.raises(fb.ArgumentError, match=r"give one of mask .* and seed"):
        fb.Session(model)


# -- softmax with its backward: softmax_dropout_training -------------------------------------
def _softmax_training_model(*, sum_axis=-1, extra_reader=False, axis=-1) -> ir.Model:
    """x -> Softmax -> Dropout(seed, offset) -> y; dy -> DropoutGrad -> g; softmax's gradient
    P * (g - ReduceSum(g * P)) -> dx, written out in ONNX ops as the Paddle frontend does."""
    H = helper
    nodes = [
        H.make_node("Softmax", ["x"], ["probs"], axis=axis),
        H.make_node(
            "Dropout", ["probs", "seed", "offset"], ["y", "mask"], "drop", domain=DOMAIN, p=0.25
        ),
        H.make_node("DropoutGrad", ["dy", "mask"], ["g"], "grad", domain=DOMAIN, p=0.25),
        H.make_node("Mul", ["g", "probs"], ["weighted"]),
        H.make_node("ReduceSum", ["weighted", "axes"], ["total"], keepdims=1),
        H.make_node("Sub", ["g", "total"], ["centred"]),
        H.make_node("Mul", ["probs", "centred"], ["dx"]),
    ]
    value = lambda name: H.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3, 8])  # noqa: E731
    outputs = [value("y"), value("dx")]
    if extra_reader:
        nodes.append(H.make_node("Relu", ["probs"], ["side"]))
        outputs.append(value("side"))
    inits = [
        numpy_helper.from_array(np.array(SEED - 2**64, np.int64), "seed"),
        numpy_helper.from_array(np.array(OFFSET, np.int64), "offset"),
        numpy_helper.from_array(np.array([sum_axis], np.int64), "axes"),
    ]
    graph = H.make_graph(nodes, "g", [value("x"), value("dy")], outputs, inits)
    proto = H.make_model(graph, opset_imports=[H.make_opsetid("", 17), H.make_opsetid(DOMAIN, 1)])
    proto.ir_version = 8
    return ir.from_proto(proto)


def _softmax_dropout_dx(axis: int) -> np.ndarray:
    """The formula in float64, keep from reference.py's Philox."""
    e = np.exp(X.astype(np.float64) - X.max(axis=axis, keepdims=True))
    probs = e / e.sum(axis=axis, keepdims=True)
    g = _expected_dx(0.25, "upscale_in_train").astype(np.float64)
    return probs * (g - (g * probs).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_with_its_backward_fuses_and_recomputes(axis):
    model = _softmax_training_model(sum_axis=axis, axis=axis)
    # The fusions alone first: the masks kept, to compare with the training pipeline's.
    fused, report = fb.optimize(model, Pipeline("fusions", TRAINING_FUSIONS))
    assert report.fired("softmax_dropout_training") == 1
    assert sorted(n.op_type for n in fused.graph) == ["SoftmaxDropout", "SoftmaxDropoutGrad"]
    feeds = {"x": X, "dy": DY}
    want = fb.Session(model).run(feeds)
    bounds = output_bounds(model, feeds, (SESSION, SESSION))
    for backend in ("kernels", "reference"):
        got = fb.Session(fused, backend=backend).run(feeds)
        assert_within(got["y"], want["y"], bounds["y"], f"{backend} y")
        assert_within(got["dx"], want["dx"], bounds["dx"], f"{backend} dx")
        # against the formula in float64: one implementation's bound
        half = output_bounds(model, feeds, (SESSION,))["dx"]
        assert_within(got["dx"], _softmax_dropout_dx(axis), half, f"{backend} dx, the formula")
    stored = fb.Session(fused).run(feeds)
    training, report = fb.optimize(model, "training")
    assert report.fired("softmax_dropout_training") == report.fired("recompute_dropout_mask") == 1
    forward, backward = sorted(training.graph, key=lambda n: n.op_type)
    assert len(forward.outputs) == 1 and backward.inputs[2] is None
    assert backward.inputs[3:] == forward.inputs[1:]
    recomputed = fb.Session(training).run(feeds)
    for name in stored:
        np.testing.assert_array_equal(recomputed[name], stored[name])


def test_softmax_training_fusion_refusals():
    _, report = fb.optimize(_softmax_training_model(extra_reader=True), "training")
    (why,) = [w for _, w in report.refusals("softmax_dropout_training")]
    assert why == "the probabilities 'probs' are read outside the softmax backward"
    _, report = fb.optimize(_softmax_training_model(sum_axis=1), "training")
    (why,) = [w for _, w in report.refusals("softmax_dropout_training")]
    assert why == "the ReduceSum is not over the softmax axis -1 with keepdims"
