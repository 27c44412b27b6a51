"""The GRU fusions: structure (ops before/after), numerics (optimized == unoptimized on the
reference backend), refusals with their reasons, H0 kept, no shared tensor changed."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from helpers.graph_bounds import SESSION, check_outputs, output_bounds

import fusebridge as fb
from fusebridge import conventions, ops
from fusebridge.fuse_passes import Pipeline
from fusebridge.fuse_passes.dropout import InferenceDropout
from fusebridge.fuse_passes.gru import BiGRU, FcGRU

IC, OC = 6, 5
LENGTHS = [3, 0, 5, 1]


class Builder:
    """A small IR model: LoD input x (+ x.offsets), optional h0 input, initializers."""

    def __init__(self, seed: int = 0, h0: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        f32 = ir.TensorType(ir.DataType.FLOAT)
        self.x = ir.Value(name="x", type=f32, shape=ir.Shape([None, IC]))
        self.offsets = ir.Value(
            name="x.offsets", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([None])
        )
        self.inputs = [self.x, self.offsets]
        self.h0 = None
        if h0:
            self.h0 = ir.Value(name="h0", type=f32, shape=ir.Shape([None, OC]))
            self.inputs.append(self.h0)
        self.nodes, self.inits = [], []

    def const(self, shape, name):
        a = (self.rng.standard_normal(shape) * 0.4).astype(np.float32)
        t = ir.tensor(a, name=name)
        v = ir.Value(name=name, const_value=t, shape=ir.Shape(a.shape), type=ir.TensorType(t.dtype))
        self.inits.append(v)
        return v

    def add(self, op_type, inputs, attrs=None, domain="", name=None):
        if domain:
            n = ops.node(op_type, inputs, attrs)
        else:
            n = ir.node(op_type, inputs, attrs)
        n.outputs[0].name = name or f"{op_type.lower()}_{len(self.nodes)}"
        n.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        n.name = n.outputs[0].name
        self.nodes.append(n)
        return n.outputs[0]

    def gru(self, proj, direction="forward", origin_mode=0, bias=True, gate="sigmoid", h0=None):
        attrs = {"direction": direction, "origin_mode": origin_mode, "gate_activation": gate}
        b = self.const((1, 3 * OC), f"b{len(self.nodes)}") if bias else None
        wh = self.const((1, OC, 3 * OC), f"wh{len(self.nodes)}")
        return self.add("GRU", [proj, self.offsets, wh, b, None, h0], attrs, conventions.DOMAIN)

    def fc(self, x, bias=True, bias_first=False):
        y = self.add("MatMul", [x, self.const((IC, 3 * OC), f"w{len(self.nodes)}")])
        if bias:
            b = self.const((3 * OC,), f"fcb{len(self.nodes)}")
            y = self.add("Add", [b, y] if bias_first else [y, b])
        return y

    def model(self, *outputs):
        g = ir.Graph(
            self.inputs,
            list(outputs),
            nodes=self.nodes,
            initializers=self.inits,
            opset_imports=conventions.opset_imports(),
        )
        return ir.Model(g, ir_version=conventions.IR_VERSION)


def feeds(h0=False, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((sum(LENGTHS), IC)).astype(np.float32)
    f = {"x": fb.LoDTensor(x, lengths=LENGTHS)}
    if h0:
        f["h0"] = rng.standard_normal((len(LENGTHS), OC)).astype(np.float32)
    return f


def op_types(model):
    return sorted(n.op_type for n in model.graph)


def assert_same_outputs(model, optimized, h0=False):
    f = feeds(h0)
    want = fb.Session(model, backend="reference").run(f)
    bounds = output_bounds(model, f, (SESSION, SESSION))  # tests/helpers/graph_bounds.py
    for backend in ("reference", "kernels"):
        check_outputs(fb.Session(optimized, backend=backend).run(f), want, bounds, backend)


@pytest.mark.parametrize("origin_mode", [0, 1])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("fc_bias", [True, False])
@pytest.mark.parametrize("gru_bias", [True, False])
def test_fc_and_mul_gru_fuse_keeping_h0(origin_mode, with_h0, fc_bias, gru_bias):
    b = Builder(h0=with_h0)
    y = b.gru(b.fc(b.x, fc_bias), origin_mode=origin_mode, bias=gru_bias, h0=b.h0)
    model = b.model(y)
    optimized, report = fb.optimize(model)
    assert op_types(optimized) == ["FusionGRU"]
    assert report.fired("fc_gru" if fc_bias else "mul_gru") == 1
    assert report.fired("canonical_update_gate") == (origin_mode == 0)
    (node,) = optimized.graph
    assert ops.schema("FusionGRU").attribute_values(node)["origin_mode"] == 1
    assert (node.inputs[-1] is not None and node.inputs[-1].name == "h0") == with_h0
    assert_same_outputs(model, optimized, h0=with_h0)


def test_fc_gru_takes_the_bias_on_either_side_of_the_add():
    b = Builder()
    model = b.model(b.gru(b.fc(b.x, bias_first=True)))
    optimized, report = fb.optimize(model)
    assert op_types(optimized) == ["FusionGRU"] and report.fired("fc_gru") == 1
    assert_same_outputs(model, optimized)


def test_no_shared_tensor_changes():
    b = Builder()
    y = b.gru(b.fc(b.x), origin_mode=0)
    model = b.model(y)
    before = {name: v.const_value.numpy().copy() for name, v in model.graph.initializers.items()}
    fb.optimize(model)
    for name, v in model.graph.initializers.items():
        np.testing.assert_array_equal(v.const_value.numpy(), before[name])
    assert op_types(model) == ["Add", "GRU", "MatMul"]  # the input model is left as it was


def test_bigru_merges_forward_and_reverse_over_unequal_lengths():
    b = Builder(h0=True)
    fwd = b.gru(b.fc(b.x), "forward", h0=b.h0)
    rev = b.gru(b.fc(b.x), "reverse", h0=b.h0)
    model = b.model(b.add("Concat", [fwd, rev], {"axis": 1}))
    optimized, report = fb.optimize(model)
    assert op_types(optimized) == ["Concat", "FusionGRU", "Reshape", "Reshape"]
    assert report.fired("bigru") == 1 and report.fired("fc_gru") == 2
    gru = next(n for n in optimized.graph if n.op_type == "FusionGRU")
    assert gru.attributes["direction"].value == "bidirectional"
    assert_same_outputs(model, optimized, h0=True)


def test_stacked_bigru_layers():
    b = Builder()
    layer1 = b.add(
        "Concat", [b.gru(b.fc(b.x), "forward"), b.gru(b.fc(b.x), "reverse")], {"axis": 1}
    )
    w = lambda: b.const((2 * OC, 3 * OC), f"w2_{len(b.nodes)}")  # noqa: E731
    rev_in = b.add("MatMul", [layer1, w()])
    fwd_in = b.add("MatMul", [layer1, w()])
    layer2 = b.add("Concat", [b.gru(fwd_in, "forward"), b.gru(rev_in, "reverse")], {"axis": -1})
    model = b.model(layer2)
    optimized, report = fb.optimize(model)
    assert op_types(optimized) == ["FusionGRU", "FusionGRU"]
    assert report.fired("mul_gru") == 2 and report.fired("bigru") == 2
    assert_same_outputs(model, optimized)


def refusals(report, rule):
    return [why for _, why in report.refusals(rule)]


def test_refuses_when_the_fc_output_has_a_second_consumer():
    b = Builder()
    fc = b.fc(b.x)
    y = b.gru(fc)
    model = b.model(y, b.add("Relu", [fc], name="side"))
    optimized, report = fb.optimize(model)
    assert "GRU" in op_types(optimized) and report.fired("fc_gru") == 0
    (why,) = refusals(report, "fc_gru")
    users = f"(GRU {y.name!r}, Relu 'side')"
    assert why == f"the FC output (after the bias) {fc.name!r} has a second consumer {users}"
    assert_same_outputs(model, optimized)


def test_refuses_update_gate_negation_without_sigmoid():
    b = Builder()
    y = b.gru(b.fc(b.x), gate="tanh", origin_mode=0)
    model = b.model(y)
    optimized, report = fb.optimize(model)
    assert report.fired("fc_gru") == 1 and report.fired("canonical_update_gate") == 0
    (why,) = refusals(report, "canonical_update_gate")
    assert why.startswith("gate_activation is tanh: update-gate negation needs sigmoid")
    assert f"refused at {y.name!r}: {why}" in report.text()
    assert_same_outputs(model, optimized)


def test_bigru_refusals():
    b = Builder(h0=True)
    rev = b.gru(b.fc(b.x), "reverse", h0=b.h0)
    fwd = b.gru(b.fc(b.x), "forward")
    model = b.model(b.add("Concat", [rev, fwd], {"axis": 1}))
    _, report = fb.optimize(model)
    assert refusals(report, "bigru") == ["the concat puts the reverse direction first"]

    b = Builder(h0=True)
    fwd = b.gru(b.fc(b.x), "forward", h0=b.h0)
    rev = b.gru(b.fc(b.x), "reverse")
    model = b.model(b.add("Concat", [fwd, rev], {"axis": 1}))
    optimized, report = fb.optimize(model)
    assert refusals(report, "bigru") == ["only one direction has an H0"]
    assert_same_outputs(model, optimized, h0=True)


def test_inference_dropout_scales_or_vanishes():
    for mode, scale in (("upscale_in_train", 1.0), ("downgrade_in_infer", 0.75)):
        b = Builder()
        attrs = {"p": 0.25, "mode": mode, "is_test": 1}
        y = b.gru(b.add("Dropout", [b.fc(b.x)], attrs, conventions.DOMAIN))
        model = b.model(y)
        optimized, report = fb.optimize(model)
        assert report.fired("inference_dropout") == 1
        # The identity vanishes, so fc+gru fuses; the scale stays and blocks it (it is needed).
        expected = ["FusionGRU"] if scale == 1.0 else ["Add", "GRU", "MatMul", "Mul"]
        assert op_types(optimized) == expected
        assert report.fired("fc_gru") == (scale == 1.0)
        assert_same_outputs(model, optimized)


def test_training_dropout_is_reported_not_removed():
    b = Builder()
    seed = b.const((), "seed")
    seed.const_value = ir.tensor(np.array(7, np.int64), name="seed")
    seed.type = ir.TensorType(ir.DataType.INT64)
    y = b.add("Dropout", [b.x, seed], {"p": 0.25, "is_test": 0}, conventions.DOMAIN)
    _, report = fb.optimize(b.model(y))
    assert refusals(report, "inference_dropout") == ["is_test = 0: a training dropout stays"]


def test_pipeline_order_is_checked_when_built():
    with pytest.raises(fb.ArgumentError, match="bigru must run after fc_gru"):
        Pipeline("bad", [BiGRU, FcGRU])
    with pytest.raises(fb.ArgumentError, match="fc_gru must run after inference_dropout"):
        Pipeline("bad", [FcGRU, InferenceDropout])
    with pytest.raises(fb.ArgumentError, match="pipeline must be one of"):
        fb.optimize(Builder().model(), "fastest")
