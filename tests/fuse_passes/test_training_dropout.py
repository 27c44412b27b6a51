"""The training-dropout fusions (pipeline "training"): MatMul [+ bias] -> Dropout and Softmax ->
Dropout become MatMulDropout / SoftmaxDropout with the same seed and offset, so the same bits;
what they refuse, and why."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.error_bounds import assert_within
from helpers.graph_bounds import SESSION, output_bounds
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb

DOMAIN = fb.conventions.DOMAIN


def _model(producer: str, *, axes=None, extra_consumer=False, mask=False) -> ir.Model:
    """x [2, 3, 8] -> producer -> Dropout(p 0.25, seed 11, offset 5) -> y."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([11], np.int64), "seed"),
        numpy_helper.from_array(np.array([5], np.int64), "offset"),
    ]
    nodes = {
        "matmul": [helper.make_node("MatMul", ["x", "w"], ["h"])],
        "matmul_add": [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["b", "m"], ["h"]),
        ],
        "softmax": [helper.make_node("Softmax", ["x"], ["h"], axis=1)],
    }[producer]
    attrs = {"p": 0.25} | ({"axes": axes} if axes else {})
    outs = ["y", "mask"] if mask else ["y"]
    nodes.append(helper.make_node("Dropout", ["h", "seed", "offset"], outs, domain=DOMAIN, **attrs))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])]
    if extra_consumer:
        nodes.append(helper.make_node("Relu", ["h"], ["side"]))
        outputs.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, ["a", "b", "c"]))
    if mask:
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.UINT8, ["n"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
        outputs,
        inits,
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    )
    proto.ir_version = 8
    return ir.from_proto(proto)


X = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)


@pytest.mark.parametrize(
    ("producer", "rule", "fused"),
    [
        ("matmul", "matmul_dropout", "MatMulDropout"),
        ("matmul_add", "matmul_add_dropout", "MatMulDropout"),
        ("softmax", "softmax_dropout", "SoftmaxDropout"),
    ],
)
@pytest.mark.parametrize("mask", [False, True])
def test_fused_equals_unfused(producer, rule, fused, mask):
    model = _model(producer, mask=mask)
    optimized, report = fb.optimize(model, "training")
    assert report.fired(rule) == 1
    assert [n.op_type for n in optimized.graph] == [fused]
    onnx.checker.check_model(ir.to_proto(optimized))
    bounds = output_bounds(model, {"x": X}, (SESSION, SESSION))
    for backend in ("reference", "kernels"):
        want = fb.Session(model, backend=backend).run({"x": X})
        got = fb.Session(optimized, backend=backend).run({"x": X})
        assert set(got) == set(want)
        if mask:  # the same bits
            np.testing.assert_array_equal(got["mask"], want["mask"])
        np.testing.assert_array_equal(got["y"] == 0, want["y"] == 0)  # the same drops
        # The unfused product comes from ONNX Runtime's MatMul / Softmax (the reference
        # backend's fused one in float64): equal within both error bounds. Kernel against
        # kernel, fused is bit-identical to matmul + dropout (tests/kernels/test_fused_dropout.py).
        assert_within(got["y"], want["y"], bounds["y"], f"{backend} y")


def test_refusals_say_why():
    _, report = fb.optimize(_model("matmul", axes=[1]), "training")
    assert "its mask is shared along axes [1]" in report.text()
    _, report = fb.optimize(_model("softmax", extra_consumer=True), "training")
    assert "the Softmax output 'h' has a second consumer" in report.text()


def test_torch_encoder_block_through_explicit_rng_and_fusions():
    """A transformer encoder block exported by torch in training mode (attention dropout, the
    residual and feed-forward dropouts): explicit_rng gives each dropout its stream, the
    training fusions fuse three of the four, and a run is deterministic under a key and equal
    to the reference backend's."""
    from pathlib import Path

    from fusebridge.fuse_passes import explicit_rng

    path = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "torch_encoder_train.onnx"
    model = fb.load(path)
    assert explicit_rng(model).count == 4
    optimized, report = fb.optimize(model, "training")
    assert report.fired("softmax_dropout") == 1 and report.fired("matmul_add_dropout") == 2
    x = np.random.default_rng(2).standard_normal((3, 7, 16)).astype(np.float32)
    key = fb.random.key(2024)
    session = fb.Session(optimized)
    first, second = session.run({"x": x}, rng=key), session.run({"x": x}, rng=key)
    np.testing.assert_array_equal(first["y"], second["y"])
    assert int(first["rng_offset_out"]) == key.offset + 4
    other = session.run({"x": x}, rng=fb.random.fold_in(key, 1))["y"]
    assert not np.array_equal(other, first["y"])
    reference = fb.Session(model, backend="reference").run({"x": x}, rng=key)
    feeds = {
        "x": x,
        fb.random.SEED_INPUT: np.array(fb.random.as_int64(key.seed), np.int64),
        fb.random.OFFSET_INPUT: np.array(fb.random.as_int64(key.offset), np.int64),
    }
    bound = output_bounds(model, feeds, (SESSION, SESSION))["y"]
    assert_within(first["y"], reference["y"], bound, "against the reference backend")
    unfused = fb.Session(model).run({"x": x}, rng=key)
    assert_within(first["y"], unfused["y"], bound, "against the unfused model")
