"""MXNet models end to end: the committed gluon exports load without mxnet, fuse and run; with
equal lengths they equal MXNet's own output (the oracle; mxnet-marked tests run in the MXNet
venv), and with unequal lengths MXNet run one sentence at a time and ONNX Runtime's GRU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import MXNET, ONNXRUNTIME, assert_within, padded_gru_bound
from helpers.graph_bounds import SESSION, output_bounds

import fusebridge as fb
from fusebridge import kernels
from fusebridge.kernels import reference

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mxnet"
NAMES = ["gru_tagger", "gru_tagger_fixed", "mlp_dropout", "attention"]


def _path(name: str) -> Path:
    return FIXTURES / f"{name}-symbol.json"


def _inputs(name: str, seed: int = 1, batch: int = 3, steps: int = 9) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if name.startswith("gru_tagger"):
        ids = rng.integers(0, 200, size=(batch, steps)).astype(np.float32)
        lengths = np.array([steps, *rng.integers(1, steps + 1, batch - 1)], np.float32)
        return [ids, lengths] if name == "gru_tagger" else [ids]
    if name == "mlp_dropout":
        return [rng.standard_normal((batch, 20)).astype(np.float32)]
    return [rng.standard_normal((batch, steps, 16)).astype(np.float32)]


def _run(model, inputs: list[np.ndarray], backend: str = "kernels") -> list[np.ndarray]:
    session = fb.Session(model, backend=backend)
    out = session.run(dict(zip(session.input_names, inputs)))
    return [out[name] for name in session.output_names]


def _bounds(model, inputs: list[np.ndarray], libs=(SESSION, MXNET)) -> list[np.ndarray]:
    """The model's output bounds on the inputs (tests/helpers/graph_bounds.py), in output order:
    ours and MXNet's (or `libs`') error bounds summed."""
    feeds = dict(zip([v.name for v in model.graph.inputs if not v.is_initializer()], inputs))
    return list(output_bounds(model, feeds, libs).values())


@pytest.mark.parametrize("name", NAMES)
def test_fixture_loads_without_mxnet_and_fuses(name):
    model = fb.load(_path(name))
    optimized, report = fb.optimize(model)
    ops = [n.op_type for n in optimized.graph]
    if name.startswith("gru_tagger"):
        assert ops.count("FusionGRU") == 2  # one per layer, both directions in one
        # Its inference dropout shares a mask over axes (1,), which the input's unknown rank
        # must fit: it stays in the graph, and the Session runs it as an Identity inside the
        # ONNX Runtime partition around it (runtime/rank_checks.py), not as a step of its own.
        assert ops.count("Dropout") == 1
        steps = [s.label for s in fb.Session(optimized)._program.steps]
        assert not any(label.startswith("Dropout") for label in steps), steps
    if name == "mlp_dropout":
        assert report.fired("inference_dropout") == 1
    inputs = _inputs(name)
    bounds = _bounds(model, inputs, (SESSION, SESSION))
    for ours, theirs, bound in zip(
        _run(optimized, inputs), _run(model, inputs, "reference"), bounds
    ):
        assert_within(ours, theirs, bound, name)


def test_unsupported_ops_are_listed_at_once(tmp_path):
    text = _path("mlp_dropout").read_text()
    text = text.replace('"op": "LeakyReLU"', '"op": "Deconvolution"').replace(
        '"op": "Activation"', '"op": "LRN"'
    )
    (tmp_path / "bad-symbol.json").write_text(text)
    with pytest.raises(fb.UnsupportedOpError, match="2 unsupported op type"):
        fb.load(tmp_path / "bad-symbol.json", params=FIXTURES / "mlp_dropout-0000.params")


def test_unequal_lengths_match_onnxruntime_gru():
    """The tagger's 2-layer bidirectional GRU, rebuilt as ONNX GRUs with sequence_lens from our
    canonical weights, run by ONNX Runtime: the oracle for unequal lengths."""
    model = fb.load(_path("gru_tagger"))
    grus = [n for n in model.graph if n.op_type == "FusionGRU"]
    ids, lengths = _inputs("gru_tagger", seed=4, batch=4)
    emb = next(v for v in model.graph.initializers.values() if v.name.endswith("embedding0_weight"))
    x = emb.const_value.numpy()[ids.astype(np.int64)].transpose(1, 0, 2)  # [T, N, E]
    for node in grus:
        wx, wh, b, bh = (node.inputs[i].const_value.numpy() for i in (2, 3, 4, 5))
        x = _onnx_gru(x, wx, wh, b, bh, lengths.astype(np.int32))
    ours = fb.Session(model).run(dict(zip(["data0", "data1"], (ids, lengths))))
    truncated, hidden = _hidden_before_dense(model, ids, lengths)
    (bound,) = _bounds(truncated, [ids, lengths], (SESSION, ONNXRUNTIME))
    assert_within(hidden, x, bound, "the last GRU's output")
    assert ours  # the whole model runs at these lengths too


def _onnx_gru(x, wx, wh, b, bh, lens) -> np.ndarray:
    d, oc = wh.shape[0], wh.shape[1]
    W = onnx.numpy_helper.from_array(wx.transpose(0, 2, 1).copy(), "W")
    R = onnx.numpy_helper.from_array(wh.transpose(0, 2, 1).copy(), "R")
    B = onnx.numpy_helper.from_array(np.concatenate([b, bh], axis=1), "B")
    node = onnx.helper.make_node(
        "GRU",
        ["X", "W", "R", "B", "L"],
        ["Y"],
        hidden_size=oc,
        linear_before_reset=1,
        direction="bidirectional" if d == 2 else "forward",
    )
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [
            onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, None),
            onnx.helper.make_tensor_value_info("L", onnx.TensorProto.INT32, None),
        ],
        [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
        [W, R, B],
    )
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    proto.ir_version = 8
    (y,) = ort.InferenceSession(proto.SerializeToString()).run(None, {"X": x, "L": lens})
    t, _, n, _ = y.shape
    return y.transpose(0, 2, 1, 3).reshape(t, n, d * oc)


def _hidden_before_dense(model, ids, lengths) -> tuple[ir.Model, np.ndarray]:
    """A copy of the model whose output is its last FusionGRU's, and that output."""
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    copy = ir.from_proto(ir.to_proto(model))
    last = [n for n in copy.graph if n.op_type == "FusionGRU"][-1]
    copy.graph.outputs[:] = [last.outputs[0]]
    RemoveUnusedNodesPass()(copy)
    return copy, fb.Session(copy).run({"data0": ids, "data1": lengths})[last.outputs[0].name]


