"""ONNX import: GRU (every attribute we take), the MatMul(+Add) fold into it, Dropout; each
imported model runs equal to ONNX Runtime on the original file (the oracle), on our kernels
and on the reference backend."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, assert_outputs_within
from helpers.onnx_models import gru_model
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb
from fusebridge import kernels
from fusebridge.integrations.onnx.load import LOAD_REPORT, import_onnx
from fusebridge.ops.schema import output_type

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "onnx"


def _import(proto: onnx.ModelProto) -> ir.Model:
    return import_onnx(ir.from_proto(proto))


def _feeds(proto: onnx.ModelProto, lens: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    layout = next(n for n in proto.graph.node if n.op_type == "GRU").attribute
    batch_major = any(a.name == "layout" and a.i == 1 for a in layout)
    t, n = max(lens), len(lens)
    feeds = {}
    for vi in proto.graph.input:
        dims = [d.dim_value or {"T": t, "N": n}[d.dim_param] for d in vi.type.tensor_type.shape.dim]
        if vi.name == "seq_lens":
            feeds[vi.name] = np.array(lens, np.int32)
        else:
            feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    assert batch_major == (proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N")
    return feeds


def _ort(proto: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _assert_close(model: ir.Model, feeds: dict, ours: dict, theirs: dict) -> None:
    """Within both runtimes' error bounds of the model on these feeds
    (tests/helpers/graph_bounds.py); they grow with the state where relu or identity gates let
    it grow."""
    assert_outputs_within(model, feeds, ours, theirs, (SESSION, ONNXRUNTIME))


def _run_both(model: ir.Model, feeds: dict) -> list[dict]:
    return [fb.Session(model, backend=b).run(feeds) for b in ("kernels", "reference")]


CASES = list(
    itertools.product(["forward", "reverse", "bidirectional"], [0, 1], [True, False], [True, False])
)


@pytest.mark.parametrize(("direction", "lbr", "with_lens", "with_h0"), CASES)
def test_gru_imports_as_fusion_gru_and_matches_onnxruntime(direction, lbr, with_lens, with_h0):
    proto = gru_model(
        direction=direction, linear_before_reset=lbr, with_lens=with_lens, with_h0=with_h0
    )
    lens = [3, 1, 5, 5] if with_lens else [4, 4, 4]
    feeds = _feeds(proto, lens)
    model = _import(proto)
    assert [n.op_type for n in model.graph if n.domain == fb.conventions.DOMAIN] == ["FusionGRU"]
    optimized, _ = fb.optimize(model)
    for m in (model, optimized):
        for ours in _run_both(m, feeds):
            _assert_close(model, feeds, ours, _ort(proto, feeds))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batch_major_layout_matches_the_time_major_twin(direction):
    """ONNX Runtime refuses layout 1, so the oracle is the same GRU with layout 0."""
    batch_major = gru_model(direction=direction, layout=1, with_h0=True)
    time_major = gru_model(direction=direction, layout=0, with_h0=True)
    feeds = _feeds(batch_major, [2, 5, 4])
    theirs = _ort(
        time_major,
        {
            "X": feeds["X"].transpose(1, 0, 2),
            "seq_lens": feeds["seq_lens"],
            "h0": feeds["h0"].transpose(1, 0, 2),
        },
    )
    model = _import(batch_major)
    want = {"Y": theirs["Y"].transpose(2, 0, 1, 3), "Y_h": theirs["Y_h"].transpose(1, 0, 2)}
    for ours in _run_both(model, feeds):
        _assert_close(model, feeds, ours, want)


@pytest.mark.parametrize(
    "activations", [["Relu", "Affine"], ["Sigmoid", "Affine"], ["Relu", "Tanh"]]
)
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_gru_activations(activations, direction):
    proto = gru_model(direction=direction, activations=activations, linear_before_reset=0)
    feeds = _feeds(proto, [3, 1, 5])
    model = _import(proto)
    _assert_close(model, feeds, fb.Session(model).run(feeds), _ort(proto, feeds))


@pytest.mark.parametrize("projection", ["matmul", "matmul_add", "add_matmul"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("y_h", [False, True])
def test_projection_folds_into_the_gru(projection, direction, y_h):
    proto = gru_model(direction=direction, projection=projection, y_h=y_h, with_h0=True)
    feeds = _feeds(proto, [3, 1, 5])
    optimized, report = fb.optimize(_import(proto))
    rule = "matmul_fusion_gru" if projection == "matmul" else "matmul_add_fusion_gru"
    assert report.fired(rule) == 1
    assert not {"MatMul", "Add"} & {n.op_type for n in optimized.graph}
    for ours in _run_both(optimized, feeds):
        _assert_close(optimized, feeds, ours, _ort(proto, feeds))


def test_projection_fold_refusals():
    # 40 inputs projected to 8, then 3 * 6 gate columns: folding would cost 40 * 18 per word
    # instead of 40 * 8 + 8 * 18.
    wide = gru_model(projection="matmul", y_h=False, input_size=40, projection_size=8)
    optimized, report = fb.optimize(_import(wide))
    assert "folding would raise the projection from 464 to 720" in report.text()
    assert "MatMul" in {n.op_type for n in optimized.graph}
    feeds = _feeds(wide, [3, 2])
    _assert_close(optimized, feeds, fb.Session(optimized).run(feeds), _ort(wide, feeds))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"clip": 3.0}, "clip is not supported"),
        ({"activations": ["Sigmoid", "Tanh", "Relu", "Tanh"]}, "one (gate, candidate) pair"),
        ({"activations": ["HardSigmoid", "Tanh"]}, "['HardSigmoid'] not supported"),
        ({"activations": ["Sigmoid", "Affine"]}, "Affine is supported as the identity only"),
    ],
)
def test_unsupported_gru_attributes_stay_onnx_gru_and_are_named(change, message):
    """A GRU our op does not take stays ONNX's GRU, run by ONNX Runtime: the model loads and
    runs equal to ONNX Runtime on the original, and the report names the node and why."""
    direction = "bidirectional" if len(change.get("activations", [])) == 4 else "forward"
    proto = gru_model(direction=direction)
    gru = next(n for n in proto.graph.node if n.op_type == "GRU")
    gru.name = "the_gru"
    for key, value in change.items():
        gru.attribute.append(helper.make_attribute(key, value))
    model = _import(proto)
    assert [(n.domain, n.op_type) for n in model.graph] == [("", "GRU")]
    (refusal,) = model.meta[LOAD_REPORT].refusals("import_gru")
    assert refusal[0] == "the_gru"
    assert message in refusal[1] and "stays (run by ONNX Runtime)" in refusal[1]
    feeds = _feeds(proto, [3, 1, 5])
    _assert_same_as_onnxruntime(fb.Session(model).run(feeds), _ort(proto, feeds))


def _assert_same_as_onnxruntime(ours: dict, theirs: dict) -> None:
    """A model without a node of ours runs as one ONNX Runtime session with ONNX Runtime's
    defaults (runtime/session.py): the oracle's own computation, bit for bit."""
    assert ours.keys() == theirs.keys()
    for name, want in theirs.items():
        np.testing.assert_array_equal(ours[name], want, err_msg=name)


