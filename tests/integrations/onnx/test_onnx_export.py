"""ONNX export of the Paddle example models: the portable file (standard ops only: the
`portable` pipeline) in plain ONNX Runtime and in onnx.reference, and the fusebridge-domain file
through fb.Session, all equal to Paddle's Executor (the oracle; skipped without paddle) and to
the unfused model; save_onnx(portable=True) lowers without fusing."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, PADDLE, Activations, assert_within
from helpers.graph_bounds import SESSION, output_bounds
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.op_gru import GRU as ReferenceGRU

import fusebridge as fb
from fusebridge.models import assets

MODELS = ["tagger", "sentiment"]


@functools.cache
def _files(name: str, root: str) -> tuple[str, str]:
    model = fb.load(assets.path(name))
    portable_path, fused_path = f"{root}/{name}-portable.onnx", f"{root}/{name}-fused.onnx"
    fb.save_onnx(fb.optimize(model, "portable")[0], portable_path)
    fb.save_onnx(fb.optimize(model)[0], fused_path)
    return portable_path, fused_path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("onnx_export"))
    return lambda name: _files(name, root)


def _batch(n: int, seed: int, empty: bool = False):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, n).tolist()
    if empty:
        lengths[n // 2] = 0
    return rng.integers(0, 1000, (sum(lengths), 1)).astype(np.int64), lengths


def _onnx_feeds(ids, lengths) -> dict[str, np.ndarray]:
    return {
        "words": ids,
        "words.offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    }


def _plain_ort(path: str, feeds: dict) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _flat(outputs: dict) -> dict[str, np.ndarray]:
    """Session outputs as the file's graph outputs: a LoDTensor is data + offsets."""
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, fb.LoDTensor):
            flat[name], flat[name + ".offsets"] = value.data, value.offsets
        else:
            flat[name] = value
    return flat


def _assert_equal(
    ours: dict, theirs: dict, name: str, ids, lengths, where: str = "", oracle=ONNXRUNTIME
) -> None:
    """Tags (integers) equal; probabilities within the error bounds of model `name` (tests/
    graph_bounds.py) on the batch of ours and the oracle's implementation."""
    assert set(ours) == set(theirs)
    floats = [out for out, want in theirs.items() if want.dtype.kind == "f"]
    bounds = _bounds(name, ids.tobytes(), tuple(lengths), oracle) if floats else {}
    for out, want in theirs.items():
        if out in floats:
            assert_within(ours[out], want, bounds[out], f"{name} {where} {out}")
        else:
            np.testing.assert_array_equal(ours[out], want, err_msg=out)


@functools.cache
def _bounds(name: str, ids: bytes, lengths: tuple[int, ...], oracle: Activations) -> dict:
    """The bounds of model `name` (ours and the oracle's) on a batch, computed once."""
    words = np.frombuffer(ids, np.int64).reshape(-1, 1)
    feeds = {"words": fb.LoDTensor(words, lengths=list(lengths))}
    return output_bounds(fb.load(assets.path(name)), feeds, (SESSION, oracle))


@pytest.mark.parametrize("name", MODELS)
def test_files_are_valid_onnx_for_our_onnxruntime(files, name):
    for path in files(name):
        proto = onnx.load(path)
        onnx.checker.check_model(proto, full_check=True)
        assert proto.ir_version <= 10  # ONNX Runtime 1.31 refuses newer ones
        assert [i.name for i in proto.graph.input] == ["words", "words.offsets"]
    portable_proto = onnx.load(files(name)[0])
    assert {o.domain for o in portable_proto.opset_import} == {""}
    assert {n.domain for n in portable_proto.graph.node} == {""}
    ops = [n.op_type for n in portable_proto.graph.node]
    assert ops.count("GRU") == (2 if name == "tagger" else 1)
    assert ("Loop" in ops) == (name == "tagger")  # the Viterbi decoding


def test_stacked_gru_reorders_cancel():
    """Between the tagger's two bidirectional layers the padded output goes straight on."""
    model, report = fb.optimize(fb.load(assets.path("tagger")), "portable")
    assert (report.fired("to_padded_recurrences"), report.fired("cancel_reorders")) == (2, 1)
    first, second = [n for n in model.graph if n.op_type == "GRU"]
    reshaped = second.inputs[0].producer()
    assert reshaped.op_type == "Reshape"
    assert reshaped.inputs[0].producer().inputs[0].producer() is first
    bidirectional = [n.attributes.get_string("direction") for n in (first, second)]
    assert bidirectional == ["bidirectional", "bidirectional"]


