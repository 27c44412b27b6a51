"""The look-alikes of shipped ONNX models (tests/fixtures/onnx/shipped, written by the real
exporters: tests/helpers/shipped_onnx_fixtures.py) load as shipped, run, and match ONNX Runtime on
the original file within the error bounds of both (tests/helpers/graph_bounds.py): through
fb.Session as loaded, after fb.optimize, frame by frame with the states fed back, and as a portable
export run in plain ONNX Runtime. Regenerating a fixture with the installed exporters writes the
same graph."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers import graph_bounds
from helpers import shipped_onnx_fixtures as shipped
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import check_outputs
from helpers.shipped_onnx_fixtures import load_manifest, row_feeds

import fusebridge as fb

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "onnx" / "shipped"
MANIFEST = load_manifest(SHIPPED_DIR)
NAMES = sorted(MANIFEST)
ROWS = [(name, row) for name in NAMES for row in MANIFEST[name]["rows"]]
STREAMING = [name for name in NAMES if MANIFEST[name]["states"]]
FRAMES = 5


def _path(name: str) -> str:
    return str(SHIPPED_DIR / MANIFEST[name]["file"])


@functools.cache
def _oracle(path: str) -> ort.InferenceSession:
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _ort_outputs(path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = _oracle(path)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@functools.cache
def _model(name: str) -> ir.Model:
    return fb.load(_path(name))


def _bounds(name: str, feeds: dict, feed_bounds: dict | None = None) -> tuple[dict, dict]:
    """The model's error bounds on these feeds (tests/helpers/graph_bounds.py): per output, ours and
    ONNX Runtime's summed; and each library's alone, for outputs fed back as states."""
    model = _model(name)
    per_lib = [
        graph_bounds.GraphBounds(model, lib).bounds(feeds, (feed_bounds or {}).get(lib.name))
        for lib in (graph_bounds.SESSION, ONNXRUNTIME)
    ]
    total = {out: sum(b[out][1] for b in per_lib) for out in per_lib[0]}
    return total, {lib.name: b for lib, b in zip((graph_bounds.SESSION, ONNXRUNTIME), per_lib)}


@functools.cache
def _row(name: str, row: str) -> tuple[dict, dict, dict]:
    """(feeds, ONNX Runtime's outputs on the file, the bounds of ours against them)."""
    feeds = row_feeds(MANIFEST[name], row, np.random.default_rng(shipped.SEED))
    return feeds, _ort_outputs(_path(name), feeds), _bounds(name, feeds)[0]


@functools.cache
def _optimized(name: str) -> fb.Session:
    return fb.Session(fb.optimize(fb.load(_path(name)))[0])


@pytest.fixture(scope="module")
def portable_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("shipped_portable")

    @functools.cache
    def export(name: str) -> str:
        path = str(root / f"{name}.onnx")
        fb.save_onnx(fb.optimize(fb.load(_path(name)), "portable")[0], path)
        return path

    return export


def test_manifest_lists_every_committed_file():
    files = sorted(p.name for p in SHIPPED_DIR.glob("*.onnx"))
    assert files == sorted(entry["file"] for entry in MANIFEST.values())
    sizes = {name: (SHIPPED_DIR / name).stat().st_size for name in files}
    assert max(sizes.values()) < 300_000, sizes
    assert sum(sizes.values()) < 2_000_000
    assert not list(SHIPPED_DIR.glob("*.data"))  # every file holds its weights


def test_manifest_records_what_each_class_is_about():
    """The fixtures hold the constructs of issue 17: checked on the files, not the manifest."""
    ops = {name: shipped._op_counts(onnx.load(_path(name)).graph) for name in NAMES}
    for name in NAMES:
        assert ops[name] == MANIFEST[name]["op_counts"], name
    opsets = {name: MANIFEST[name]["opset"] for name in NAMES}
    assert opsets["lac_tagger_paddle2onnx"] == 13
    assert opsets["speech_torch_opset12"] == opsets["speech_torch_opset12_lengths"] == 12
    assert opsets["small_grus_opset11"] == 11
    assert ops["small_grus_opset11"]["GRU"] == 14
    denoiser = ops["streaming_denoiser_ort_optimized"]
    for op in ("com.microsoft.FusedConv", "com.microsoft.FusedMatMul", "If", "SplitToSequence"):
        assert op in denoiser, op
    assert denoiser["GRU"] == 5
    assert {"LSTM", "RNN"} <= set(ops["recurrent_lstm_rnn_torch"])
    assert MANIFEST["lac_tagger_paddle2onnx"]["value_info"] > 0
    assert MANIFEST["speech_torch_opset12"]["value_info"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_load_of_a_valid_file_logs_no_failure(name, caplog):
    """Issue 17: onnx_ir's shape inference failed (and logged a traceback) on our own shape
    functions; a valid file loads without a warning."""
    with caplog.at_level("WARNING"):
        fb.load(_path(name))
    assert [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")] == []


@pytest.mark.parametrize("name", NAMES)
def test_every_gru_we_take_is_imported(name):
    """Every GRU of the file becomes our FusionGRU (weights computed by the dynamo exporter are
    folded first), except the variant the import refuses (clip), which it names."""
    model = fb.load(_path(name))
    report = model.meta["fusebridge.load_report"].get("import_gru")
    grus = MANIFEST[name]["op_counts"].get("GRU", 0)
    refused = 1 if name == "recurrent_gru_clip_helper" else 0
    assert (report.fired, len(report.refusals)) == (grus - refused, refused)


@pytest.mark.parametrize(("name", "row"), ROWS)
def test_session_as_loaded_matches_onnxruntime(name, row):
    feeds, want, bounds = _row(name, row)
    check_outputs(fb.Session(_path(name)).run(feeds), want, bounds, f"{name} {row}")


@pytest.mark.parametrize(("name", "row"), ROWS)
def test_optimized_session_matches_onnxruntime(name, row):
    feeds, want, bounds = _row(name, row)
    check_outputs(_optimized(name).run(feeds), want, bounds, f"{name} {row}")


@pytest.mark.parametrize("pipeline", ["as loaded", "optimized"])
@pytest.mark.parametrize("name", STREAMING)
def test_streaming_frame_by_frame_matches_onnxruntime(name, pipeline):
    """One call per frame, each side feeding its own states back; every frame compared."""
    entry = MANIFEST[name]
    session = fb.Session(_path(name)) if pipeline == "as loaded" else _optimized(name)
    rng = np.random.default_rng(shipped.SEED)
    feeds = row_feeds(entry, "frame", rng)
    ours_states, state_bounds = {}, None
    for frame in range(FRAMES):
        ours = session.run({**feeds, **ours_states})
        want = _ort_outputs(_path(name), feeds)
        # Each side's state carries its own error into the next frame: its bound goes in too.
        bounds, per_lib = _bounds(name, feeds, state_bounds)
        check_outputs(ours, want, bounds, f"{name} frame {frame}")
        ours_states = {entry["states"][out]: np.asarray(ours[out]) for out in entry["states"]}
        fresh = row_feeds(entry, "frame", rng)
        states = {entry["states"][out]: want[out] for out in entry["states"]}
        state_bounds = {
            lib: {entry["states"][out]: b[out][1] for out in entry["states"]}
            for lib, b in per_lib.items()
        }
        feeds = {**fresh, **states}


@pytest.mark.parametrize(("name", "row"), ROWS)
def test_portable_export_runs_in_plain_onnxruntime(name, row, portable_files):
    path = portable_files(name)
    ops = shipped._op_counts(onnx.load(path).graph)  # domain-qualified outside ai.onnx
    assert [op for op in ops if "." in op] == [], "portable means standard ONNX ops only"
    feeds, want, bounds = _row(name, row)
    exported = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ours = dict(zip([o.name for o in exported.get_outputs()], exported.run(None, feeds)))
    check_outputs(ours, want, bounds, f"{name} {row} portable")


def _structure(path: Path) -> dict[str, Any]:
    model = onnx.load(str(path))
    graph = model.graph
    return {
        "opsets": sorted((o.domain, o.version) for o in model.opset_import),
        # Element types and ranks: which dims torch.export keeps free depends on what the
        # process exported before (its specialization of a size), not on the model.
        "inputs": [
            (v.name, v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim))
            for v in graph.input
        ],
        "outputs": [v.name for v in graph.output],
        "nodes": [(n.domain, n.op_type, len(n.input), len(n.output)) for n in graph.node],
        # Shapes only: torch's dynamo exporter numbers its values (val_N) per process.
        "initializers": sorted(tuple(t.dims) for t in graph.initializer),
    }


@pytest.mark.parametrize("builder", shipped.BUILDERS, ids=lambda b: b.__name__)
def test_regenerating_writes_the_same_graphs(builder, tmp_path):
    pytest.importorskip("paddle" if builder is shipped.build_lac_tagger else "torch")
    if builder is shipped.build_lac_tagger:
        from fusebridge.bench import paddle2onnx_peer

        if not (paddle2onnx_peer.install_dir() / paddle2onnx_peer._INSTALLED_MARK).is_dir():
            pytest.skip("paddle2onnx is not installed (a pip install, not done by the tests)")
    if builder is shipped.build_version_converted:  # it converts the speech look-alike
        shutil.copy(SHIPPED_DIR / "speech_torch_opset12.onnx", tmp_path)
    for built in builder(tmp_path):
        assert _structure(built.path) == _structure(SHIPPED_DIR / built.path.name), built.path