# -- against MXNet itself (the MXNet venv) -----------------------------------------------------
@pytest.mark.mxnet
@pytest.mark.parametrize("name", NAMES)
def test_equal_lengths_match_mxnet(name):
    pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import input_names, run_mxnet

    prefix = FIXTURES / name
    inputs = _inputs(name)
    if name == "gru_tagger":
        inputs[1][:] = inputs[0].shape[1]  # every sentence full: MXNet's oneDNN GRU is right
    theirs = run_mxnet(prefix, dict(zip(input_names(prefix), inputs)))
    model = fb.load(_path(name))
    ours = _run(fb.optimize(model)[0], inputs)
    assert len(ours) == len(theirs)
    for o, t, bound in zip(ours, theirs, _bounds(model, inputs)):
        assert_within(o, t, bound, name)


@pytest.mark.mxnet
def test_unequal_lengths_match_mxnet_sentence_by_sentence():
    pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import run_mxnet_per_sentence

    ids, lengths = _inputs("gru_tagger", seed=7, batch=5)
    per_sentence = run_mxnet_per_sentence(FIXTURES / "gru_tagger", ids, lengths)
    model = fb.load(_path("gru_tagger"))
    ours = _run(fb.optimize(model)[0], [ids, lengths])[0]
    (bound,) = _bounds(model, [ids, lengths])
    for n, theirs in enumerate(per_sentence):
        steps = int(lengths[n])
        assert_within(ours[n, :steps], theirs[:steps], bound[n, :steps], f"sentence {n}")


