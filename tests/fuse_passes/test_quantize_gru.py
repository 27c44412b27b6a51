"""optimize(precision=...): quantize_gru rewrites GRU and FusionGRU nodes with constant weights
into QuantizedFusionGRU (weights quantized once); a Session runs them on the quantized kernel
(bit for bit the NumPy reference of its arithmetic, the reference backend), the file keeps them
quantized, refusals say why, the portable export refuses with the reason."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx_ir as ir
import pytest

import fusebridge as fb
from fusebridge import conventions, ops
from fusebridge.kernels.qgru_weights import quantize_gru_weights

IC, OC = 7, 18
LENGTHS = [4, 0, 6, 1, 3]


def _const(rng, shape, name, scale=0.4):
    a = (rng.standard_normal(shape) * scale).astype(np.float32)
    t = ir.tensor(a, name=name)
    return ir.Value(name=name, const_value=t, shape=ir.Shape(a.shape), type=ir.TensorType(t.dtype))


def gru_model(seed=0, *, computed_wh=False, last=False, plain_gru=False, h0=False, **attrs):
    """x (LoD) -> FusionGRU (bidirectional unless attrs say otherwise; or Paddle's GRU,
    without Wx) -> y [, y_last]; h0: an input h0 [D, N, OC]."""
    rng = np.random.default_rng(seed)
    f32, i64 = ir.TensorType(ir.DataType.FLOAT), ir.TensorType(ir.DataType.INT64)
    width = 3 * OC if plain_gru else IC
    x = ir.Value(name="x", type=f32, shape=ir.Shape([None, width]))
    offsets = ir.Value(name="x.offsets", type=i64, shape=ir.Shape([None]))
    attrs = {"direction": "forward" if plain_gru else "bidirectional", **attrs}
    d = 2 if attrs["direction"] == "bidirectional" else 1
    inputs = [x, offsets]
    if h0:
        inputs.append(ir.Value(name="h0", type=f32, shape=ir.Shape([d, None, OC])))
    inits = [_const(rng, (d, OC, 3 * OC), "wh"), _const(rng, (d, 3 * OC), "b")]
    nodes = []
    wh = inits[0]
    if computed_wh:
        neg = ir.node("Neg", [wh])
        neg.outputs[0].name = "wh_neg"
        nodes.append(neg)
        wh = neg.outputs[0]
    h0_input = inputs[2] if h0 else None
    if plain_gru:
        node = ops.node(
            "GRU", [x, offsets, wh, inits[1], None, h0_input], attrs, num_outputs=1 + last
        )
    else:
        inits.append(_const(rng, (d, IC, 3 * OC), "wx"))
        node = ops.node(
            "FusionGRU", [x, offsets, inits[2], wh, inits[1], None, h0_input], attrs,
            num_outputs=1 + last,
        )  # fmt: skip
    node.name = "gru"
    for i, out in enumerate(node.outputs):
        out.name = ["y", "y_last"][i]
        out.type = f32
    nodes.append(node)
    g = ir.Graph(
        inputs, list(node.outputs), nodes=nodes, initializers=inits,
        opset_imports=conventions.opset_imports(), name="gru_model",
    )  # fmt: skip
    return ir.Model(g, ir_version=conventions.IR_VERSION)


def feeds(width=IC, seed=1, h0=0):
    """x (LoD); with h0 = D, also h0 [D, N, OC]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((sum(LENGTHS), width)).astype(np.float32)
    f = {"x": fb.LoDTensor(x, lengths=LENGTHS)}
    if h0:
        f["h0"] = rng.standard_normal((h0, len(LENGTHS), OC)).astype(np.float32) * 0.5
    return f


def same_bits(a, b):
    a, b = (np.asarray(getattr(v, "data", v)) for v in (a, b))
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("precision", ["int8", "bf16"])
@pytest.mark.parametrize("plain_gru", [False, True])
def test_quantized_gru_runs_as_its_reference_and_survives_a_file(precision, plain_gru, tmp_path):
    model = gru_model(last=True, plain_gru=plain_gru)
    quantized, report = fb.optimize(model, precision=precision)
    assert report.fired(f"quantize_gru_{precision}") == 1
    (node,) = quantized.graph
    assert node.op_type == "QuantizedFusionGRU" and node.name == "gru"
    d = ops.op("QuantizedFusionGRU").inputs(node)
    want = ir.DataType.INT8 if precision == "int8" else ir.DataType.BFLOAT16
    assert d["Wh"].const_value.dtype == want
    assert (d["Wh_scale"] is not None) == (precision == "int8")
    # the stored values are what quantize_gru_weights gives the float weights
    wh = model.graph.initializers["wh"].const_value.numpy()
    q = quantize_gru_weights(None, wh, precision=precision)
    np.testing.assert_array_equal(d["Wh"].const_value.numpy(), q.wh)

    f = feeds(3 * OC if plain_gru else IC)
    got = fb.Session(quantized).run(f)
    oracle = fb.Session(quantized, backend="reference").run(f)
    for name in ("y", "y_last"):
        same_bits(got[name], oracle[name])
    path = tmp_path / "q.onnx"
    fb.save_onnx(quantized, path)
    reloaded = fb.load(path)
    assert [n.op_type for n in reloaded.graph] == ["QuantizedFusionGRU"]
    again = fb.Session(reloaded).run(f)
    for name in ("y", "y_last"):
        same_bits(again[name], got[name])
    # near the float GRU: int8 within a few quanta, bf16 within a few 2**-8
    floats = fb.Session(model).run(f)
    err = np.abs(np.asarray(got["y"].data) - np.asarray(floats["y"].data)).max()
    assert 0 < err < (0.05 if precision == "int8" else 0.02)


