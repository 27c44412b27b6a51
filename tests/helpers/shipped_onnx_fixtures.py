"""Look-alikes of the GRU models that real packages ship as ONNX, written by the real exporters,
as test fixtures; regenerated from the repository root (where fusebridge is the tree, built
in place: `pip install -e .`) by

    python -m tests.helpers.shipped_onnx_fixtures [OUT_DIR]   (default tests/fixtures/onnx/shipped)

One file per model class of issue 17 (hidden sizes scaled down, structure kept) plus
manifest.json: per file its exporter and settings, opsets, producer, inputs with the concrete
shapes of the benchmark rows (batch1; frame: one streaming step; batch16), which outputs feed
which inputs back when streaming, and the op counts. Every file is checked against the
framework that exported it (torch, Paddle, onnx.reference) with ONNX Runtime before the manifest
is written. Weights are seeded, so a rerun writes the same graphs. torch and paddle are imported
inside the builders only: this module imports without them (the tests use row_feeds and
load_manifest).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import torch_fixtures

DEFAULT_OUT_DIR = Path("tests/fixtures/onnx/shipped")
MANIFEST = "manifest.json"
SEED = 0
# The row of 16 sequences of unequal lengths; its longest sequence fills the time axis.
BATCH16_LENGTHS = [20, 3, 17, 9, 20, 1, 12, 15, 6, 20, 11, 4, 18, 8, 13, 2]


@dataclass
class Built:
    """What a builder returns: the file, how it was exported, and the oracle it must match."""

    path: Path
    cls: str  # the model class of issue 17
    exporter: str
    rows: dict[str, dict[str, list[int]]]  # row (batch1, frame, batch16) -> input -> shape
    oracle: Callable[[dict[str, np.ndarray]], list[np.ndarray]]  # the exporting framework
    settings: dict[str, Any] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # output -> the input it feeds back
    int_inputs: dict[str, int] = field(default_factory=dict)  # input -> values in [0, bound)
    lengths: dict[str, Any] | None = None  # {"input", "time_of", "axis"}
    notes: str = ""
    dtypes: dict[str, str] = field(default_factory=dict)  # input -> dtype, float32 if absent
    # Whose activations the oracle computes with (error_bounds.Activations by name); "float64"
    # for a NumPy oracle in float64, whose own error is negligible beside float32's.
    oracle_library: str = "torch"

    def stub(self) -> dict[str, Any]:
        """The part of a manifest entry that row_feeds reads."""
        names = {name for shapes in self.rows.values() for name in shapes}
        inputs = {name: {"dtype": self.dtypes.get(name, "float32")} for name in names}
        return {
            "rows": self.rows,
            "inputs": inputs,
            "int_inputs": self.int_inputs,
            "lengths": self.lengths,
        }


def row_feeds(entry: dict[str, Any], row: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Feeds for manifest entry `entry` at `row` (batch1, frame, batch16): float inputs normal,
    integer inputs uniform below their bound, lengths BATCH16_LENGTHS (scaled to the row's time
    axis) or the full time axis at batch 1."""
    feeds: dict[str, np.ndarray] = {}
    lengths = entry.get("lengths")
    for name, shape in entry["rows"][row].items():
        dtype = entry["inputs"][name]["dtype"]
        if lengths and name == lengths["input"]:
            continue
        if name in entry.get("int_inputs", {}):
            feeds[name] = rng.integers(0, entry["int_inputs"][name], shape).astype(dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    if lengths:
        shape = entry["rows"][row][lengths["input"]]
        time = entry["rows"][row][lengths["time_of"]][lengths["axis"]]
        values = [time] if shape == [1] else [min(n, time) for n in BATCH16_LENGTHS[: shape[0]]]
        feeds[lengths["input"]] = np.array(values, entry["inputs"][lengths["input"]]["dtype"])
    return feeds


def load_manifest(out_dir: str | os.PathLike = DEFAULT_OUT_DIR) -> dict[str, dict[str, Any]]:
    """The manifest's entries by fixture name."""
    return json.loads((Path(out_dir) / MANIFEST).read_text())["fixtures"]


# --- torch models -------------------------------------------------------------------------


def _torch_modules() -> dict[str, Any]:
    """The module classes; defined here so that torch is imported only when exporting."""
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class SpeechMask(nn.Module):
        """Conv1d front, two stacked GRUs (hidden 32, 48; 256 and 512 in the shipped
        submodels), Linear, Sigmoid mask applied to the input spectrum. With `packed`, the
        batch's lengths go through pack_padded_sequence, which the exporter turns into the
        GRUs' sequence_lens."""

        def __init__(
            self, packed: bool = False, features: int = 16, hidden: tuple[int, int] = (32, 48)
        ) -> None:
            super().__init__()
            self.packed = packed
            self.front = nn.Conv1d(features, hidden[0], 3, padding=1)
            self.gru1 = nn.GRU(hidden[0], hidden[0], batch_first=True)
            self.gru2 = nn.GRU(hidden[0], hidden[1], batch_first=True)
            self.fc = nn.Linear(hidden[1], features)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
            h = torch.relu(self.front(x.transpose(1, 2))).transpose(1, 2)
            if self.packed:
                h = pack_padded_sequence(h, lengths, batch_first=True, enforce_sorted=False)
            y, _ = self.gru1(h)
            y, _ = self.gru2(y)
            if self.packed:
                y, _ = pad_packed_sequence(y, batch_first=True)
                x = x[:, : y.shape[1]]
            return torch.sigmoid(self.fc(y)) * x

    @torch.jit.script
    def stack_bands(x: torch.Tensor, width: int) -> torch.Tensor:
        # Scripted, as band loops in shipped models are: the legacy exporter sees a list of
        # unknown length and writes SplitToSequence and ConcatFromSequence.
        return torch.stack(torch.split(x, width, dim=-1), 0)

    class StreamingDenoiser(nn.Module):
        """One frame in, one frame out, the five GRUs' states in h_in and out in h_out:
        Conv1d + Relu front, two band GRUs, a GRU, scaled dot-product attention over the
        frames, two GRUs, Sigmoid mask. out = mask * frame squeezed on the (dynamic) time
        axis, which the legacy exporter writes as an If."""

        def __init__(self, features: int = 16, hidden: int = 16) -> None:
            super().__init__()
            self.front = nn.Conv1d(features, 2 * hidden, 1)
            self.band_a = nn.GRU(hidden, hidden, batch_first=True)
            self.band_b = nn.GRU(hidden, hidden, batch_first=True)
            self.mix = nn.GRU(2 * hidden, hidden, batch_first=True)
            self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
            self.post1 = nn.GRU(hidden, hidden, batch_first=True)
            self.post2 = nn.GRU(hidden, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, features)
            self.hidden = hidden

        def forward(
            self, frame: torch.Tensor, h_in: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            h0 = h_in.split(1, dim=0)
            feat = torch.relu(self.front(frame.transpose(1, 2))).transpose(1, 2)
            bands = stack_bands(feat, self.hidden)
            ya, ha = self.band_a(bands[0], h0[0])
            yb, hb = self.band_b(bands[1], h0[1])
            y, hm = self.mix(torch.cat([ya, yb], -1), h0[2])
            scores = (self.q(y) @ self.k(y).transpose(1, 2)) * 0.25
            y = y + torch.softmax(scores, -1) @ self.v(y)
            y, h1 = self.post1(y, h0[3])
            y, h2 = self.post2(y, h0[4])
            out = torch.sigmoid(self.fc(y)) * frame
            return out.squeeze(1), torch.cat([ha, hb, hm, h1, h2], 0)

    class GroupedGru(nn.Module):
        """Channels in two groups, a GRU each (the grouped RNN of dual-path enhancers)."""

        def __init__(self, channels: int, hidden: int, bidirectional: bool) -> None:
            super().__init__()
            half = channels // 2
            self.grus = nn.ModuleList(
                nn.GRU(half, hidden, batch_first=True, bidirectional=bidirectional)
                for _ in range(2)
            )
            self.fc = nn.Linear(2 * hidden * (2 if bidirectional else 1), channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            parts = x.chunk(2, dim=-1)
            y = torch.cat([gru(part)[0] for gru, part in zip(self.grus, parts)], -1)
            return x + self.fc(y)

    class SmallGrus(nn.Module):
        """Fourteen small GRUs (hidden 4-16, four bidirectional): four band GRUs over time, two
        dual-path blocks (a bidirectional grouped GRU across the frequency bins of a frame, a
        grouped GRU across frames), two GRUs and a Sigmoid mask. x [batch, time, 32] is 8
        frequency bins of 4 channels."""

        def __init__(self) -> None:
            super().__init__()
            self.bands = nn.ModuleList(nn.GRU(8, 8, batch_first=True) for _ in range(4))
            self.intra = nn.ModuleList(GroupedGru(4, 4, True) for _ in range(2))
            self.inter = nn.ModuleList(GroupedGru(4, 8, False) for _ in range(2))
            self.post1 = nn.GRU(32, 16, batch_first=True)
            self.post2 = nn.GRU(16, 12, batch_first=True)
            self.fc = nn.Linear(12, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            batch, time = x.shape[0], x.shape[1]
            h = torch.cat([g(b)[0] for g, b in zip(self.bands, x.split(8, dim=-1))], -1)
            for intra, inter in zip(self.intra, self.inter):
                h = intra(h.reshape(-1, 8, 4)).reshape(batch, time, 8, 4)  # across bins
                h = h.transpose(1, 2).reshape(-1, time, 4)  # across frames, per bin
                h = inter(h).reshape(batch, 8, time, 4).transpose(1, 2).reshape(batch, time, 32)
            y, _ = self.post1(h)
            y, _ = self.post2(y)
            return torch.sigmoid(self.fc(y)) * x

    class LinearBiGru2Layer(nn.Module):
        """Linear, then a batch_first bidirectional two-layer GRU."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 12)
            self.gru = nn.GRU(12, 16, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.gru(self.fc(x))

    class LstmRnn(nn.Module):
        """An LSTM then a tanh RNN, which we never fuse: they stay ONNX LSTM and RNN."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(12, 16, batch_first=True)
            self.rnn = nn.RNN(16, 16, batch_first=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y, _ = self.lstm(x)
            return self.rnn(y)

    return {
        "SpeechMask": SpeechMask,
        "StreamingDenoiser": StreamingDenoiser,
        "SmallGrus": SmallGrus,
        "GruWithH0": torch_fixtures._modules()["GruWithH0"],
        "LinearBiGru2Layer": LinearBiGru2Layer,
        "LstmRnn": LstmRnn,
    }


def _torch_module(name: str, **kwargs: Any) -> Any:
    import torch

    torch.manual_seed(SEED)
    return _torch_modules()[name](**kwargs).eval()


def _torch_oracle(module: Any, input_names: list[str]) -> Callable:
    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import torch

        with torch.no_grad():
            out = module(*(torch.from_numpy(feeds[name]) for name in input_names))
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]

    return run


def _legacy_exporter() -> str:
    import torch

    return f"torch.onnx.export {torch.__version__} (TorchScript exporter, dynamo=False)"


def _export_legacy(
    module: Any,
    built: Built,
    outputs: list[str],
    dynamic_axes: dict[str, dict[int, str]],
    opset: int,
    row: str = "batch1",
) -> None:
    """torch.onnx.export(dynamo=False) with example inputs of `row`; records the settings in
    `built`."""
    import torch

    example = row_feeds(built.stub(), row, np.random.default_rng(SEED))
    built.settings = {
        "dynamo": False,
        "opset_version": opset,
        "do_constant_folding": True,
        "input_names": list(example),
        "output_names": outputs,
        "dynamic_axes": dynamic_axes,
    }
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated and says so; it also warns about GRUs
        # exported without h0 at one batch size (the generator checks other sizes).
        warnings.simplefilter("ignore")
        args = tuple(torch.from_numpy(a) for a in example.values())
        torch.onnx.export(module, args, str(built.path), **built.settings)


def _add_value_info(built: Built) -> None:
    """Writes the inferred type of every intermediate value into the file's value_info, as the
    torch 1.x-era files of issue 17 and paddle2onnx's carry; torch 2.13's legacy exporter
    writes none."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(built.path)), strict_mode=True)
    onnx.save(model, str(built.path))
    built.settings["value_info"] = "onnx.shape_inference.infer_shapes after the export"


def build_speech(out_dir: Path) -> list[Built]:
    """b. The legacy exporter at opset 12 (value_info added), batch and time free; the second
    file takes the batch's lengths (pack_padded_sequence -> the GRUs' sequence_lens)."""
    built = []
    for packed in (False, True):
        module = _torch_module("SpeechMask", packed=packed)
        rows = {"batch1": {"x": [1, 20, 16]}, "batch16": {"x": [16, 20, 16]}}
        axes = {"x": {0: "batch", 1: "time"}, "mask": {0: "batch", 1: "time"}}
        b = Built(
            out_dir / ("speech_torch_opset12" + ("_lengths.onnx" if packed else ".onnx")),
            "speech_torch_opset12",
            _legacy_exporter(),
            rows,
            _torch_oracle(module, ["x", "lengths"] if packed else ["x"]),
            notes="Conv1d+Relu front, GRU(32), GRU(48), Linear, Sigmoid mask times the input",
        )
        if packed:
            b.rows = {row: {**shapes, "lengths": [shapes["x"][0]]} for row, shapes in rows.items()}
            b.dtypes["lengths"] = "int64"
            b.lengths = {"input": "lengths", "time_of": "x", "axis": 1}
            axes["lengths"] = {0: "batch"}
            b.notes += "; lengths -> pack_padded_sequence -> the GRUs' sequence_lens"
        _export_legacy(module, b, ["mask"], axes, opset=12)
        _add_value_info(b)
        built.append(b)
    return built


def build_streaming_denoiser(out_dir: Path) -> list[Built]:
    """c. The legacy exporter at opset 17, then ONNX Runtime's offline optimizer at
    ORT_ENABLE_EXTENDED (com.microsoft FusedConv, FusedMatMul), as the shipped file was."""
    import onnx
    import onnxruntime as ort

    module = _torch_module("StreamingDenoiser")
    # Called once per frame (the exported out is declared [1, 16]): batch 1 is the frame.
    rows = {"frame": {"frame": [1, 1, 16], "h_in": [5, 1, 16]}}
    b = Built(
        out_dir / "streaming_denoiser_ort_optimized.onnx",
        "streaming_denoiser_ort_optimized",
        _legacy_exporter() + ", then onnxruntime " + ort.__version__ + " optimized_model_filepath",
        rows,
        _torch_oracle(module, ["frame", "h_in"]),
        states={"h_out": "h_in"},
        notes="Conv1d+Relu, 2 band GRUs (scripted torch.split: SplitToSequence), GRU, attention "
        "((q @ k^T) * 0.25: FusedMatMul), 2 GRUs, Sigmoid mask; out squeezed on the dynamic "
        "time axis (If); five GRU states in h_in [5, 1, 16] and out in h_out",
    )
    with tempfile.TemporaryDirectory() as tmp:
        exported = Built(Path(tmp) / "exported.onnx", b.cls, b.exporter, rows, b.oracle)
        axes = {"frame": {1: "time"}}
        _export_legacy(module, exported, ["out", "h_out"], axes, opset=17, row="frame")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(b.path)
        ort.InferenceSession(str(exported.path), options, providers=["CPUExecutionProvider"])
    ops = _op_counts(onnx.load(str(b.path)).graph)
    wanted = ["com.microsoft.FusedConv", "com.microsoft.FusedMatMul", "If", "SplitToSequence"]
    missing = [op for op in wanted if op not in ops]
    assert not missing, f"{b.path.name}: ORT's optimizer wrote no {missing} (ops: {ops})"
    b.settings = {
        **exported.settings,
        "onnxruntime": {
            "graph_optimization_level": "ORT_ENABLE_EXTENDED",
            "optimized_model_filepath": b.path.name,
            "providers": ["CPUExecutionProvider"],
        },
    }
    return [b]


def build_small_grus(out_dir: Path) -> list[Built]:
    """d. The legacy exporter at opset 11: fourteen small GRUs, four bidirectional."""
    module = _torch_module("SmallGrus")
    b = Built(
        out_dir / "small_grus_opset11.onnx",
        "small_grus_opset11",
        _legacy_exporter(),
        {"batch1": {"x": [1, 20, 32]}, "batch16": {"x": [16, 20, 32]}},
        _torch_oracle(module, ["x"]),
        notes="4 band GRUs (hidden 8) over time; 2 dual-path blocks, each a bidirectional "
        "grouped GRU pair (hidden 4) across 8 frequency bins and a grouped GRU pair (hidden 8) "
        "across frames; GRU(16), GRU(12), Sigmoid mask. The offline form: states start at zero",
    )
    axes = {"x": {0: "batch", 1: "time"}, "mask": {0: "batch", 1: "time"}}
    _export_legacy(module, b, ["mask"], axes, opset=11)
    _add_value_info(b)
    return [b]


def build_dynamo(out_dir: Path) -> list[Built]:
    """e. torch.onnx.export with its defaults (dynamo=True, optimize=True), and once with
    optimize=False; batch and time free."""
    import torch

    built = []
    cases = [
        # name, module, inputs at batch 1, outputs, torch.onnx.export's `optimize`
        ("torch_dynamo_gru", "GruWithH0", {"x": [20, 1, 12], "h0": [1, 1, 16]}, ["y", "hn"], True),
        # optimize=False leaves the gate reordering to the graph: W, R and B are computed by
        # Slice/Concat/Unsqueeze of initializers (constant folding at load makes them constant).
        (
            "torch_dynamo_gru_unoptimized",
            "GruWithH0",
            {"x": [20, 1, 12], "h0": [1, 1, 16]},
            ["y", "hn"],
            False,
        ),
        ("torch_dynamo_linear_bigru", "LinearBiGru2Layer", {"x": [1, 20, 10]}, ["y", "hn"], True),
    ]
    for name, cls, batch1, outputs, optimize in cases:
        module = _torch_module(cls)
        time_major = cls == "GruWithH0"
        batch16 = {
            n: [s[0], 16, *s[2:]] if time_major or n == "h0" else [16, *s[1:]]
            for n, s in batch1.items()
        }
        b = Built(
            out_dir / f"{name}.onnx",
            "torch_dynamo_gru",
            f"torch.onnx.export {torch.__version__} (dynamo=True, the default)",
            {"batch1": batch1, "batch16": batch16},
            _torch_oracle(module, list(batch1)),
            notes=cls
            + ": "
            + (module.__doc__ or "").strip().splitlines()[0]
            + ("" if optimize else "; W, R, B computed in the graph (gate reordering)")
            + (
                ""
                if time_major
                else "; torch.export specializes the time axis of the 2-layer bidirectional "
                "GRU, so the exporter falls back to a fixed time of 20"
            ),
        )
        # At batch 16: torch.export specializes a dimension of size 1.
        example = row_feeds(b.stub(), "batch16", np.random.default_rng(SEED))
        batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
        if time_major:
            shapes = {"x": {0: time, 1: batch}, "h0": {1: batch}}
        else:
            shapes = {"x": {0: batch, 1: time}}
        b.settings = {
            "dynamo": True,
            "external_data": False,  # the weights inside the one file
            "optimize": optimize,
            "input_names": list(batch1),
            "output_names": outputs,
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                tuple(torch.from_numpy(a) for a in example.values()),
                str(b.path),
                dynamic_shapes=shapes,
                verbose=False,
                **b.settings,
            )
        b.settings["dynamic_shapes"] = {
            n: {axis: str(dim.__name__) for axis, dim in axes.items()} for n, axes in shapes.items()
        }
        b.settings["opset_version"] = "the default"
        built.append(b)
    return built


def build_version_converted(out_dir: Path) -> list[Built]:
    """f. onnx.version_converter, as a user would: the committed opset-17 torch_gru fixture
    down to opset 14, and the opset-12 speech look-alike up to 17."""
    import onnx
    from onnx import version_converter

    built = []
    sources = [
        (Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "torch_gru.onnx", 14),
        (out_dir / "speech_torch_opset12.onnx", 17),
    ]
    for source, opset in sources:
        model = onnx.load(str(source))
        b = Built(
            out_dir / f"version_converted_{source.stem}_opset{opset}.onnx",
            "version_converted",
            f"onnx.version_converter.convert_version (onnx {onnx.__version__})",
            {},
            _ort_oracle(source),
            settings={"source": source.name, "target_opset": opset},
            oracle_library="onnxruntime",
            notes=f"{source.name} converted to opset {opset}; the oracle is ORT on the source",
        )
        onnx.save(version_converter.convert_version(model, opset), str(b.path))
        inputs = [i.name for i in model.graph.input]
        if source.stem == "torch_gru":
            b.rows = {
                "batch1": {"x": [20, 1, 12], "h0": [1, 1, 16]},
                "batch16": {"x": [20, 16, 12], "h0": [1, 16, 16]},
            }
        else:
            b.rows = {"batch1": {"x": [1, 20, 16]}, "batch16": {"x": [16, 20, 16]}}
        assert list(b.rows["batch1"]) == inputs, inputs
        built.append(b)
    return built


def _ort_oracle(path: Path) -> Callable:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def build_recurrent_unfused(out_dir: Path) -> list[Built]:
    """g. An LSTM and an RNN from the legacy exporter (opset 17), and a GRU with `clip`: no
    exporter we have writes clip (torch never does), so that one node is made by onnx.helper
    and checked against a NumPy GRU (onnx.reference ignores clip)."""
    import onnx
    from onnx import helper

    module = _torch_module("LstmRnn")
    b = Built(
        out_dir / "recurrent_lstm_rnn_torch.onnx",
        "recurrent_unfused",
        _legacy_exporter(),
        {"batch1": {"x": [1, 20, 12]}, "batch16": {"x": [16, 20, 12]}},
        _torch_oracle(module, ["x"]),
        notes="nn.LSTM(12, 16) then nn.RNN(16, 16, tanh), batch_first: ONNX LSTM and RNN",
    )
    axes = {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}, "hn": {1: "batch"}}
    _export_legacy(module, b, ["y", "hn"], axes, opset=17)

    rng = np.random.default_rng(SEED)
    hidden, features = 16, 12
    weights = {
        "W": rng.uniform(-0.5, 0.5, (1, 3 * hidden, features)),
        "R": rng.uniform(-0.5, 0.5, (1, 3 * hidden, hidden)),
        "B": rng.uniform(-0.5, 0.5, (1, 6 * hidden)),
    }
    gru = helper.make_node(
        "GRU",
        ["x", "W", "R", "B", "", "h0"],
        ["y", "hn"],
        name="gru_clip",
        hidden_size=hidden,
        linear_before_reset=1,
        clip=0.5,
    )
    graph = helper.make_graph(
        [gru],
        "gru_clip",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["time", "batch", 12]),
            helper.make_tensor_value_info("h0", onnx.TensorProto.FLOAT, [1, "batch", 16]),
        ],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["time", 1, "batch", 16]),
            helper.make_tensor_value_info("hn", onnx.TensorProto.FLOAT, [1, "batch", 16]),
        ],
        [onnx.numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnx.helper"
    )
    model.ir_version = 8
    clip = Built(
        out_dir / "recurrent_gru_clip_helper.onnx",
        "recurrent_unfused",
        f"onnx.helper (onnx {onnx.__version__}): no exporter writes GRU clip",
        {
            "batch1": {"x": [20, 1, 12], "h0": [1, 1, 16]},
            "batch16": {"x": [20, 16, 12], "h0": [1, 16, 16]},
        },
        lambda feeds: _gru_clip_numpy(feeds["x"], feeds["h0"], weights, clip=0.5),
        settings={"clip": 0.5, "linear_before_reset": 1, "opset": 17},
        oracle_library="float64",
        notes="one GRU with clip 0.5, a variant the fused GRU refuses; onnx.helper ONLY for "
        "this node (no exporter writes clip); oracle a NumPy GRU (onnx.reference ignores clip)",
    )
    onnx.save(model, str(clip.path))
    return [b, clip]


def _gru_clip_numpy(
    x: np.ndarray, h0: np.ndarray, weights: dict[str, np.ndarray], clip: float
) -> list[np.ndarray]:
    """ONNX GRU, forward, linear_before_reset=1, gates (z, r, h), with `clip` bounding every
    activation's input (the ONNX spec); float64. Returns [Y, Y_h]."""
    w, r, b = weights["W"][0], weights["R"][0], weights["B"][0]
    hidden = r.shape[1]
    wb, rb = b[: 3 * hidden], b[3 * hidden :]
    h, ys = h0[0].astype(np.float64), []
    for xt in x.astype(np.float64):
        gx, gh = xt @ w.T + wb, h @ r.T + rb
        z = 1 / (1 + np.exp(-np.clip(gx[:, :hidden] + gh[:, :hidden], -clip, clip)))
        reset = 1 / (
            1 + np.exp(-np.clip(gx[:, hidden:-hidden] + gh[:, hidden:-hidden], -clip, clip))
        )
        candidate = np.tanh(np.clip(gx[:, -hidden:] + reset * gh[:, -hidden:], -clip, clip))
        h = (1 - z) * candidate + z * h
        ys.append(h)
    return [np.stack(ys)[:, None], h[None]]


def build_lac_tagger(out_dir: Path) -> list[Built]:
    """a. A Baidu-LAC-like tagger in Paddle, saved by paddle.jit.save and converted by
    paddle2onnx at opset 13 (which writes value_info). LAC's GRUs take the batch's lengths,
    but paddle2onnx 2.1.0 drops rnn's sequence_length (the ONNX GRU's sequence_lens is left
    empty and the lengths input unread), so the look-alike is built without lengths."""
    import paddle

    from fusebridge.bench.paddle2onnx_peer import REQUIREMENTS, run_paddle2onnx

    from .paddle2onnx_fixtures import _seed_parameters

    class LacTagger(paddle.nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = paddle.nn.Embedding(100, 16)
            self.gru1 = paddle.nn.GRU(16, 16, direction="bidirect")
            self.gru2 = paddle.nn.GRU(32, 16, direction="bidirect")
            self.fc = paddle.nn.Linear(32, 9)

        def forward(self, words: Any) -> Any:
            y, _ = self.gru1(self.embedding(words))
            y, _ = self.gru2(y)
            return self.fc(y)

    layer = LacTagger()
    _seed_parameters(layer)
    layer.eval()

    def oracle(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [layer(paddle.to_tensor(feeds["words"])).numpy()]

    b = Built(
        out_dir / "lac_tagger_paddle2onnx.onnx",
        "lac_tagger_paddle2onnx",
        f"paddle.jit.save (paddle {paddle.__version__}), then {REQUIREMENTS[0]}",
        {"batch1": {"words": [1, 20]}, "batch16": {"words": [16, 20]}},
        oracle,
        int_inputs={"words": 100},
        oracle_library="paddle",
        settings={"opset_version": 13, "input_spec": "words int64 [None, None]"},
        notes="Embedding(100, 16), 2 stacked bidirectional GRU(16) (batch-major), Linear to 9 "
        "tag scores; built without lengths (paddle2onnx drops rnn's sequence_length)",
    )
    b.dtypes["words"] = "int64"
    spec = [paddle.static.InputSpec([None, None], "int64", "words")]
    with tempfile.TemporaryDirectory() as tmp:
        paddle.jit.save(layer, os.path.join(tmp, "inference"), input_spec=spec)
        result = run_paddle2onnx(os.path.join(tmp, "inference"), b.path, opset=13)
    if not result.ok:
        raise RuntimeError(f"paddle2onnx failed ({result.returncode}): {result.message}")
    return [b]


# In order: version_converted reads speech_torch_opset12.onnx.
BUILDERS = [
    build_lac_tagger,
    build_speech,
    build_streaming_denoiser,
    build_small_grus,
    build_dynamo,
    build_version_converted,
    build_recurrent_unfused,
]


# --- checks and the manifest -----------------------------------------------------------


def _op_counts(graph: Any) -> dict[str, int]:
    """Op types (domain-qualified outside ai.onnx) of the graph and its subgraphs."""
    import onnx

    counts: Counter[str] = Counter()
    for node in graph.node:
        counts[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                counts.update(_op_counts(attr.g))
    return dict(sorted(counts.items()))


def verify(built: Built) -> list[str]:
    """Runs the file in ONNX Runtime at every row and compares each output with the exporting
    framework's within the error bounds of both (graph_bounds.py); returns one line per row with
    the largest difference as a fraction of its bound. Raises AssertionError on a mismatch."""
    import onnx
    import onnx_ir as ir
    import onnxruntime as ort

    from . import error_bounds, graph_bounds

    model = onnx.load(str(built.path))
    contrib = any(node.domain not in ("", "ai.onnx") for node in model.graph.node)
    onnx.checker.check_model(model, full_check=not contrib)  # the checker knows no contrib ops
    session = ort.InferenceSession(str(built.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    model_ir = ir.from_proto(model)
    oracle = () if built.oracle_library == "float64" else (
        getattr(error_bounds, built.oracle_library.upper()),
    )  # fmt: skip
    lines = []
    for row in built.rows:
        feeds = row_feeds(built.stub(), row, np.random.default_rng(SEED))
        got = dict(zip(names, session.run(None, feeds), strict=True))
        want = dict(zip(names, built.oracle(feeds), strict=True))
        bounds = graph_bounds.output_bounds(model_ir, feeds, (graph_bounds.SESSION, *oracle))
        graph_bounds.check_outputs(got, want, bounds, f"{built.path.name} {row}")
        used = max(  # integer outputs (no bound) are compared equal
            error_bounds.fraction_of_bound(got[n], want[n], bounds[n])
            for n in names
            if bounds[n] is not None
        )
        lines.append(f"{row} {[list(g.shape) for g in got.values()]} diff/bound {used:.2f}")
    return lines


def manifest_entry(built: Built) -> dict[str, Any]:
    import onnx

    model = onnx.load(str(built.path))
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}

    def dims(value: Any) -> list[int | str]:
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    counts = _op_counts(graph)
    return {
        "file": built.path.name,
        "class": built.cls,
        "bytes": built.path.stat().st_size,
        "exporter": built.exporter,
        "settings": built.settings,
        "opset": opsets.get("ai.onnx"),
        "opset_imports": opsets,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "ir_version": model.ir_version,
        "value_info": len(graph.value_info),
        "inputs": {
            v.name: {
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name,
                "dims": dims(v),
            }
            for v in graph.input
            if v.name not in initializers
        },
        "outputs": [v.name for v in graph.output],
        "rows": built.rows,
        "states": built.states,
        "int_inputs": built.int_inputs,
        "lengths": built.lengths,
        "op_counts": counts,
        "contrib_ops": sorted(op for op in counts if op.startswith("com.microsoft.")),
        "notes": built.notes,
    }


def export_fixtures(out_dir: str | os.PathLike = DEFAULT_OUT_DIR) -> dict[str, dict[str, Any]]:
    """Builds, verifies and writes every fixture and the manifest into out_dir; prints one
    line per file; returns the manifest's entries."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = {}
    for builder in BUILDERS:
        for built in builder(out_dir):
            lines = verify(built)
            entry = manifest_entry(built)
            entries[built.path.stem] = entry
            print(
                f"{built.path.name}: {entry['bytes']} bytes, opset {entry['opset_imports']}, "
                f"{entry['producer']}, GRU x{entry['op_counts'].get('GRU', 0)}; " + "; ".join(lines)
            )
    text = json.dumps({"fixtures": entries}, indent=1, sort_keys=True)
    (out_dir / MANIFEST).write_text(text + "\n")
    return entries


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    export_fixtures(args[0] if args else DEFAULT_OUT_DIR)


if __name__ == "__main__":
    main()
