"""ONNX Runtime's contrib ops (com.microsoft): fb.Session runs them in ONNX Runtime partitions
equal to ONNX Runtime on the original file; the portable export lowers them to standard ops
(integrations/onnx/contrib_ops.py), and plain ONNX Runtime on it gives the same outputs. Ops
without a lowering, and domains no backend runs, are refused by name."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, assert_within
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb

MS = "com.microsoft"
OPSETS = [helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)]


def _model(node: onnx.NodeProto, inputs: dict[str, list], weights: dict[str, np.ndarray]):
    graph = helper.make_graph(
        [node],
        "contrib",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=8)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def _stored(target: list[int], batch: bool, trans: bool) -> list[int]:
    """The shape an input must have to be `target` after FusedMatMul's transposes: transBatch
    moves dim 0 behind the batch dims, trans swaps the last two."""
    rank = len(target)
    perm = [*range(1, rank - 1), 0, rank - 1] if batch else list(range(rank))
    if trans:
        perm = [*perm[:-2], perm[-1], perm[-2]]
    stored = [0] * rank
    for i, p in enumerate(perm):
        stored[p] = target[i]
    return stored


def _matmul(**attrs):
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)
    a = _stored([3, 4, 5], attrs.get("transBatchA", 0), attrs.get("transA", 0))
    b = _stored([3, 5, 6], attrs.get("transBatchB", 0), attrs.get("transB", 0))
    return _model(node, {"a": a, "b": b}, {})


def _conv(activation: str | None, params=(), with_z: bool = False):
    inputs = ["x", "w", "bias"] + (["z"] if with_z else [])
    attrs = {"activation": activation} if activation else {}
    if params:
        attrs["activation_params"] = list(params)
    node = helper.make_node(
        "FusedConv", inputs, ["y"], domain=MS, kernel_shape=[3], pads=[1, 1], **attrs
    )
    weights = {"w": _rand(6, 4, 3), "bias": _rand(6)}
    shapes = {"x": [2, 4, 7], **({"z": [2, 6, 7]} if with_z else {})}
    return _model(node, shapes, weights)


def _gemm(activation: str, **attrs):
    node = helper.make_node(
        "FusedGemm", ["a", "b", "c"], ["y"], domain=MS, activation=activation, transB=1, **attrs
    )
    return _model(node, {"a": [3, 5]}, {"b": _rand(4, 5), "c": _rand(4)})


def _unary(op_type: str, bias: bool = False, **attrs):
    inputs = ["x", "bias"] if bias else ["x"]
    node = helper.make_node(op_type, inputs, ["y"], domain=MS, **attrs)
    return _model(node, {"x": [2, 3, 8]}, {"bias": _rand(8)} if bias else {})


CASES = {
    "matmul_scaled": _matmul(alpha=0.5),
    "matmul_transA": _matmul(transA=1),
    "matmul_transB_alpha": _matmul(transB=1, alpha=0.125),
    "matmul_transBatchA": _matmul(transBatchA=1),
    "matmul_transBatchB_transB": _matmul(transBatchB=1, transB=1),
    "matmul_all": _matmul(transA=1, transB=1, transBatchA=1, transBatchB=1, alpha=2.0),
    "conv_relu": _conv("Relu"),
    "conv_relu_sum": _conv("Relu", with_z=True),
    "conv_tanh": _conv("Tanh"),
    "conv_sigmoid": _conv("Sigmoid"),
    "conv_leaky": _conv("LeakyRelu", [0.2]),
    "conv_clip": _conv("Clip", [-0.5, 0.75]),
    "conv_hard_sigmoid": _conv("HardSigmoid", [0.3, 0.4]),
    "conv_none": _conv(None),
    "gemm_relu": _gemm("Relu", alpha=0.5, beta=2.0),
    "gemm_leaky": _gemm("LeakyRelu", activation_alpha=0.1),
    "gelu": _unary("Gelu"),
    "bias_gelu": _unary("BiasGelu", bias=True),
    "fast_gelu": _unary("FastGelu", bias=True),
    "quick_gelu": _unary("QuickGelu", alpha=1.5),
}


def _feeds(session: ort.InferenceSession) -> dict[str, np.ndarray]:
    return {
        i.name: _rand(*(d if isinstance(d, int) else 3 for d in i.shape), seed=k)
        for k, i in enumerate(session.get_inputs())
        if i.type == "tensor(float)"
    }


def _check_runs_and_lowers(path: Path, tmp_path: Path) -> onnx.ModelProto:
    """fb.Session on the file equals ONNX Runtime on it; its portable export holds standard ops
    only and plain ONNX Runtime on it gives the same outputs, within the error bounds of both
    (tests/helpers/graph_bounds.py, on the portable form: the same function in standard ops).
    Returns the portable model."""
    oracle = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.get_outputs()]
    feeds = _feeds(oracle)
    want = dict(zip(names, oracle.run(names, feeds)))
    model = fb.load(path)
    portable_path = tmp_path / "portable.onnx"
    fb.save_onnx(model, portable_path, portable=True)
    portable = onnx.load(str(portable_path))
    onnx.checker.check_model(portable, full_check=True)
    assert {n.domain for n in portable.graph.node} <= {""}
    assert [o.domain for o in portable.opset_import] == [""]
    bounds = output_bounds(ir.from_proto(portable), feeds, (SESSION, ONNXRUNTIME))
    for runnable in (model, fb.optimize(model)[0]):
        check_outputs(fb.Session(runnable).run(feeds), want, bounds, path.stem)
    plain = ort.InferenceSession(str(portable_path), providers=["CPUExecutionProvider"])
    check_outputs(dict(zip(names, plain.run(names, feeds))), want, bounds, f"{path.stem} portable")
    return portable


@pytest.mark.parametrize("case", sorted(CASES))
def test_contrib_op_runs_in_ort_and_lowers_to_standard_ops(case, tmp_path):
    path = tmp_path / f"{case}.onnx"
    onnx.save(CASES[case], path)
    _check_runs_and_lowers(path, tmp_path)


def test_contrib_op_without_lowering_is_refused_by_name_before_writing(tmp_path):
    """Inverse (com.microsoft) runs in the Session, but has no standard form here."""
    node = helper.make_node("Inverse", ["x"], ["y"], domain=MS, name="my_inverse")
    path = tmp_path / "inverse.onnx"
    onnx.save(_model(node, {"x": [2, 3, 3]}, {}), path)
    model = fb.load(path)
    x = _rand(2, 3, 3) + 3 * np.eye(3, dtype=np.float32)
    # The model is that one op: one ONNX Runtime session runs it, ONNX Runtime's own result.
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(fb.Session(model).run({"x": x})["y"], want[0])
    out = tmp_path / "portable.onnx"
    with pytest.raises(fb.UnsupportedOpError, match=r"'my_inverse'.*Inverse.*'com.microsoft'"):
        fb.save_onnx(model, out, portable=True)
    assert not out.exists()


def test_domain_no_backend_runs_is_refused_by_name(tmp_path):
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="my.domain", name="frob")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("my.domain", 1)],
        ir_version=8,
    )
    onnx.save(proto, tmp_path / "m.onnx")
    with pytest.raises(fb.ArgumentError, match=r"'frob' \(Frobnicate\).*'my.domain'"):
        fb.Session(fb.load(tmp_path / "m.onnx"))


def test_ort_optimizer_output_runs_and_exports_portable(tmp_path):
    """The real thing: a torch model (Conv1d + ReLU, a GRU, `(y @ b) * 0.5`) exported by the
    TorchScript exporter at opset 13, then saved by ONNX Runtime's offline optimizer at
    ORT_ENABLE_EXTENDED, which writes FusedConv and FusedMatMul."""
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 6, 3, padding=1)
            self.gru = torch.nn.GRU(6, 8, batch_first=True)
            self.b = torch.nn.Parameter(torch.randn(8, 5))

        def forward(self, x):
            y, _ = self.gru(torch.relu(self.conv(x)).transpose(1, 2))
            return (y @ self.b) * 0.5

    torch.manual_seed(0)
    original, optimized = tmp_path / "original.onnx", tmp_path / "optimized.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter says it is deprecated
        torch.onnx.export(
            Model().eval(),
            (torch.randn(2, 4, 7),),
            str(original),
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "N", 2: "T"}, "y": {0: "N", 1: "T"}},
            opset_version=13,
            dynamo=False,
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(original), options, providers=["CPUExecutionProvider"])
    written = {(n.domain, n.op_type) for n in onnx.load(str(optimized)).graph.node}
    assert {(MS, "FusedConv"), (MS, "FusedMatMul")} <= written
    x = _rand(3, 4, 9)
    want = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    model = fb.load(optimized)
    assert "FusionGRU" in {n.op_type for n in fb.optimize(model)[0].graph}
    bounds = output_bounds(model, {"x": x}, (SESSION, ONNXRUNTIME))
    assert_within(fb.Session(model).run({"x": x})["y"], want, bounds["y"], "optimized by ORT")
    portable = _check_runs_and_lowers(optimized, tmp_path)
    assert {"Conv", "Relu", "MatMul", "Mul", "GRU"} <= {n.op_type for n in portable.graph.node}