@pytest.mark.mxnet
@pytest.mark.parametrize(
    ("build", "shape"),
    [
        pytest.param(
            lambda mx, x: mx.sym.Reshape(x, shape=(0, -1)),
            (2, 3, 4),
            id="mx.sym.Reshape(x, shape=(0, -1))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Reshape(x, shape=(-2, 1)),
            (2, 3, 4),
            id="mx.sym.Reshape(x, shape=(-2, 1))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Reshape(x, shape=(-3, 0)),
            (2, 3, 4),
            id="mx.sym.Reshape(x, shape=(-3, 0))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Reshape(x, shape=(-4, 1, -1, 0, 0)),
            (2, 3, 4),
            id="mx.sym.Reshape(x, shape=(-4, 1, -1, 0, 0))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Reshape(x, shape=(0, -4, -1, 2, 0)),
            (3, 4, 5),
            id="mx.sym.Reshape(x, shape=(0, -4, -1, 2, 0))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SwapAxis(x, dim1=0, dim2=2),
            (2, 3, 4, 5),
            id="mx.sym.SwapAxis(x, dim1=0, dim2=2)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SwapAxis(x, dim1=1, dim2=0),
            (2, 3),
            id="mx.sym.SwapAxis(x, dim1=1, dim2=0)",
        ),
        pytest.param(lambda mx, x: mx.sym.transpose(x), (2, 3, 4), id="mx.sym.transpose(x)"),
        pytest.param(
            lambda mx, x: mx.sym.transpose(x, axes=(1, 0, 2)),
            (2, 3, 4),
            id="mx.sym.transpose(x, axes=(1, 0, 2))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.expand_dims(x, axis=-1),
            (2, 3),
            id="mx.sym.expand_dims(x, axis=-1)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.slice_axis(x, axis=1, begin=1, end=None),
            (2, 3, 4),
            id="mx.sym.slice_axis(x, axis=1, begin=1, end=None)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.slice_axis(x, axis=-1, begin=0, end=2),
            (2, 3, 4),
            id="mx.sym.slice_axis(x, axis=-1, begin=0, end=2)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.batch_dot(x, x, transpose_b=True),
            (2, 3, 4),
            id="mx.sym.batch_dot(x, x, transpose_b=True)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.batch_dot(x, x, transpose_a=True),
            (2, 3, 4),
            id="mx.sym.batch_dot(x, x, transpose_a=True)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.dot(x, mx.sym.transpose(x)),
            (3, 4),
            id="mx.sym.dot(x, mx.sym.transpose(x))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.softmax(x, axis=1), (2, 3, 4), id="mx.sym.softmax(x, axis=1)"
        ),
        pytest.param(
            lambda mx, x: mx.sym.softmax(x, temperature=2.0),
            (2, 3),
            id="mx.sym.softmax(x, temperature=2.0)",
        ),
        pytest.param(lambda mx, x: mx.sym.log_softmax(x), (2, 3), id="mx.sym.log_softmax(x)"),
        pytest.param(
            lambda mx, x: mx.sym.LeakyReLU(x, act_type="leaky", slope=0.1),
            (2, 3),
            id="mx.sym.LeakyReLU(x, act_type='leaky', slope=0.1)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.LeakyReLU(x, act_type="elu", slope=0.3),
            (2, 3),
            id="mx.sym.LeakyReLU(x, act_type='elu', slope=0.3)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.LeakyReLU(x, act_type="selu"),
            (2, 3),
            id="mx.sym.LeakyReLU(x, act_type='selu')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.LeakyReLU(x, act_type="gelu"),
            (2, 3),
            id="mx.sym.LeakyReLU(x, act_type='gelu')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Activation(x, act_type="softrelu"),
            (2, 3),
            id="mx.sym.Activation(x, act_type='softrelu')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Activation(x, act_type="softsign"),
            (2, 3),
            id="mx.sym.Activation(x, act_type='softsign')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.broadcast_maximum(x, mx.sym.ones((1, 3))),
            (2, 3),
            id="mx.sym.broadcast_maximum(x, mx.sym.ones((1, 3)))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.elemwise_sub(x, x * 2), (2, 3), id="mx.sym.elemwise_sub(x, x * 2)"
        ),
        pytest.param(lambda mx, x: x / 3.0 - 1.5, (2, 3), id="x / 3.0 - 1.5"),
        pytest.param(
            lambda mx, x: 2.0 / (x * x + 1) + (1 - x), (2, 3), id="2.0 / (x * x + 1) + (1 - x)"
        ),
        pytest.param(
            lambda mx, x: mx.sym.Concat(x, x * 2, dim=2),
            (2, 3, 4),
            id="mx.sym.Concat(x, x * 2, dim=2)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SequenceMask(
                x, mx.sym.var("len"), use_sequence_length=True, value=-1
            ),
            (4, 3, 2),
            id="mx.sym.SequenceMask(x, mx.sym.var('len'), use_sequence_length=True, value=-1)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SequenceMask(
                x, mx.sym.var("len"), use_sequence_length=True, axis=1
            ),
            (3, 4, 2),
            id="mx.sym.SequenceMask(x, mx.sym.var('len'), use_sequence_length=True, axis=1)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SequenceLast(x, mx.sym.var("len"), use_sequence_length=True),
            (4, 3, 2),
            id="mx.sym.SequenceLast(x, mx.sym.var('len'), use_sequence_length=True)",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SequenceLast(
                x, mx.sym.var("len"), use_sequence_length=True, axis=1
            ),
            (3, 4, 2),
            id="mx.sym.SequenceLast(x, mx.sym.var('len'), use_sequence_length=True, axis=1)",
        ),
        pytest.param(lambda mx, x: mx.sym.SequenceLast(x), (4, 3, 2), id="mx.sym.SequenceLast(x)"),
        pytest.param(
            lambda mx, x: mx.sym.FullyConnected(x, num_hidden=5, name="fc"),
            (2, 3, 4),
            id="mx.sym.FullyConnected(x, num_hidden=5, name='fc')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.FullyConnected(
                x, num_hidden=5, flatten=False, no_bias=True, name="fc"
            ),
            (2, 3, 4),
            id="mx.sym.FullyConnected(x, num_hidden=5, flatten=False, no_bias=True, name='fc')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Embedding(x, input_dim=10, output_dim=3, name="emb"),
            (2, 3),
            id="mx.sym.Embedding(x, input_dim=10, output_dim=3, name='emb')",
        ),
        pytest.param(
            lambda mx, x: mx.sym.Dropout(x, p=0.4, axes=(1,)),
            (2, 3),
            id="mx.sym.Dropout(x, p=0.4, axes=(1,))",
        ),
        pytest.param(
            lambda mx, x: mx.sym.SoftmaxOutput(x, name="out"),
            (2, 3, 4),
            id="mx.sym.SoftmaxOutput(x, name='out')",
        ),
    ],
)
def test_op_matches_mxnet(request, tmp_path, build, shape):
    """One op at a time: saved by MXNet's own symbol API, read by fusebridge, run, compared."""
    mx = pytest.importorskip("mxnet")
    sym = build(mx, mx.sym.var("x"))
    text = request.node.callspec.id
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if "Embedding" in text:
        feeds["x"] = rng.integers(0, 10, shape).astype(np.float32)
    if "len" in sym.list_inputs():
        axis = 1 if "axis=1" in text else 0
        feeds["len"] = np.array([1, 3, 4][: shape[1 - axis]], np.float32)
    arg_shapes, _, _ = sym.infer_shape(**{k: v.shape for k, v in feeds.items()})
    params = {
        name: mx.nd.array(rng.standard_normal(s).astype(np.float32))
        for name, s in zip(sym.list_arguments(), arg_shapes)
        if name not in feeds and not name.endswith("label")
    }
    feeds_mx = dict(feeds)
    for name, s in zip(sym.list_arguments(), arg_shapes):
        if name.endswith("label"):  # SoftmaxOutput's, unused at inference
            feeds_mx[name] = np.zeros(s, np.float32)
    exe = sym.bind(
        mx.cpu(), {**{k: mx.nd.array(v) for k, v in feeds_mx.items()}, **params}, grad_req="null"
    )
    theirs = exe.forward(is_train=False)[0].asnumpy()
    sym.save(str(tmp_path / "op-symbol.json"))
    mx.nd.save(str(tmp_path / "op-0000.params"), {f"arg:{k}": v for k, v in params.items()})
    model = fb.load(tmp_path / "op-symbol.json")
    session = fb.Session(model)
    feeds = {k: v for k, v in feeds_mx.items() if k in session.input_names}
    ours = session.run(feeds)
    bound = output_bounds(model, feeds, (SESSION, MXNET))[session.output_names[0]]
    assert_within(ours[session.output_names[0]], theirs, bound)


