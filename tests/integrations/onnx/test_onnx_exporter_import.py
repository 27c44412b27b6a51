"""What today's exporters write loads as shipped: torch's legacy exporter with a GRU output
nothing reads (Y and Y_h keep their own values, types and names), torch 2.13's default
exporter (the GRU's weights computed by Slice/Concat of initializers, folded at load), and
recurrent ops we do not fuse (LSTM, RNN) left to ONNX Runtime. Each runs equal to ONNX Runtime
on the original file, loads without a shape inference warning, and exports portable."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, assert_within
from helpers.graph_bounds import SESSION, output_bounds

import fusebridge as fb
from fusebridge.integrations.onnx.load import LOAD_REPORT

torch = pytest.importorskip("torch")
nn = torch.nn


def _ort(path, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _assert_close(model, feeds: dict, ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    """Within ours and ONNX Runtime's error bounds of the model (tests/helpers/graph_bounds.py)."""
    assert len(ours) == len(theirs)
    bounds = list(output_bounds(model, feeds, (SESSION, ONNXRUNTIME)).values())
    for k, (got, want) in enumerate(zip(ours, theirs)):
        assert_within(got, want, bounds[k], f"output {k}")


def _load_quietly(path, caplog, capfd) -> ir.Model:
    """fusebridge.load with no warning logged and nothing on stderr (onnx_ir logs a failed
    shape inference as a warning with its traceback)."""
    capfd.readouterr()
    caplog.clear()  # what the exporter logged
    with caplog.at_level(logging.WARNING):
        model = fb.load(path)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "Traceback" not in capfd.readouterr().err
    return model


def _run(model, path, feeds: dict) -> None:
    """Ours (as loaded) against ONNX Runtime on the original file, output by output."""
    names = [o.name for o in ort.InferenceSession(str(path)).get_outputs()]
    ours = fb.Session(model).run(feeds)
    _assert_close(model, feeds, [ours[n] for n in names], _ort(path, feeds))


def _check_types(model, tmp_path, path, feeds: dict) -> None:
    """The loaded model passes ONNX shape inference (our ops' schemas included); its portable
    export passes strict shape inference and runs equal to the original on plain ORT."""
    onnx.shape_inference.infer_shapes(ir.to_proto(model), check_type=True, strict_mode=True)
    portable = tmp_path / "portable.onnx"
    fb.save_onnx(model, portable, portable=True)
    onnx.shape_inference.infer_shapes(onnx.load(portable), check_type=True, strict_mode=True)
    _assert_close(model, feeds, _ort(portable, feeds), _ort(path, feeds))


class _GruOneOutput(nn.Module):
    def __init__(self, which: str) -> None:
        super().__init__()
        self.gru = nn.GRU(5, 6, bidirectional=True)
        self.which = which

    def forward(self, x):
        y, h = self.gru(x)
        return torch.relu(y) if self.which == "y" else h * 2


def _legacy_export(module: nn.Module, x, path, value_info: bool) -> None:
    torch.manual_seed(0)
    torch.onnx.export(
        module.eval(),
        (x,),
        str(path),
        dynamo=False,
        opset_version=13,
        input_names=["x"],
        dynamic_axes={"x": {0: "seq", 1: "batch"}},
    )
    if value_info:  # as paddle2onnx and older torch write them
        onnx.save(onnx.shape_inference.infer_shapes(onnx.load(path)), path)


@pytest.mark.parametrize("value_info", [True, False])
@pytest.mark.parametrize("which", ["y", "h"])
def test_gru_with_an_unused_output_keeps_each_output_its_own(
    tmp_path, which, value_info, caplog, capfd
):
    """Y read and Y_h declared but unread (and the reverse): each keeps its value."""
    torch.manual_seed(0)
    path = tmp_path / f"gru_{which}.onnx"
    _legacy_export(_GruOneOutput(which), torch.randn(4, 2, 5), path, value_info)
    (gru,) = [n for n in onnx.load(path).graph.node if n.op_type == "GRU"]
    assert len(gru.output) == 2  # both declared, one read
    if value_info:
        assert {v.name for v in onnx.load(path).graph.value_info} >= set(gru.output)
    model = _load_quietly(path, caplog, capfd)
    assert [n.op_type for n in model.graph if n.domain == "fusebridge"] == ["FusionGRU"]
    assert model.meta[LOAD_REPORT].fired("import_gru") == 1
    feeds = {"x": np.random.default_rng(1).standard_normal((7, 3, 5)).astype(np.float32)}
    _run(model, path, feeds)
    _check_types(model, tmp_path, path, feeds)


