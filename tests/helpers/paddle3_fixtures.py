"""Paddle 3 models saved the 3.x ways, as test fixtures, regenerated from the repository root by

    python -m tests.helpers.paddle3_fixtures [OUT_DIR]   (default tests/fixtures/paddle3)

Each model is built with paddle.nn, its weights drawn from a seeded NumPy generator, and saved
three ways: `paddle.jit.save` with PIR on (jit/model.json + .pdiparams),
`paddle.static.save_inference_model` with PIR on (pir/model.json) and with PIR off
(legacy/model.pdmodel). The PIR flag is read when paddle is first imported, so each way runs in
a child process of its own (this file run as a script: `--way WAY OUT_DIR`).

The models: a tagger (Embedding + 2-layer bidirectional GRU + Dropout + Linear) with and without
sequence lengths, a Linear before a bidirectional GRU, an LSTM tagger with lengths, a one-layer
tanh RNN (its output and final state), and a transformer encoder block with dropouts. Paddle 3.3
cannot save the encoder with PIR off (MultiHeadAttention fails in legacy static mode): that one
way is reported and skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fusebridge.models.paddle_families import save_layer

DEFAULT_OUT_DIR = Path(__file__).parents[1] / "fixtures" / "paddle3"
WAYS = ("jit", "pir", "legacy")
SEED = 0
VOCAB, EMBED, HIDDEN, TAGS = 40, 8, 6, 5
D_MODEL, HEADS, FFN = 16, 2, 32
MODELS = (
    "gru_tagger",
    "gru_tagger_lengths",
    "linear_gru",
    "lstm_tagger_lengths",
    "rnn_tanh",
    "encoder",
)


def _seed_values(layer: Any, seed: int) -> list[np.ndarray]:
    # NumPy, not paddle.seed: the same values whatever Paddle's initializers do, nonzero biases.
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.4, 0.4, size=p.shape).astype(np.float32) for p in layer.parameters()]


def build(name: str) -> tuple[Any, list[Any]]:
    """(layer in eval mode, input specs) of model `name`."""
    import paddle

    nn = paddle.nn
    ids = paddle.static.InputSpec([None, None], "int64", "ids")
    lens = paddle.static.InputSpec([None], "int64", "lens")

    class Tagger(nn.Layer):
        def __init__(self, cell: str, lengths: bool) -> None:
            super().__init__()
            self.lengths = lengths
            self.embed = nn.Embedding(VOCAB, EMBED)
            rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
            self.rnn = rnn(EMBED, HIDDEN, num_layers=2, direction="bidirect")
            self.drop = nn.Dropout(0.2)
            self.out = nn.Linear(2 * HIDDEN, TAGS)

        def forward(self, ids, lens=None):
            x = self.embed(ids)
            y, _ = self.rnn(x, sequence_length=lens) if self.lengths else self.rnn(x)
            return self.out(self.drop(y))

    class LinearGru(nn.Layer):
        """A Linear before a one-layer GRU: the projection folds into the fused GRU."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.proj = nn.Linear(EMBED, EMBED)
            self.rnn = nn.GRU(EMBED, HIDDEN, direction="bidirect")

        def forward(self, ids, lens):
            y, _ = self.rnn(self.proj(self.embed(ids)), sequence_length=lens)
            return y

    class TanhRnn(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.rnn = nn.SimpleRNN(EMBED, HIDDEN, activation="tanh")

        def forward(self, ids):
            y, h = self.rnn(self.embed(ids))
            return y, h

    class Encoder(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D_MODEL)
            self.block = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.1)
            self.out = nn.Linear(D_MODEL, TAGS)

        def forward(self, ids):
            return paddle.nn.functional.softmax(self.out(self.block(self.embed(ids))), -1)

    layer, specs = {
        "gru_tagger": lambda: (Tagger("gru", False), [ids]),
        "gru_tagger_lengths": lambda: (Tagger("gru", True), [ids, lens]),
        "linear_gru": lambda: (LinearGru(), [ids, lens]),
        "lstm_tagger_lengths": lambda: (Tagger("lstm", True), [ids, lens]),
        "rnn_tanh": lambda: (TanhRnn(), [ids]),
        "encoder": lambda: (Encoder(), [ids]),
    }[name]()
    layer.eval()
    return layer, specs


def save(name: str, way: str, out_dir: Path) -> None:
    """Model `name` saved `way` into out_dir/name/way/model.*: jit.save of the dygraph layer,
    or the layer built in a static program (paddle.static.data inputs) and
    save_inference_model."""
    seed = SEED + MODELS.index(name)

    def values(layer: Any) -> list[tuple[Any, np.ndarray]]:
        return list(zip(layer.parameters(), _seed_values(layer, seed)))

    save_layer(str(out_dir / name / way / "model"), way, lambda: build(name), values)


def feeds(name: str, batch: int = 3, seed: int = 1) -> dict[str, np.ndarray]:
    """Inputs for model `name`: ids [batch, T] (and lengths, the longest = T)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 9, size=batch).astype(np.int64)
    lengths[0] = 9
    ids = rng.integers(0, VOCAB, size=(batch, int(lengths.max()))).astype(np.int64)
    if name.endswith("_lengths") or name == "linear_gru":
        return {"ids": ids, "lens": lengths}
    return {"ids": ids}


def main(out_dir: Path) -> None:
    for way in WAYS:
        env = dict(os.environ, FLAGS_enable_pir_api="0" if way == "legacy" else "1")
        subprocess.run([sys.executable, __file__, "--way", way, str(out_dir)], env=env, check=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--way"]:
        way, target = sys.argv[2], Path(sys.argv[3])
        for model in MODELS:
            try:
                save(model, way, target)
            except Exception as e:  # a way Paddle itself cannot save: reported, not written
                print(f"{model} {way}: Paddle cannot save it: {type(e).__name__}: {e}"[:300])
    else:
        main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT_DIR)
