"""Models below opset 17 keep their opset: they load unconverted, run in fb.Session equal to
ONNX Runtime on the original file (its partitions declare the model's opset imports), optimize,
and export portable at their own opset (onnx.checker's full check, plain ONNX Runtime equal to
the original). The builders write each standard op in its form at the target opset
(integrations/onnx/opset_forms.py), or refuse it naming the node, the op and the opset."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, assert_within, pool_bound
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from helpers.torch_fixtures import random_feeds
from onnx.reference import ReferenceEvaluator
from test_fixture_files import sizes
from test_onnx_lowering_ops import FLOAT, INT64, Runners, offsets_of, one_op_model

import fusebridge as fb
from fusebridge.graph.builder import OpBuilder
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_pool import POOLTYPES
from fusebridge.ops.crf import viterbi_graph as crf_decoding
from fusebridge.ops.lod import lod_to_padded, padded_to_lod
from fusebridge.ops.sequence import pool_graph as sequence_pool

OLD_OPSETS = [11, 12, 13, 14]


def _op_types(proto: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("opset", [*OLD_OPSETS, 17])
def test_lod_builders_are_valid_and_exact_at_the_opset(opset):
    """lod_to_padded / padded_to_lod (Unsqueeze, Squeeze, ReduceMax, Shape start/end,
    CastLike), sequence_pool (ReduceSum, ReduceMax with axes) and crf_decoding (Loop bodies)
    at `opset`: valid there (one_op_model runs onnx.checker's full check) and equal to NumPy
    and the float64 oracles."""
    lengths = [3, 0, 1, 5]
    offsets = offsets_of(lengths)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((int(offsets[-1]), 4)).astype(np.float32)
    inputs = [("x", FLOAT, ["words", "C"]), ("offsets", INT64, ["sentences_1"])]

    def round_trip(op, x, offsets):
        return padded_to_lod(op, lod_to_padded(op, x, offsets, "ntc"), offsets, "ntc")

    proto = one_op_model(round_trip, inputs, (FLOAT, ["words", "C"]), opset)
    assert proto.opset_import[0].version == opset
    np.testing.assert_array_equal(
        Runners(proto).run({"x": x, "offsets": offsets})["onnxruntime"], x
    )
    for pooltype in POOLTYPES:

        def pool(op, x, offsets, pooltype=pooltype):
            return sequence_pool(op, x, offsets, pooltype, 0.0)

        runners = Runners(one_op_model(pool, inputs, (FLOAT, ["sentences", "C"]), opset))
        with np.errstate(invalid="ignore", divide="ignore"):
            got = runners.run({"x": x, "offsets": offsets})
        want = reference.sequence_pool(x, offsets, pooltype, 0.0)  # float64
        bound = pool_bound(x, offsets, pooltype)
        for runtime, value in got.items():
            assert_within(value, want, bound, f"{pooltype} on {runtime}")
    crf_inputs = [
        ("emission", FLOAT, ["words", "tags"]),
        ("offsets", INT64, ["sentences_1"]),
        ("transition", FLOAT, ["tags_2", "tags"]),
    ]
    crf = Runners(one_op_model(crf_decoding, crf_inputs, (INT64, ["words", 1]), opset))
    emission = rng.integers(-5, 5, (int(offsets[-1]), 3)).astype(np.float32)
    transition = rng.integers(-5, 5, (5, 3)).astype(np.float32)
    feeds = {"emission": emission, "offsets": offsets, "transition": transition}
    want = reference.crf_decoding(emission, transition, offsets)
    for runtime, value in crf.run(feeds).items():
        np.testing.assert_array_equal(value, want, err_msg=runtime)


def test_builder_moves_axes_between_attribute_and_input():
    old, new = OpBuilder("n", opset=12), OpBuilder("n", opset=18)
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3]))
    old.Unsqueeze(x, old.ints([0], "axis0"))
    old.ReduceSum(x, old.ints([1], "axis1"), keepdims=0)
    new.ReduceMax(x, axes=[1], keepdims=0)
    assert [(n.op_type, len(n.inputs), dict(n.attributes)) for n in old.nodes] == [
        ("Unsqueeze", 1, {"axes": ir.AttrInt64s("axes", [0])}),
        (
            "ReduceSum",
            1,
            {"axes": ir.AttrInt64s("axes", [1]), "keepdims": ir.AttrInt64("keepdims", 0)},
        ),
    ]
    (reduce_max,) = new.nodes
    assert len(reduce_max.inputs) == 2 and "axes" not in reduce_max.attributes


def _gru_model(opset: int, layout: int) -> onnx.ModelProto:
    """A batch-first (layout 1) ONNX GRU written by OpBuilder at `opset`."""
    rng = np.random.default_rng(1)
    op = OpBuilder("gru", opset=opset)
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N", "T", 3]))
    h0 = ir.Value(name="h0", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N", 2, 4]))
    w = op.const(rng.standard_normal((2, 12, 3)).astype(np.float32), "W")
    r = op.const(rng.standard_normal((2, 12, 4)).astype(np.float32), "R")
    y, y_h = op.GRU(
        x, w, r, None, None, h0, _outputs=2, hidden_size=4, direction="bidirectional",
        layout=layout,
    )  # fmt: skip
    y.name, y_h.name = "y", "y_h"
    graph = ir.Graph(
        [x, h0], [y, y_h], nodes=op.nodes, initializers=op.initializers,
        opset_imports={"": opset}, name="gru",
    )  # fmt: skip
    proto = ir.to_proto(ir.Model(graph, ir_version=8))
    proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def test_batch_first_gru_below_opset_14_is_transposed():
    """GRU has a layout attribute from opset 14 on; below, Transposes around it: ONNX Runtime
    on the opset-13 form gives what onnx.reference gives on layout 1 at opset 14 (ONNX
    Runtime itself runs layout 0 only)."""
    old, new = _gru_model(13, 1), _gru_model(14, 1)
    assert "Transpose" in _op_types(old) and "Transpose" not in _op_types(new)
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal((2, 5, 3)).astype(np.float32),
        "h0": rng.standard_normal((2, 2, 4)).astype(np.float32),
    }
    got = ort.InferenceSession(old.SerializeToString()).run(["y", "y_h"], feeds)
    want = ReferenceEvaluator(new).run(["y", "y_h"], feeds)
    assert got[0].shape == (2, 5, 2, 4) and got[1].shape == (2, 2, 4)
    # onnx.reference computes in float32 numpy: two float32 implementations of one GRU.
    bounds = output_bounds(ir.from_proto(new), feeds, (ONNXRUNTIME, ONNXRUNTIME))
    check_outputs(dict(zip(["y", "y_h"], got)), dict(zip(["y", "y_h"], want)), bounds)


def test_op_without_a_form_at_the_opset_is_refused():
    op = OpBuilder("my_node", opset=10)
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    with pytest.raises(fb.UnsupportedOpError, match=r"node 'my_node'.*Range.*opset 10"):
        op.Range(x, x, x)
    unknown = ir.Value(name="like", shape=ir.Shape([2]))
    with pytest.raises(fb.UnsupportedOpError, match=r"node 'my_node'.*CastLike.*opset 10.*'like'"):
        op.CastLike(x, unknown)
    axes = OpBuilder("axes_node", opset=12)
    computed = ir.Value(name="computed_axes", type=ir.TensorType(ir.DataType.INT64))
    with pytest.raises(fb.UnsupportedOpError, match=r"axes_node.*Unsqueeze.*'computed_axes'"):
        axes.Unsqueeze(x, computed)
    softmax = OpBuilder("softmax_node", opset=12)
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3, 4]))
    with pytest.raises(fb.UnsupportedOpError, match=r"softmax_node.*Softmax over axis 1"):
        softmax.Softmax(y, axis=1)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name, opset -> the torch fixture exported by torch's TorchScript exporter at opset."""
    pytest.importorskip("torch")
    from helpers.torch_fixtures import export_fixture

    root = tmp_path_factory.mktemp("opsets")
    cache: dict[tuple[str, int], str] = {}

    def get(name: str, opset: int) -> str:
        if (name, opset) not in cache:
            folder = root / str(opset)
            folder.mkdir(exist_ok=True)
            cache[name, opset] = str(export_fixture(name, folder, opset))
        return cache[name, opset]

    return get


@pytest.mark.parametrize("opset", OLD_OPSETS)
@pytest.mark.parametrize(
    "name", ["torch_gru", "torch_bigru_2layer", "torch_linear_gru", "torch_attention_eval"]
)
def test_model_below_opset_17_keeps_its_opset(exported, tmp_path, name, opset):
    path = exported(name, opset)
    model = fb.load(path)
    assert model.opset_imports[""] == opset  # not converted
    oracle = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.get_outputs()]
    feeds = random_feeds(oracle, sizes(3, 5))
    want = oracle.run(None, feeds)
    optimized = fb.optimize(model)[0]
    if name != "torch_attention_eval":
        assert "FusionGRU" in {n.op_type for n in optimized.graph}
    want = dict(zip(names, want))
    bounds = output_bounds(model, feeds, (SESSION, ONNXRUNTIME))
    for runnable in (model, optimized):
        check_outputs(fb.Session(runnable).run(feeds), want, bounds, f"{name} opset {opset}")
    portable_path = str(tmp_path / "portable.onnx")
    fb.save_onnx(fb.optimize(model, "portable")[0], portable_path)
    portable = onnx.load(portable_path)
    onnx.checker.check_model(portable, full_check=True)
    assert {(o.domain, o.version) for o in portable.opset_import} == {("", opset)}
    plain = ort.InferenceSession(portable_path, providers=["CPUExecutionProvider"])
    portable_out = dict(zip(names, plain.run(names, feeds)))
    check_outputs(portable_out, want, bounds, f"{name} opset {opset}, portable")
