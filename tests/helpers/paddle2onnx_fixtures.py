"""Small Paddle models converted by paddle2onnx as ONNX test fixtures, regenerated from the
repository root (where fusebridge is the tree, built in place: `pip install -e .`) by

    python -m tests.helpers.paddle2onnx_fixtures [OUT_DIR]   (default tests/fixtures/onnx)

paddle2onnx cannot convert the legacy LoD `gru` op of the bundled models (it aborts), but it
does convert the padded paddle.nn.GRU, which paddle.jit.save writes as the `rnn` op. Each model
is saved with paddle.jit.save (Paddle 3: a PIR .json program) and converted in a child process
by fusebridge.bench.paddle2onnx_peer. Weights are random but seeded (NumPy); paddle is imported
lazily.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from fusebridge.bench.paddle2onnx_peer import run_paddle2onnx

from .torch_fixtures import DEFAULT_OUT_DIR, OPSET, verify_and_describe

SEED = 0


def _seed_parameters(layer: Any, seed: int = SEED) -> None:
    # NumPy rather than paddle.seed: the same values whatever Paddle's initializers do, and
    # nonzero biases (Paddle initializes Linear's bias to zero).
    rng = np.random.default_rng(seed)
    for param in layer.parameters():
        param.set_value(rng.uniform(-0.3, 0.3, size=param.shape).astype(np.float32))


def build_gru() -> tuple[Any, int]:
    """Linear(10 -> 12) then a bidirectional batch-major GRU(12, 16); returns (layer, input
    features). forward(x [batch, seq, 10]) -> (y [batch, seq, 32], h [2, batch, 16])."""
    import paddle

    class LinearBiGru(paddle.nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.fc = paddle.nn.Linear(10, 12)
            self.gru = paddle.nn.GRU(12, 16, direction="bidirect", time_major=False)

        def forward(self, x: Any) -> tuple[Any, Any]:
            return self.gru(self.fc(x))

    return LinearBiGru(), 10


def build_fc_dropout() -> tuple[Any, int]:
    """Linear(12 -> 16), Dropout(0.3) (the default upscale_in_train: identity in eval), softmax;
    returns (layer, input features)."""
    import paddle

    class FcDropout(paddle.nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.fc = paddle.nn.Linear(12, 16)
            self.dropout = paddle.nn.Dropout(0.3)

        def forward(self, x: Any) -> Any:
            return paddle.nn.functional.softmax(self.dropout(self.fc(x)), axis=-1)

    return FcDropout(), 12


BUILDERS = {"paddle2onnx_gru": build_gru, "paddle2onnx_fc_dropout": build_fc_dropout}


def export_fixture(name: str, out_dir: str | os.PathLike) -> Path:
    """Builds fixture `name` (a BUILDERS key), saves it in eval mode with a [batch, seq,
    features] input of free batch and sequence, and converts it to OUT_DIR/name.onnx."""
    import paddle

    layer, features = BUILDERS[name]()
    _seed_parameters(layer)
    layer.eval()
    spec = [paddle.static.InputSpec([None, None, features], "float32", "x")]
    with tempfile.TemporaryDirectory() as tmp:
        paddle.jit.save(layer, os.path.join(tmp, "inference"), input_spec=spec)
        prefix, save_file = os.path.join(tmp, "inference"), Path(out_dir) / f"{name}.onnx"
        result = run_paddle2onnx(prefix, save_file, opset=OPSET)
    if not result.ok or result.save_file is None:
        raise RuntimeError(f"paddle2onnx failed on {name} ({result.returncode}): {result.message}")
    return result.save_file


def export_fixtures(out_dir: str | os.PathLike = DEFAULT_OUT_DIR) -> list[Path]:
    """Exports every fixture into out_dir; returns the files written."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return [export_fixture(name, out_dir) for name in BUILDERS]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for path in export_fixtures(args[0] if args else DEFAULT_OUT_DIR):
        # paddle2onnx names the free dimensions DynamicDimension.N, in order of appearance.
        sizes = {"DynamicDimension.0": 3, "DynamicDimension.1": 7}
        print(verify_and_describe(path, sizes))


if __name__ == "__main__":
    main()