def test_save_onnx_portable_lowers_without_fusing(tmp_path):
    """save_onnx(portable=True) runs the `lowering` pipeline, never the fusions: the unfused
    tagger's four GRU ops stay four ONNX GRUs (the `portable` pipeline makes two bidirectional
    ones), the model passed in is left as it was, and the file computes what the model does."""
    model = fb.load(assets.path("tagger"))
    before = [n.op_type for n in model.graph]
    path = tmp_path / "unfused-portable.onnx"
    fb.save_onnx(model, path, portable=True)
    assert [n.op_type for n in model.graph] == before and before.count("GRU") == 4
    proto = onnx.load(path)
    assert {n.domain for n in proto.graph.node} == {""}
    assert [n.op_type for n in proto.graph.node].count("GRU") == 4
    ids, lengths = _batch(7, seed=3, empty=True)
    want = _flat(fb.Session(model).run({"words": fb.LoDTensor(ids, lengths=lengths)}))
    _assert_equal(_plain_ort(str(path), _onnx_feeds(ids, lengths)), want, "tagger", ids, lengths)


@pytest.mark.parametrize("name", MODELS)
def test_both_files_match_the_unfused_model(files, name):
    """With an empty sentence (Paddle itself cannot run one) and single sentences."""
    unfused = fb.Session(fb.load(assets.path(name)))
    portable_path, fused_path = files(name)
    fused = fb.Session(fused_path)  # a path: fb.load reads it
    for n, empty in ((1, False), (7, True), (16, False)):
        ids, lengths = _batch(n, seed=n, empty=empty)
        want = _flat(unfused.run({"words": fb.LoDTensor(ids, lengths=lengths)}))
        portable = _plain_ort(portable_path, _onnx_feeds(ids, lengths))
        _assert_equal(portable, want, name, ids, lengths, "portable")
        ours = _flat(fused.run({"words": fb.LoDTensor(ids, lengths=lengths)}))
        _assert_equal(ours, want, name, ids, lengths, "fused")


@pytest.mark.paddle
@pytest.mark.parametrize("name", MODELS)
def test_both_files_match_paddle_executor(files, name):
    pytest.importorskip("paddle")
    from fusebridge.bench.paddle_runtime import ExecutorRunner

    runner = ExecutorRunner(assets.path(name))
    portable_path, fused_path = files(name)
    fused = fb.Session(fb.load(fused_path))
    for n in (1, 5, 16, 64):
        ids, lengths = _batch(n, seed=10 + n)
        theirs = runner.run({"words": (ids, lengths)})
        ours_portable = _plain_ort(portable_path, _onnx_feeds(ids, lengths))
        ours_fused = _flat(fused.run({"words": fb.LoDTensor(ids, lengths=lengths)}))
        for ours in (ours_portable, ours_fused):
            mine = {k: ours[k] for k in theirs}
            _assert_equal(mine, theirs, name, ids, lengths, "vs Paddle", PADDLE)


class GRU(ReferenceGRU):
    """onnx.reference's GRU ignores sequence_lens (it runs every sequence over all T steps, so a
    reverse direction would start in the padding). This runs onnx.reference's own GRU once per
    sequence on its real steps, which is what the ONNX spec's sequence_lens means. (new_ops
    replaces an op by class name, hence the name.)"""

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, **kwargs):
        if sequence_lens is None:
            return super()._run(X, W, R, B, None, initial_h, **kwargs)
        d, n, hidden = R.shape[0], X.shape[1], R.shape[-1]
        h0 = np.zeros((d, n, hidden), X.dtype) if initial_h is None else initial_h
        y = np.zeros((X.shape[0], d, n, hidden), X.dtype)
        y_h = np.array(h0)
        for i, steps in enumerate(np.asarray(sequence_lens)):
            if steps == 0:
                continue
            one = super()._run(X[:steps, i : i + 1], W, R, B, None, h0[:, i : i + 1], **kwargs)
            y[:steps, :, i] = one[0][:, :, 0]
            if len(one) > 1:
                y_h[:, i] = one[1][:, 0]
        return (y, y_h)[: self.n_outputs]


@pytest.mark.parametrize("name", MODELS)
def test_portable_file_in_onnx_reference(files, name):
    unfused = fb.Session(fb.load(assets.path(name)))
    evaluator = ReferenceEvaluator(files(name)[0], new_ops=[GRU])
    ids, lengths = _batch(6, seed=3, empty=True)
    want = _flat(unfused.run({"words": fb.LoDTensor(ids, lengths=lengths)}))
    got = evaluator.run(None, _onnx_feeds(ids, lengths))
    names = [o.name for o in onnx.load(files(name)[0]).graph.output]
    _assert_equal(dict(zip(names, got)), want, name, ids, lengths, "onnx.reference")


@pytest.mark.parametrize("name", MODELS)
def test_fused_file_on_the_reference_backend(files, name):
    unfused = fb.Session(fb.load(assets.path(name)))
    reference = fb.Session(fb.load(files(name)[1]), backend="reference")
    ids, lengths = _batch(5, seed=4, empty=True)
    feeds = {"words": fb.LoDTensor(ids, lengths=lengths)}
    _assert_equal(_flat(reference.run(feeds)), _flat(unfused.run(feeds)), name, ids, lengths)


