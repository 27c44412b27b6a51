"""Small torch models exported with torch.onnx as ONNX test fixtures, regenerated from the
repository root by

    python -m tests.helpers.torch_fixtures [OUT_DIR]   (default tests/fixtures/onnx)

The fixtures are committed so that the ONNX import tests run without torch. They use the
TorchScript exporter (dynamo=False): it maps nn.GRU to one ONNX GRU node per layer, with
dynamic_axes for batch and sequence. Weights are random but seeded, so a rerun writes the same
graphs. torch is imported inside the functions only: this module imports without it.

verify_and_describe (and random_feeds) need only onnx, onnxruntime and NumPy;
paddle2onnx_fixtures and tests/integrations/onnx/test_fixture_files.py use them too.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT_DIR = Path("tests/fixtures/onnx")
OPSET = 17
SEED = 0


def _modules() -> dict[str, Any]:
    """The module classes; defined here so that torch is imported only when exporting."""
    import torch
    from torch import nn

    class GruWithH0(nn.Module):
        """Time-major one-layer GRU with an explicit initial state."""

        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(12, 16)

        def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.gru(x, h0)

    class BiGru2Layer(nn.Module):
        """Batch-first bidirectional two-layer GRU, initial state left to torch (zeros)."""

        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(12, 16, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.gru(x)

    class LinearGru(nn.Module):
        """A projection feeding the GRU's X: the fc + gru pattern of the Paddle models."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 12)
            self.gru = nn.GRU(12, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.gru(self.fc(x))

    class LinearDropout(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(12, 16)
            self.dropout = nn.Dropout(p=0.3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.dropout(self.fc(x))

    class Attention(nn.Module):
        """Single-head self-attention with dropout on the probabilities and on the residual
        branch, as in a transformer block (without the layer norm)."""

        def __init__(self, d: int = 16) -> None:
            super().__init__()
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, d)
            self.v = nn.Linear(d, d)
            self.out = nn.Linear(d, d)
            self.attn_dropout = nn.Dropout(0.1)
            self.resid_dropout = nn.Dropout(0.1)
            self.sqrt_d = math.sqrt(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scores = self.q(x) @ self.k(x).transpose(-2, -1) / self.sqrt_d
            probs = self.attn_dropout(torch.softmax(scores, dim=-1))
            return x + self.resid_dropout(self.out(probs @ self.v(x)))

    class Encoder(nn.Module):
        """A post-norm transformer encoder block: the attention above (dropout on the
        probabilities and the residual branch), LayerNorm, a feed-forward with its own dropout
        and a residual dropout, LayerNorm. (torch's nn.TransformerEncoderLayer exports with the
        export-time sequence length baked into its reshapes.)"""

        def __init__(self, d: int = 16, hidden: int = 32) -> None:
            super().__init__()
            self.attention = Attention(d)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff1, self.ff2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
            self.ff_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.norm1(self.attention(x))
            ff = self.ff2(self.ff_dropout(torch.relu(self.ff1(h))))
            return self.norm2(h + self.resid_dropout(ff))

    return {
        "Encoder": Encoder,
        "GruWithH0": GruWithH0,
        "BiGru2Layer": BiGru2Layer,
        "LinearGru": LinearGru,
        "LinearDropout": LinearDropout,
        "Attention": Attention,
    }


@dataclass(frozen=True)
class TorchFixture:
    module: str  # a class of _modules()
    input_shapes: list[list[int]]  # of the example inputs: batch 2, sequence 5
    inputs: list[str]
    outputs: list[str]
    dynamic_axes: dict[str, dict[int, str]]  # frees batch and sequence
    training: bool = False


_SEQ_BATCH = {0: "seq", 1: "batch"}
_BATCH_SEQ = {0: "batch", 1: "seq"}
_GRU_AXES = {"x": _SEQ_BATCH, "y": _SEQ_BATCH, "hn": {1: "batch"}}
_ROW_AXES = {"x": _BATCH_SEQ, "y": _BATCH_SEQ}
FIXTURES: dict[str, TorchFixture] = {
    "torch_gru": TorchFixture(
        "GruWithH0",
        [[5, 2, 12], [1, 2, 16]],
        ["x", "h0"],
        ["y", "hn"],
        {**_GRU_AXES, "h0": {1: "batch"}},
    ),
    "torch_bigru_2layer": TorchFixture(
        "BiGru2Layer", [[2, 5, 12]], ["x"], ["y", "hn"], {**_ROW_AXES, "hn": {1: "batch"}}
    ),
    "torch_linear_gru": TorchFixture("LinearGru", [[5, 2, 10]], ["x"], ["y", "hn"], _GRU_AXES),
    "torch_dropout_train": TorchFixture(
        "LinearDropout", [[2, 5, 12]], ["x"], ["y"], _ROW_AXES, training=True
    ),
    "torch_attention_train": TorchFixture(
        "Attention", [[2, 5, 16]], ["x"], ["y"], _ROW_AXES, training=True
    ),
    "torch_attention_eval": TorchFixture("Attention", [[2, 5, 16]], ["x"], ["y"], _ROW_AXES),
    "torch_encoder_train": TorchFixture(
        "Encoder", [[2, 5, 16]], ["x"], ["y"], _ROW_AXES, training=True
    ),
}


def export_fixture(name: str, out_dir: str | os.PathLike, opset: int = OPSET) -> Path:
    """Builds fixture `name` (a FIXTURES key) with seeded weights and writes OUT_DIR/name.onnx,
    at standard opset `opset`."""
    import torch

    fixture = FIXTURES[name]
    torch.manual_seed(SEED)  # the same weights on every run, and train/eval attention share them
    module = _modules()[fixture.module]().train(fixture.training)
    args = tuple(torch.randn(*shape) for shape in fixture.input_shapes)
    path = Path(out_dir) / f"{name}.onnx"
    mode = torch.onnx.TrainingMode.TRAINING if fixture.training else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        # The TorchScript exporter and its `training` argument are deprecated and say so; it
        # also warns that a GRU without h0 input exported at batch 2 may fail at other batch
        # sizes (it does not: the tests run every fixture at two other batch sizes).
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=fixture.inputs,
            output_names=fixture.outputs,
            dynamic_axes=fixture.dynamic_axes,
            opset_version=opset,
            training=mode,
            # torch's defaults: folding on in eval (the GRU weights, reordered to ONNX's gate
            # order, become initializers) and, as torch asks, off in training mode (the
            # parameters stay as they are, e.g. Linear's weight behind a Transpose).
            do_constant_folding=not fixture.training,
            dynamo=False,
        )
    return path


def export_fixtures(out_dir: str | os.PathLike = DEFAULT_OUT_DIR) -> list[Path]:
    """Exports every fixture into out_dir; returns the files written."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return [export_fixture(name, out_dir) for name in FIXTURES]


def random_feeds(
    session: Any, sizes: dict[str, int], rng: np.random.Generator | None = None
) -> dict[str, np.ndarray]:
    """Float32 normal inputs for an onnxruntime session; symbolic dimensions take their size
    from `sizes` (e.g. {"batch": 3, "seq": 7}); unknown names raise KeyError."""
    rng = np.random.default_rng(0) if rng is None else rng
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else sizes[d] for d in arg.shape]
        feeds[arg.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _dims(value_info: Any) -> str:
    dims = value_info.type.tensor_type.shape.dim
    return "[" + ", ".join(d.dim_param or str(d.dim_value) for d in dims) + "]"


def verify_and_describe(path: str | os.PathLike, sizes: dict[str, int] | None = None) -> str:
    """Checks the file (onnx.checker full_check; onnxruntime loads and runs it on random
    inputs) and returns a description: size, IR version, opsets, op counts, graph inputs and
    outputs, and each GRU node's attributes and inputs. Raises if a check fails."""
    import onnx
    import onnxruntime as ort

    path = Path(path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, random_feeds(session, sizes or {"batch": 3, "seq": 7}))
    graph = model.graph
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    counts = Counter(node.op_type for node in graph.node)
    lines = [
        f"{path.name}: {path.stat().st_size} bytes, IR {model.ir_version}, opset {opsets}, "
        f"producer {model.producer_name} {model.producer_version}",
        "  ops: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())),
        "  inputs: " + ", ".join(f"{v.name} {_dims(v)}" for v in graph.input),
        "  outputs: " + ", ".join(f"{v.name} {_dims(v)}" for v in graph.output),
        "  ort output shapes: " + ", ".join(str(list(o.shape)) for o in outputs),
        f"  initializers: {len(graph.initializer)}",
    ]
    for node in graph.node:
        if node.op_type == "GRU":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
            lines.append(f"  GRU {node.name}: {attrs} inputs {list(node.input)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for path in export_fixtures(args[0] if args else DEFAULT_OUT_DIR):
        print(verify_and_describe(path))


if __name__ == "__main__":
    main()
