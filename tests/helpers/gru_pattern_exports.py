"""Small torch GRU models as the legacy exporter (torch.onnx.export, dynamo=False) writes them,
for the layout and zero-state rules (fuse_passes/gru_layout.py, gru.py). The committed copies in
tests/fixtures/onnx/exported_patterns are regenerated from the repository root by

    python -m tests.helpers.gru_pattern_exports [OUT_DIR]

What each carries: a Transpose (1, 0, 2) before the GRU for batch_first (and one after its
output), a zero H0 built as ConstantOfShape(Concat(.., Shape -> Gather, ..)) -> Slice per layer,
and the output chains Squeeze(axis 1) (one direction) or Transpose (0, 2, 1, 3) -> Reshape
[0, 0, -1] (two). torch is imported inside the functions only."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OUT_DIR = Path("tests/fixtures/onnx/exported_patterns")
SEED = 0
FEATURES, HIDDEN = 6, 8


@dataclass(frozen=True)
class PatternExport:
    projection: bool  # a Linear before the GRU
    batch_first: bool
    layers: int = 1
    bidirectional: bool = False
    residual: bool = False  # the Linear's output is also added to the GRU's (a second consumer)
    opset: int = 17


EXPORTS = {
    "torch_linear_gru_batch_first": PatternExport(projection=True, batch_first=True),
    "torch_gru_2layer_batch_first_o13": PatternExport(False, True, layers=2, opset=13),
    "torch_bigru_2layer_o13": PatternExport(False, False, layers=2, bidirectional=True, opset=13),
    "torch_linear_gru_residual": PatternExport(True, True, residual=True),
}


def build(spec: PatternExport):
    import torch
    from torch import nn

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(FEATURES, HIDDEN) if spec.projection else None
            self.gru = nn.GRU(
                HIDDEN if spec.projection else FEATURES,
                HIDDEN,
                num_layers=spec.layers,
                bidirectional=spec.bidirectional,
                batch_first=spec.batch_first,
            )

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.fc(x) if self.fc is not None else x
            y, hn = self.gru(h)
            if spec.residual:
                y = y + h
            return y, hn

    torch.manual_seed(SEED)
    return Model().eval()


def export(name: str, out_dir: str | os.PathLike) -> Path:
    """Writes OUT_DIR/name.onnx (EXPORTS[name]) with free batch and sequence."""
    import torch

    spec = EXPORTS[name]
    model = build(spec)
    axes = {0: "batch", 1: "seq"} if spec.batch_first else {0: "seq", 1: "batch"}
    x = torch.randn(2, 5, FEATURES) if spec.batch_first else torch.randn(5, 2, FEATURES)
    path = Path(out_dir) / f"{name}.onnx"
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated and says so; it also warns that a GRU without
        # h0 exported at batch 2 may fail at other batches (the tests run others).
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (x,),
            str(path),
            input_names=["x"],
            output_names=["y", "hn"],
            dynamic_axes={"x": axes, "y": axes, "hn": {1: "batch"}},
            opset_version=spec.opset,
            dynamo=False,
        )
    return path


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    out_dir = Path(args[0] if args else DEFAULT_OUT_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in EXPORTS:
        print(export(name, out_dir))


if __name__ == "__main__":
    main()