def _one_gru_model(op_type: str = "FusionGRU", **attrs) -> ir.Model:
    """x [words, 4] + offsets -> FusionGRU (hidden 3) -> y; or x [words, 9] (projected already)
    -> GRU -> y."""
    rng = np.random.default_rng(0)
    features = 4 if op_type == "FusionGRU" else 9
    x = ir.val("x", ir.DataType.FLOAT, ir.Shape(["words", features]))
    offsets = ir.val("x.offsets", ir.DataType.INT64, ir.Shape(["n1"]))
    shapes = (("wx", (1, 4, 9)), ("wh", (1, 3, 9)), ("b", (1, 9)))
    weights = [
        ir.Value(name=n, const_value=ir.tensor(rng.standard_normal(s).astype(np.float32), name=n))
        for n, s in shapes
        if op_type == "FusionGRU" or n != "wx"
    ]
    node = fb.ops.node(op_type, [x, offsets, *weights], attrs, name="the_gru")
    node.outputs[0].name = "y"
    node.outputs[0].dtype = ir.DataType.FLOAT
    graph = ir.Graph(
        [x, offsets],
        [node.outputs[0]],
        nodes=[node],
        initializers=weights,
        opset_imports={"": 17, fb.conventions.DOMAIN: 1},
        name="one_gru",
    )
    return ir.Model(graph, ir_version=10)


@pytest.mark.parametrize(
    ("op_type", "attrs", "message"),
    [
        (
            "FusionGRU",
            {"origin_mode": 0, "gate_activation": "relu"},
            "origin_mode 0 with gate_activation relu cannot be written as ONNX GRU",
        ),
        ("FusionGRU", {"activation": "identity", "origin_mode": 1}, None),
        ("FusionGRU", {"origin_mode": 0, "direction": "reverse"}, None),
        ("FusionGRU", {"linear_before_reset": 1, "activation": "relu"}, None),
        # Paddle's gru on a computed projection: ONNX GRU with an identity W
        ("GRU", {"origin_mode": 0, "direction": "reverse"}, None),
    ],
)
def test_portable_gru_variants(tmp_path, op_type, attrs, message):
    model = _one_gru_model(op_type, **attrs)
    path = tmp_path / "gru.onnx"
    if message:
        with pytest.raises(fb.UnsupportedOpError, match=f"{op_type} node 'the_gru'") as info:
            fb.save_onnx(model, path, portable=True)
        assert message in str(info.value)
        return
    fb.save_onnx(model, path, portable=True)
    assert {n.op_type for n in onnx.load(path).graph.node} & {"GRU", "FusionGRU"} == {"GRU"}
    features = model.graph.inputs[0].shape[1]
    ids = np.random.default_rng(1).standard_normal((9, features)).astype(np.float32)
    feeds = {"x": fb.LoDTensor(ids, lengths=[4, 0, 5])}
    want = fb.Session(model).run(feeds)["y"]
    got = _plain_ort(str(path), {"x": ids, "x.offsets": np.array([0, 4, 4, 9], np.int64)})["y"]
    assert_within(got, want.data, output_bounds(model, feeds, (SESSION, ONNXRUNTIME))["y"])


def test_training_dropout_is_refused_by_the_portable_export(tmp_path):
    x = ir.val("x", ir.DataType.FLOAT, ir.Shape(["a"]))
    seed = ir.val("seed", ir.DataType.INT64, ir.Shape([1]))
    node = fb.ops.node("Dropout", [x, seed], {"p": 0.3}, name="drop")
    node.outputs[0].name, node.outputs[0].dtype = "y", ir.DataType.FLOAT
    graph = ir.Graph([x, seed], node.outputs, nodes=[node], opset_imports={"": 17}, name="d")
    with pytest.raises(fb.UnsupportedOpError, match="Dropout node 'drop': a training dropout"):
        fb.save_onnx(ir.Model(graph, ir_version=10), tmp_path / "d.onnx", portable=True)


def test_mxnet_models_save_as_onnx_once_their_inputs_have_a_rank(tmp_path):
    """MXNet symbols declare no input shapes; ONNX files need a rank on every graph input and
    output. Without one save_onnx says so (naming them), with one the file runs as the model."""
    from pathlib import Path

    from fusebridge.models.mxnet_models import sample_inputs

    fixtures = Path(__file__).parents[2] / "fixtures" / "mxnet"
    model, _ = fb.optimize(fb.load(fixtures / "mlp_dropout-symbol.json"))
    with pytest.raises(fb.ArgumentError, match=r"\['data', .*\] have no shape, not even a rank"):
        fb.save_onnx(model, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    model.graph.inputs[0].shape = ir.Shape(["N", 20])
    fb.save_onnx(model, tmp_path / "m.onnx")
    (x,) = sample_inputs("mlp_dropout")
    got = fb.Session(tmp_path / "m.onnx").run({"data": x})
    want = fb.Session(model).run({"data": x})
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