def test_the_quantized_gru_is_never_a_placement_candidate():
    quantized, _ = fb.optimize(gru_model(), precision="int8")
    session = fb.Session(quantized, placement="onnxruntime")
    assert session.placement.candidates == []
    fb.Session(quantized).run(feeds())


def test_float32_is_the_default_and_changes_nothing():
    model = gru_model()
    plain, report = fb.optimize(model)
    assert [n.op_type for n in plain.graph] == ["FusionGRU"]
    assert not any(p.name.startswith("quantize_gru") for p in report.passes)


def test_computed_weights_are_refused_with_the_reason():
    quantized, report = fb.optimize(gru_model(computed_wh=True), precision="int8")
    assert sorted(n.op_type for n in quantized.graph) == ["FusionGRU", "Neg"]
    assert report.refusals("quantize_gru_int8") == (("y", "Wh 'wh_neg' is not a constant"),)


def test_bad_precisions_and_the_portable_export_say_why(tmp_path):
    model = gru_model()
    with pytest.raises(fb.ArgumentError, match="precision must be one of"):
        fb.optimize(model, precision="int4")
    with pytest.raises(fb.ArgumentError, match="no quantized GRU"):
        fb.optimize(model, "portable", precision="int8")
    quantized, _ = fb.optimize(model, precision="bf16")
    with pytest.raises(fb.UnsupportedOpError, match="bf16 GRU has no standard ONNX form"):
        fb.save_onnx(quantized, tmp_path / "p.onnx", portable=True)


PORTABLE_CASES = [
    {"plain_gru": False},
    {"plain_gru": True},
    {"direction": "reverse", "linear_before_reset": 1, "h0": True},
    {"direction": "bidirectional", "origin_mode": 0, "h0": True},
    {"direction": "forward", "activation": "relu", "gate_activation": "sigmoid"},
    {"direction": "bidirectional", "activation": "identity", "gate_activation": "tanh",
     "linear_before_reset": 1},
]  # fmt: skip


@pytest.mark.parametrize("case", PORTABLE_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_the_int8_portable_export_gives_the_sessions_bits_in_plain_onnxruntime(case, tmp_path):
    """Every float operation of the kernel is one ONNX op in its order (activations as the
    kernel's polynomials), the int8 sums are exact (MatMulInteger): plain ONNX Runtime, at
    every graph optimization level, gives the Session's bits."""
    ort = pytest.importorskip("onnxruntime")
    model = gru_model(last=True, **case)
    quantized, _ = fb.optimize(model, precision="int8")
    path = tmp_path / "portable.onnx"
    fb.save_onnx(quantized, path, portable=True)
    d = (
        2
        if case.get("direction", "forward" if case.get("plain_gru") else "bidirectional")
        == ("bidirectional")
        else 1
    )
    f = feeds(3 * OC if case.get("plain_gru") else IC, h0=d if case.get("h0") else 0)
    want = fb.Session(quantized).run(f)
    plain = {"x": np.asarray(f["x"].data), "x.offsets": np.asarray(f["x"].offsets)}
    if "h0" in f:
        plain["h0"] = f["h0"]
    for level in (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    ):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        y, y_last = session.run(["y", "y_last"], plain)
        same_bits(y, want["y"])
        same_bits(y_last, want["y_last"])


def test_a_file_with_mismatched_quantized_weights_is_refused(tmp_path):
    quantized, _ = fb.optimize(gru_model(), precision="int8")
    (node,) = quantized.graph
    scale = ops.op("QuantizedFusionGRU").input(node, "Wh_scale")
    scale.const_value = ir.tensor(np.ones(5, np.float32), name=scale.name)
    with pytest.raises(fb.ModelFormatError, match=r"int8 Wh needs Wh_scale float32 \[2, 54\]"):
        fb.Session(quantized)
    quantized, _ = fb.optimize(gru_model(), precision="bf16")
    (node,) = quantized.graph
    bias = ops.op("QuantizedFusionGRU").input(node, "B")
    bias.const_value = ir.tensor(np.ones((2, 7), np.float32), name=bias.name)
    with pytest.raises(fb.ModelFormatError, match=r"B \[2, 7\], expected \[2, 54\]"):
        fb.Session(quantized)


def test_the_command_line_quantizes(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "q.onnx"
    fb.save_onnx(gru_model(), src)
    run = subprocess.run(
        [sys.executable, "-m", "fusebridge.cli", "optimize", str(src), "-o", str(out),
         "--precision", "int8", "--explain"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "quantize_gru_int8      fired 1" in run.stdout
    assert [n.op_type for n in fb.load(out).graph] == ["QuantizedFusionGRU"]