def test_reference_gru_equals_kernels_on_padded_layout():
    """The oracle used above is independent of the kernels: a sanity check on one layer."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    wx, wh = rng.standard_normal((2, 3, 12)), rng.standard_normal((2, 4, 12))
    want, _ = reference.gru(
        x,
        wx,
        wh,
        seq_lens=[5, 2],
        layout="tnc",
        direction="bidirectional",
        linear_before_reset=True,
    )
    got = fb.kernels.fusion_gru(
        x,
        wx.astype(np.float32),
        wh.astype(np.float32),
        seq_lens=np.array([5, 2]),
        layout="tnc",
        direction="bidirectional",
        linear_before_reset=True,
    )
    bound, _ = padded_gru_bound(
        x, wx, wh, None, seq_lens=[5, 2], direction="bidirectional", linear_before_reset=True
    )
    assert_within(got, want, bound)


# -- back into MXNet: save_mxnet + the native ops ---------------------------------------------
def test_save_mxnet_writes_readable_files(tmp_path):
    model = fb.load(_path("gru_tagger"))
    symbol_path, params_path = fb.save_mxnet(model, tmp_path / "fused")
    text = symbol_path.read_text()
    assert "fusebridge_fusion_gru" in text and '"RNN"' not in text
    assert "fusebridge_dropout" in text
    from fusebridge.integrations.mxnet.params import read_params

    saved = read_params(params_path)
    for layer in (0, 1):  # each layer's canonical weights, packed as its op reads them
        inits = model.graph.initializers
        raw = [inits[f"gru_tagger_gru0_rnn0/l{layer}/{k}"] for k in ("wx", "wh", "b", "bh")]
        want = kernels.pack_gru_weights(*(v.const_value.numpy() for v in raw))
        for name in ("wx", "wh", "bias_x", "bias_hc"):
            got = saved[f"gru_tagger_gru0_rnn0/l{layer}/packed_{name}"]
            np.testing.assert_array_equal(got, getattr(want, name))
    assert not any("_i2h_" in name for name in saved)  # MXNet's per-gate weights are gone
    # Any model is written, up to the first node with no MXNet form, which is named: here
    # torch's GRU, whose final state (Y_last) the graph uses.
    onnx_gru = fb.load(FIXTURES.parents[0] / "onnx" / "torch_gru.onnx")
    why = r"ONNX fusebridge.FusionGRU node '/gru/GRU': its Y_last output is used"
    with pytest.raises(fb.UnsupportedOpError, match=why):
        fb.save_mxnet(onnx_gru, tmp_path / "x")
    assert not list(tmp_path.glob("x-*"))


def test_save_mxnet_writes_the_models_own_parameters_and_reads_no_file(tmp_path):
    """The parameters come from the model's initializers, under their names and as the model
    holds them (FullyConnected's weight transposed, written for a dot); a params path in the
    metadata, which a crafted model may carry, is not read."""
    from fusebridge.integrations.mxnet.params import read_params, write_params

    model = fb.load(_path("gru_tagger"))
    inits = model.graph.initializers
    names = {
        "embedding": "gru_tagger_embedding0_weight",
        "bias": "gru_tagger_dense0_bias",
        "wh": "gru_tagger_gru0_rnn0/l1/wh",  # written packed
    }
    changed = {}
    for key, name in names.items():
        changed[key] = inits[name].const_value.numpy() + 1
        inits[name].const_value = ir.tensor(changed[key], name=name)
    (fc,) = [n for n in model.graph if n.op_type == "MatMul"]
    weight_t = fc.inputs[1].name  # [in, out]: MXNet's weight [out, in] transposed
    changed["weight"] = inits[weight_t].const_value.numpy().T * 2
    inits[weight_t].const_value = ir.tensor(np.ascontiguousarray(changed["weight"].T))
    decoy = tmp_path / "decoy-0000.params"
    arrays = read_params(FIXTURES / "gru_tagger-0000.params")
    arrays = {n: np.full_like(a, 7) for n, a in arrays.items()} | {"secret": np.arange(3.0)}
    write_params(decoy, {n: ("arg", a) for n, a in arrays.items()})
    model.metadata_props["fusebridge.mxnet.params"] = str(decoy)  # as loads before this fix

    saved = read_params(fb.save_mxnet(model, tmp_path / "fused")[1])
    np.testing.assert_array_equal(saved[names["embedding"]], changed["embedding"])
    np.testing.assert_array_equal(saved[names["bias"]], changed["bias"])
    raw = [inits[names["wh"].replace("/wh", f"/{k}")] for k in ("wx", "wh", "b", "bh")]
    packed = kernels.pack_gru_weights(*(v.const_value.numpy() for v in raw))  # with changed wh
    np.testing.assert_array_equal(saved[names["wh"].replace("/wh", "/packed_wh")], packed.wh)
    np.testing.assert_array_equal(saved[weight_t], changed["weight"].T)
    for name, array in saved.items():  # every other array written is an initializer, as it is
        if "/packed_" not in name:
            np.testing.assert_array_equal(array, inits[name].const_value.numpy(), err_msg=name)
    assert not any(np.all(a == 7) for a in saved.values()) and "secret" not in saved
    # A parameter that a pass rewrote away is named, not taken from anywhere else.
    inits.pop(names["bias"])
    with pytest.raises(fb.UnsupportedOpError, match="input 'gru_tagger_dense0_bias'"):
        fb.save_mxnet(model, tmp_path / "again")


def test_save_mxnet_writes_the_parameters_as_the_model_holds_them(tmp_path):
    """FullyConnected's weight (kept transposed) and prelu's gamma (kept as [C, 1]) are written
    as the model holds them, under the initializers' names; the graph uses them as the IR
    does (dot, and prelu's slope broadcast as ONNX broadcasts it): MXNet runs it in
    test_mxnet_save.py."""
    import json

    from fusebridge.integrations.mxnet.params import read_params, write_params

    def var(name: str) -> dict:
        return {"op": "null", "name": name, "inputs": []}

    nodes = [var("data"), var("fc_weight"), var("fc_bias"), var("gamma")]
    nodes.append(
        {
            "op": "FullyConnected",
            "name": "fc",
            "attrs": {"num_hidden": "3"},
            "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
        }
    )
    nodes.append(
        {
            "op": "LeakyReLU",
            "name": "act",
            "attrs": {"act_type": "prelu"},
            "inputs": [[4, 0, 0], [3, 0, 0]],
        }
    )
    symbol = {"nodes": nodes, "arg_nodes": [0, 1, 2, 3], "heads": [[5, 0, 0]]}
    (tmp_path / "m-symbol.json").write_text(json.dumps(symbol))
    rng = np.random.default_rng(0)
    params = {"fc_weight": (3, 4), "fc_bias": (3,), "gamma": (3,)}
    params = {n: rng.standard_normal(shape).astype(np.float32) for n, shape in params.items()}
    write_params(tmp_path / "m-0000.params", {n: ("arg", a) for n, a in params.items()})

    model = fb.load(tmp_path / "m-symbol.json")
    saved = read_params(fb.save_mxnet(model, tmp_path / "out")[1])
    inits = {n: v.const_value.numpy() for n, v in model.graph.initializers.items()}
    assert saved.keys() == inits.keys() == {"fc/weight_t", "fc_bias", "act/gamma"}
    for name, array in inits.items():
        np.testing.assert_array_equal(saved[name], array, err_msg=name)
        assert saved[name].shape == array.shape
    np.testing.assert_array_equal(saved["fc/weight_t"], params["fc_weight"].T)
    np.testing.assert_array_equal(saved["act/gamma"], params["gamma"].reshape(3, 1))


def _saved_with_our_ops(
    tmp_path: Path, name: str, optimized: bool = False
) -> tuple[ir.Model, Path, Path]:
    """register() (our ops in the running MXNet), then the fixture as fb.load reads it (or as
    fb.optimize makes it) and the two files save_mxnet writes of it."""
    from fusebridge.integrations.mxnet import register

    register()
    model = fb.load(_path(name))
    if optimized:
        model = fb.optimize(model)[0]
    return (model, *fb.save_mxnet(model, tmp_path / name))


@pytest.mark.mxnet
@pytest.mark.parametrize("optimized", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_saved_model_runs_in_mxnet_with_our_ops(tmp_path, name, optimized):
    """The fused symbol in MXNet (our ops registered), written from the model as loaded or as
    optimized, equals fusebridge's Session, and for the tagger with unequal lengths also
    MXNet's original model run one sentence at a time."""
    mx = pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import input_names, run_mxnet_per_sentence

    model, symbol_path, params_path = _saved_with_our_ops(tmp_path, name, optimized)
    inputs = _inputs(name, seed=5)
    feeds = dict(zip(input_names(FIXTURES / name), inputs))
    sym = mx.sym.load(str(symbol_path))
    args = {k.split(":", 1)[1]: v for k, v in mx.nd.load(str(params_path)).items()}
    args.update({k: mx.nd.array(v) for k, v in feeds.items()})
    theirs = sym.bind(mx.cpu(), args, grad_req="null").forward(is_train=False)[0].asnumpy()
    ours = _run(model, inputs)[0]
    source = fb.load(_path(name))
    (bound,) = _bounds(source, inputs)[:1]  # our ops in MXNet, and MXNet's own around them
    assert_within(theirs, ours, bound, "saved with our ops")
    if name != "gru_tagger":  # the original graph in MXNet, where MXNet itself is right
        from helpers.mxnet_oracle import run_mxnet

        original = run_mxnet(FIXTURES / name, feeds)[0]
        assert_within(theirs, original, bound, "against the original in MXNet")
    else:
        ids, lengths = inputs
        for n, alone in enumerate(run_mxnet_per_sentence(FIXTURES / name, ids, lengths)):
            steps = int(lengths[n])
            assert_within(theirs[n, :steps], alone[:steps], bound[n, :steps], f"sentence {n}")


def _gluon_imports(tmp_path: Path, name: str) -> tuple[ir.Model, object]:
    """The model and its saved fused files loaded as MXNet users load models:
    SymbolBlock.imports (after register())."""
    mx = pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import input_names

    model, symbol_path, params_path = _saved_with_our_ops(tmp_path, name)
    names = input_names(FIXTURES / name)
    return model, mx.gluon.SymbolBlock.imports(str(symbol_path), names, str(params_path))


@pytest.mark.mxnet
@pytest.mark.parametrize("name", NAMES)
def test_saved_model_runs_through_gluon_symbol_block_imports(tmp_path, name):
    """SymbolBlock.imports + net(x), as parameters come (grad_req 'write') and with every
    grad_req 'null': equal to fusebridge's Session and, where MXNet itself is right (equal
    lengths), to the original model in MXNet."""
    mx = pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import input_names, run_mxnet

    model, net = _gluon_imports(tmp_path, name)
    inputs = _inputs(name, seed=6)
    theirs = net(*map(mx.nd.array, inputs)).asnumpy()
    (bound,) = _bounds(fb.load(_path(name)), inputs)[:1]
    assert_within(theirs, _run(model, inputs)[0], bound, "gluon import")
    if name != "gru_tagger":
        feeds = dict(zip(input_names(FIXTURES / name), inputs))
        assert_within(theirs, run_mxnet(FIXTURES / name, feeds)[0], bound, "original")
    net.collect_params().setattr("grad_req", "null")
    np.testing.assert_array_equal(net(*map(mx.nd.array, inputs)).asnumpy(), theirs)


@pytest.mark.mxnet
def test_gluon_backward_through_the_fused_gru_is_a_clear_error(tmp_path):
    """Recording works; only the backward, which needs the GRU's gradient, fails, and says why."""
    mx = pytest.importorskip("mxnet")
    model, net = _gluon_imports(tmp_path, "gru_tagger_fixed")
    (ids,) = _inputs("gru_tagger_fixed", seed=7)
    with mx.autograd.record():
        y = net(mx.nd.array(ids))
    (bound,) = _bounds(fb.load(_path("gru_tagger_fixed")), [ids])
    assert_within(y.asnumpy(), _run(model, [ids])[0], bound)
    with pytest.raises(mx.base.MXNetError, match="fusebridge_fusion_gru has no backward yet"):
        y.backward()
        mx.nd.waitall()


@pytest.mark.mxnet
def test_fully_connected_folds_into_the_gru_and_training_dropouts_are_recognised(tmp_path):
    """FullyConnected(flatten=False) feeding RNN(gru) folds into the FusionGRU (the rule shared
    with ONNX and Paddle); FullyConnected -> Dropout and softmax -> Dropout in mode 'always'
    come in as our training Dropout after MatMul/Add and Softmax."""
    mx = pytest.importorskip("mxnet")
    x = mx.sym.var("x")
    fc = mx.sym.FullyConnected(x, num_hidden=6, flatten=False, name="fc")
    rnn = mx.sym.RNN(
        fc,
        mx.sym.var("rnn_params"),
        mx.sym.zeros((2, 3, 4)),
        state_size=4,
        num_layers=1,
        mode="gru",
        bidirectional=True,
        name="rnn",
    )
    sym = mx.sym.Group(
        [
            rnn,
            mx.sym.Dropout(
                mx.sym.FullyConnected(x, num_hidden=3, name="fc2"), p=0.3, mode="always"
            ),
            mx.sym.Dropout(mx.sym.softmax(x), p=0.2, mode="always"),
        ]
    )
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((5, 3, 2)).astype(np.float32)}
    arg_shapes, _, _ = sym.infer_shape(x=(5, 3, 2))
    params = {
        n: mx.nd.array(rng.standard_normal(s).astype(np.float32) * 0.5)
        for n, s in zip(sym.list_arguments(), arg_shapes)
        if n != "x"
    }
    exe = sym.bind(mx.cpu(), {"x": mx.nd.array(feeds["x"]), **params}, grad_req="null")
    theirs = exe.forward(is_train=False)[0].asnumpy()
    sym.save(str(tmp_path / "m-symbol.json"))
    mx.nd.save(str(tmp_path / "m-0000.params"), {f"arg:{k}": v for k, v in params.items()})
    model = fb.load(tmp_path / "m-symbol.json")
    dropouts = [n for n in model.graph if n.op_type == "Dropout"]
    producers = {n.inputs[0].producer().op_type for n in dropouts}
    assert producers == {"Add", "Softmax"}
    assert all(fb.ops.schema("Dropout").attribute_values(n)["is_test"] == 0 for n in dropouts)
    # Only the GRU's output is compared: the 'always' dropouts need a key (explicit RNG).
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    model.graph.outputs[:] = model.graph.outputs[:1]
    RemoveUnusedNodesPass()(model)
    optimized, report = fb.optimize(model)
    assert report.fired("matmul_add_fusion_gru") == 1
    assert [n.op_type for n in optimized.graph if n.domain == fb.conventions.DOMAIN] == [
        "FusionGRU"
    ]
    assert "MatMul" not in {n.op_type for n in optimized.graph}
    ours = fb.Session(optimized).run(feeds)
    name = optimized.graph.outputs[0].name
    assert_within(ours[name], theirs, output_bounds(model, feeds, (SESSION, MXNET))[name])
