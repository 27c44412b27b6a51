"""Two model families exported by gluon's HybridBlock.export (tests/fixtures/mxnet, written by
`python -m fusebridge.models.mxnet_models`): a DeepSpeech2-style speech model (Conv2D,
BatchNorm, clip, a 2-layer bidirectional GRU, Dense, softmax) and a CRNN-style recogniser
(Conv2D/relu/MaxPool2D to height 1, a bidirectional LSTM over the columns, Dense, argmax).

Without mxnet (the main venv): each loads, fuses its recurrences (each GRU layer one FusionGRU,
the LSTM ONNX's LSTM), runs, and equals the float64 evaluation of the graph within our bound
(tests/helpers/graph_bounds.py); its portable export runs in plain ONNX Runtime. With mxnet
(the MXNet venv): each equals MXNet's own output within both's bounds, at several input sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import MXNET, ONNXRUNTIME
from helpers.graph_bounds import SESSION, GraphBounds, check_outputs, output_bounds
from helpers.python_under_test import run_python

import fusebridge as fb
from fusebridge.models import mxnet_models

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mxnet"
NAMES = ["deepspeech", "crnn"]
# (batch, spectrogram frames or image columns): the committed sample's, odd frame counts
# (the stride-2 convolution's padding decides the last frame) and a lone input.
SIZES = [(2, 12), (3, 15), (1, 7)]


def _path(name: str) -> Path:
    return FIXTURES / f"{name}-symbol.json"


def _feeds(name: str, batch: int, size: int, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if name == "deepspeech":
        shape = (batch, 1, size, mxnet_models.SPEECH_FREQ)
        return {"data": rng.standard_normal(shape).astype(np.float32)}
    shape = (batch, 1, mxnet_models.LINE_HEIGHT, size)
    return {"data": rng.uniform(0, 1, shape).astype(np.float32)}


def test_gluon_writes_the_recurrences_as_the_converter_reads_them():
    """What the converter meets: one RNN node each, gluon's zero begin states (_zeros of batch
    0: no initial state), state_outputs set and only output 0 read."""
    for name, mode, layers, states in (("deepspeech", "gru", "2", 1), ("crnn", "lstm", "1", 2)):
        nodes = json.loads(_path(name).read_text())["nodes"]
        (rnn,) = [n for n in nodes if n["op"] == "RNN"]
        attrs = rnn["attrs"]
        assert (attrs["mode"], attrs["num_layers"], attrs["bidirectional"]) == (
            mode,
            layers,
            "True",
        )
        assert attrs["state_outputs"] == "True"
        zeros = [nodes[i]["op"] for i, _, _ in rnn["inputs"][2:]]
        assert zeros == ["_zeros"] * states, name


def test_families_load_and_run_without_mxnet():
    code = (
        "import sys; sys.modules['mxnet'] = None\n"
        "import numpy as np, fusebridge as fb\n"
        "for path, height, width in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):\n"
        "    session = fb.Session(fb.optimize(fb.load(path))[0])\n"
        "    session.run({'data': np.ones((1, 1, int(height), int(width)), np.float32)})\n"
        "print(sorted(m for m, v in sys.modules.items() if m.startswith('mxnet') and v))\n"
    )
    images = {"deepspeech": (12, mxnet_models.SPEECH_FREQ), "crnn": (mxnet_models.LINE_HEIGHT, 12)}
    done = run_python(code, *(str(a) for name in NAMES for a in (_path(name), *images[name])))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", NAMES)
def test_recurrences_fuse(name):
    """Each GRU layer is one FusionGRU (two stacked bidirectional layers); the bidirectional
    LSTM is ONNX's LSTM, one node, which ONNX Runtime runs."""
    optimized, _ = fb.optimize(fb.load(_path(name)))
    ops = [n.op_type for n in optimized.graph]
    op_type = {"deepspeech": "FusionGRU", "crnn": "LSTM"}[name]
    assert ops.count(op_type) == {"deepspeech": 2, "crnn": 1}[name], ops
    assert "FusionGRU" not in ops if name == "crnn" else "LSTM" not in ops
    assert "GRU" not in ops and "RNN" not in ops


@pytest.mark.parametrize(("batch", "size"), SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_session_equals_the_float64_graph(name, batch, size):
    """As loaded and optimized, within our bound of the graph evaluated in float64 (the
    recurrences by graph_bounds' own, the other ops by onnx.reference); the speech model's
    rows are distributions, the recogniser's indices characters."""
    feeds = _feeds(name, batch, size)
    model = fb.load(_path(name))
    exact = GraphBounds(model, SESSION).bounds(feeds)
    want = {k: v for k, (v, _) in exact.items()}
    bounds = {k: b for k, (_, b) in exact.items()}
    for label, graph in (("as loaded", model), ("optimized", fb.optimize(model)[0])):
        got = fb.Session(graph).run(feeds)
        check_outputs(got, want, bounds, f"{name} {label}")
    (out,) = got.values()
    steps = -(-size // 2)  # the stride-2 convolution's, the first pooling's
    if name == "deepspeech":
        assert out.shape == (steps, batch, mxnet_models.CHARS)
        np.testing.assert_allclose(out.sum(-1), 1, rtol=1e-5)
    else:
        assert out.shape == (size // 2, batch) and out.dtype == np.float32
        assert set(np.unique(out)) <= set(range(mxnet_models.CHARS))


@pytest.mark.parametrize("name", NAMES)
def test_portable_export_runs_in_plain_onnxruntime(name, tmp_path):
    feeds = _feeds(name, 2, 14)
    model = fb.load(_path(name))
    want = fb.Session(fb.optimize(model)[0]).run(feeds)
    path = tmp_path / "portable.onnx"
    portable = fb.optimize(fb.load(_path(name)), "portable")[0]
    portable.graph.inputs[0].shape = ir.Shape(["N", 1, "H", "W"])  # an ONNX file needs a rank
    fb.save_onnx(portable, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = dict(zip(want, session.run(None, feeds)))
    check_outputs(got, want, output_bounds(model, feeds, (SESSION, ONNXRUNTIME)), name)


# -- against MXNet itself (the MXNet venv) -----------------------------------------------------
@pytest.mark.mxnet
@pytest.mark.parametrize(("batch", "size"), SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_session_equals_mxnet(name, batch, size):
    pytest.importorskip("mxnet")
    from helpers.mxnet_oracle import run_mxnet

    feeds = _feeds(name, batch, size, seed=4)
    (want,) = run_mxnet(FIXTURES / name, feeds)
    model = fb.load(_path(name))
    bounds = output_bounds(model, feeds, (SESSION, MXNET))
    (output,) = bounds
    for label, graph in (("as loaded", model), ("optimized", fb.optimize(model)[0])):
        got = fb.Session(graph).run(feeds)
        check_outputs(got, {output: want}, bounds, f"{name} {label}")
        assert got[output].dtype == want.dtype