def test_computed_gru_weights_stay_onnx_gru_and_are_named():
    proto = gru_model()
    w = next(i for i in proto.graph.initializer if i.name == "W")
    proto.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, w.dims))
    proto.graph.initializer.remove(w)
    model = _import(proto)
    assert [n.op_type for n in model.graph] == ["GRU"]
    ((node, why),) = model.meta[LOAD_REPORT].refusals("import_gru")
    assert node == "" and "input W 'W' is computed in the graph" in why
    feeds = {**_feeds(proto, [3, 1]), "W": numpy_helper.to_array(w)}
    _assert_same_as_onnxruntime(fb.Session(model).run(feeds), _ort(proto, feeds))


def _dropout_model(ratio=None, training=None, seed=None, mask=False) -> onnx.ModelProto:
    inits, inputs = [], ["x", "", ""]
    if ratio is not None:
        inits.append(numpy_helper.from_array(np.array(ratio, np.float32), "ratio"))
        inputs[1] = "ratio"
    if training is not None:
        inits.append(numpy_helper.from_array(np.array(training), "training"))
        inputs[2] = "training"
    attrs = {} if seed is None else {"seed": seed}
    outs = ["y", "mask"] if mask else ["y"]
    node = helper.make_node("Dropout", inputs, outs, name="drop", **attrs)
    relu = helper.make_node("Relu", ["y"], ["z"])
    outputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["a", "b"])]
    if mask:
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, ["a", "b"]))
    graph = helper.make_graph(
        [node, relu],
        "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])],
        outputs,
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _dropout_attrs(model: ir.Model) -> dict:
    (node,) = [n for n in model.graph if n.op_type == "Dropout"]
    assert node.domain == fb.conventions.DOMAIN
    attrs = fb.ops.schema("Dropout").attribute_values(node)
    seed = node.inputs[1].const_value.numpy().tolist() if len(node.inputs) > 1 else None
    return {"p": attrs["p"], "is_test": attrs["is_test"], "seed": seed}


def test_dropout_import():
    x = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    inference = _dropout_model(ratio=0.3)
    assert _dropout_attrs(_import(inference)) == {
        "p": pytest.approx(0.3),
        "is_test": 1,
        "seed": None,
    }
    np.testing.assert_array_equal(
        fb.Session(_import(inference)).run({"x": x})["z"], _ort(inference, {"x": x})["z"]
    )
    assert _dropout_attrs(_import(_dropout_model())) == {"p": 0.5, "is_test": 1, "seed": None}
    training = _dropout_model(ratio=0.25, training=True, seed=7.0)
    assert _dropout_attrs(_import(training)) == {"p": 0.25, "is_test": 0, "seed": [7]}
    # The bits are Philox (seed, offset 0), not ONNX Runtime's generator.
    want = np.maximum(kernels.dropout(x, 0.25, seed=7), 0)
    np.testing.assert_array_equal(fb.Session(_import(training)).run({"x": x})["z"], want)
    unseeded = _import(_dropout_model(ratio=0.25, training=True))
    assert _dropout_attrs(unseeded) == {"p": 0.25, "is_test": 0, "seed": None}


def test_dropout_with_a_used_mask_stays_onnx():
    proto = _dropout_model(ratio=0.3, mask=True)
    model = _import(proto)
    assert [(n.domain, n.op_type) for n in model.graph] == [("", "Dropout"), ("", "Relu")]
    x = np.ones((3, 4), np.float32)
    ours = fb.Session(model).run({"x": x})
    theirs = _ort(proto, {"x": x})
    for name in ("z", "mask"):
        np.testing.assert_array_equal(ours[name], theirs[name])


def test_fusebridge_domain_file_round_trip(tmp_path):
    proto = gru_model(direction="bidirectional", projection="matmul_add", y_h=False)
    optimized, _ = fb.optimize(_import(proto))
    path = tmp_path / "fused.onnx"
    fb.save_onnx(optimized, path)
    saved = onnx.load(path)
    onnx.checker.check_model(saved, full_check=True)
    assert {o.domain: o.version for o in saved.opset_import} == {"": 17, "fusebridge": 1}
    feeds = _feeds(proto, [4, 2, 1])
    loaded = fb.load(path)
    for ours in _run_both(loaded, feeds):
        _assert_close(loaded, feeds, ours, _ort(proto, feeds))


def test_a_malformed_gru_raises_even_when_it_would_be_refused():
    proto = gru_model()
    gru = next(n for n in proto.graph.node if n.op_type == "GRU")
    gru.attribute.append(helper.make_attribute("clip", 3.0))
    gru.attribute.append(helper.make_attribute("activations", ["Sigmoid"]))
    with pytest.raises(fb.ModelFormatError, match="1 names, expected 2"):
        _import(proto)


def test_a_gru_whose_input_type_is_unknown_imports_without_a_warning(caplog):
    """X comes from an op of a domain ONNX's shape inference does not know: our shape function
    gets no input type, sets what it still knows (nothing for X's element type) and fails
    nothing, so onnx_ir infers the other values instead of giving up with a warning."""
    proto = gru_model()
    gru = next(n for n in proto.graph.node if n.op_type == "GRU")
    gru.input[0] = "x_unknown"
    proto.graph.node.insert(0, helper.make_node("Mystery", ["X"], ["x_unknown"], domain="example"))
    proto.graph.node.append(helper.make_node("Shape", ["Y"], ["y_shape"]))
    proto.graph.output.append(helper.make_tensor_value_info("y_shape", TensorProto.INT64, None))
    proto.opset_import.append(helper.make_opsetid("example", 1))
    with caplog.at_level(logging.WARNING):
        model = _import(proto)
    assert [r.getMessage() for r in caplog.records] == []
    assert model.meta[LOAD_REPORT].fired("import_gru") == 1
    values = {v.name: v for n in model.graph for v in n.outputs}
    assert values["x_unknown"].type is None
    assert values["y_shape"].type == ir.TensorType(ir.DataType.INT64)  # inferred, as before


@pytest.mark.parametrize(
    ("first", "elem", "rank", "want"),
    [
        (None, "X", "X", None),
        (None, "int64", 1, (TensorProto.INT64, 1)),
        (None, "uint8", "X", (TensorProto.UINT8, None)),
        (helper.make_tensor_type_proto(TensorProto.FLOAT, None), "X", "X+1", (1, None)),
        (helper.make_tensor_type_proto(TensorProto.FLOAT, ["a", 3]), "X", "X-1", (1, 1)),
        (helper.make_tensor_type_proto(TensorProto.UNDEFINED, ["a"]), "X", "X", None),
        (onnx.TypeProto(), "X", 3, None),  # not a tensor
    ],
)
def test_shape_function_output_types(first, elem, rank, want):
    got = output_type(first, elem, rank)
    if want is None:
        assert got is None
        return
    tensor = got.tensor_type
    assert tensor.elem_type == want[0]
    assert (len(tensor.shape.dim) if tensor.HasField("shape") else None) == want[1]


@pytest.mark.parametrize("path", sorted(FIXTURE_DIR.glob("*.onnx")), ids=lambda p: p.stem)
def test_committed_fixtures_load_without_a_warning(path, caplog, capfd):
    capfd.readouterr()
    with caplog.at_level(logging.WARNING):
        model = fb.load(path)
    assert [r.getMessage() for r in caplog.records] == []
    assert "Traceback" not in capfd.readouterr().err
    report = model.meta[LOAD_REPORT]
    assert report.refusals("import_gru") == ()
    assert report.fired("import_gru") == sum(n.op_type == "GRU" for n in onnx.load(path).graph.node)