class _Dynamo(nn.Module):
    """Big enough that torch's own optimizer leaves the gate reordering of W and R computed
    (its fold limit is 8192 elements)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        if kind == "plain":
            self.gru = nn.GRU(64, 64)
        else:
            self.linear = nn.Linear(16, 64)
            self.gru = nn.GRU(64, 64, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        if self.kind == "plain":
            return self.gru(x)[0]
        return self.gru(self.linear(x))[0]


def _computed_gru_weights(path) -> int:
    """How many of the file's GRU inputs W, R, B are computed by nodes (not initializers)."""
    graph = onnx.load(path).graph
    inits = {i.name for i in graph.initializer}
    return sum(
        name not in inits
        for node in graph.node
        if node.op_type == "GRU"
        for name in node.input[1:4]
        if name
    )


@pytest.mark.parametrize(("kind", "grus"), [("plain", 1), ("bi_2layer_linear", 2)])
def test_torch_dynamo_export_folds_and_imports(tmp_path, kind, grus, caplog, capfd):
    torch.manual_seed(0)
    module = _Dynamo(kind).eval()
    features = 64 if kind == "plain" else 16
    # 5 steps, batch 3: time-major for the plain GRU, batch-first for the other.
    x = torch.randn(5, 3, features) if kind == "plain" else torch.randn(3, 5, features)
    path = tmp_path / f"dynamo_{kind}.onnx"
    dims = {0: torch.export.Dim("a", min=2), 1: torch.export.Dim("b", min=2)}
    torch.onnx.export(module, (x,), str(path), dynamo=True, dynamic_shapes=(dims,))
    assert _computed_gru_weights(path) > 0  # what load used to refuse
    model = _load_quietly(path, caplog, capfd)
    report = model.meta[LOAD_REPORT]
    assert report.fired("fold_constants") > 0
    assert report.fired("import_gru") == grus and report.refusals("import_gru") == ()
    assert [n.op_type for n in model.graph if n.domain == "fusebridge"] == ["FusionGRU"] * grus
    for node in model.graph:  # weights folded into initializers; the zero state stays computed
        if node.op_type == "FusionGRU":
            assert all(v.const_value is not None for v in node.inputs[2:6])
    assert "Shape" in {n.op_type for n in model.graph}  # of x, whose dims are free
    rng = np.random.default_rng(2)
    # torch 2.13 fixes a GRU's time dim (5) in the file; the batch dim stays free.
    for batch in (3, 7):
        shape = (5, batch) if kind == "plain" else (batch, 5)
        feeds = {"x": rng.standard_normal((*shape, features)).astype(np.float32)}
        _run(model, path, feeds)
        _run(fb.optimize(model)[0], path, feeds)
    _check_types(model, tmp_path, path, feeds)


class _Recurrent(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.rnn = {"lstm": nn.LSTM, "rnn": nn.RNN}[kind](5, 6, num_layers=2)

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("kind", ["lstm", "rnn"])
def test_lstm_and_rnn_stay_standard_ops(tmp_path, kind, caplog, capfd):
    path = tmp_path / f"{kind}.onnx"
    _legacy_export(_Recurrent(kind), torch.randn(4, 2, 5), path, value_info=True)
    model = _load_quietly(path, caplog, capfd)
    op = kind.upper()
    assert [n.op_type for n in model.graph].count(op) == 2
    notes = model.meta[LOAD_REPORT].get("import_gru").notes
    assert len(notes) == 2 and all(f"ONNX {op} node" in n and "stays" in n for n in notes)
    feeds = {"x": np.random.default_rng(3).standard_normal((6, 3, 5)).astype(np.float32)}
    _run(model, path, feeds)
