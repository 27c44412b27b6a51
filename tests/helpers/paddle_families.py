"""The four model families Paddle users hold beyond taggers, built from paddle.nn layers and saved
by Paddle itself as test fixtures, regenerated from the repository root by

    python -m tests.helpers.paddle_families [OUT_DIR]   (default tests/fixtures/paddle_families)

- deepspeech: a DeepSpeech2-style speech model: conv2d + batch_norm + hardtanh over a
  spectrogram [batch, 1, time, freq], the frame counts after the convolution computed inside the
  model (floor_divide), a stacked bidirectional GRU over them, Linear, softmax;
- crnn: a CRNN-style text recogniser: conv/relu/max-pool stack over a [batch, 1, 8, width]
  line image, a bidirectional LSTM over the columns, Linear, CTC greedy (argmax);
- ernie: an ERNIE-style encoder: position ids from arange inside the model, word + position
  embeddings, layer_norm, two transformer layers (gelu) with a padding mask built from the ids
  (id 0 is padding), tanh pooler over the first token, classifier softmax;
- classifier: embedding, bidirectional GRU with lengths, mean and max pooling over time,
  layer_norm, Linear, softmax.

Each is saved the ways paddle3_fixtures.py saves (`paddle.jit.save` with PIR on, and
save_inference_model with PIR on and off), each way in a child process of its own (the PIR flag
is read when paddle is first imported); a way Paddle itself cannot save is reported and skipped.
Weights come from a seeded NumPy generator (batch norm's running variance kept positive)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT_DIR = Path(__file__).parents[1] / "fixtures" / "paddle_families"
WAYS = ("jit", "pir", "legacy")
MODELS = ("deepspeech", "crnn", "ernie", "classifier")
SEED = 10
FREQ, CHARS = 16, 7  # deepspeech: spectrogram bins, output alphabet
LINE_HEIGHT = 8  # crnn: image rows
VOCAB, D_MODEL, HEADS, FFN, CLASSES, MAX_LEN = 50, 16, 2, 32, 3, 64
EMBED, HIDDEN = 8, 6


def build(name: str) -> tuple[Any, list[Any]]:
    """(layer in eval mode, input specs) of model `name`."""
    import paddle

    nn, F = paddle.nn, paddle.nn.functional
    spec = paddle.static.InputSpec

    class DeepSpeech(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2D(1, 4, (3, 3), stride=(2, 2), padding=(1, 1))
            self.norm = nn.BatchNorm2D(4)
            self.rnn = nn.GRU(4 * (FREQ // 2), HIDDEN, num_layers=2, direction="bidirect")
            self.out = nn.Linear(2 * HIDDEN, CHARS)

        def forward(self, audio, lens):
            x = F.hardtanh(self.norm(self.conv(audio)), 0.0, 20.0)  # [B, 4, T/2, F/2]
            x = x.transpose([0, 2, 1, 3]).flatten(2)  # [B, T', 4 * F/2]
            frames = paddle.floor_divide(lens + 2 * 1 - 3, paddle.full_like(lens, 2)) + 1
            y, _ = self.rnn(x, sequence_length=frames)
            return F.softmax(self.out(y), -1), frames

    class Crnn(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(1, 4, 3, padding=1)
            self.conv2 = nn.Conv2D(4, 6, 3, padding=1)
            self.pool1 = nn.MaxPool2D(2, 2)
            self.pool2 = nn.MaxPool2D((2, 1), (2, 1))
            self.pool3 = nn.AvgPool2D((2, 1), (2, 1))
            self.rnn = nn.LSTM(6, HIDDEN, direction="bidirect")
            self.out = nn.Linear(2 * HIDDEN, CHARS)

        def forward(self, image):
            x = self.pool1(F.relu(self.conv1(image)))  # [B, 4, 4, W/2]
            x = self.pool3(self.pool2(F.relu(self.conv2(x))))  # [B, 6, 1, W/2]
            x = x.squeeze(2).transpose([0, 2, 1])  # [B, W/2, 6]
            y, _ = self.rnn(x)
            logits = self.out(y)
            return logits, paddle.argmax(logits, -1)

    class Ernie(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(VOCAB, D_MODEL, padding_idx=0)
            self.positions = nn.Embedding(MAX_LEN, D_MODEL)
            self.norm = nn.LayerNorm(D_MODEL)
            layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.1, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.pooler = nn.Linear(D_MODEL, D_MODEL)
            self.classify = nn.Linear(D_MODEL, CLASSES)

        def forward(self, ids):
            positions = paddle.arange(paddle.shape(ids)[1], dtype="int64").unsqueeze(0)
            x = self.norm(self.words(ids) + self.positions(positions))
            padding = paddle.equal(ids, paddle.zeros_like(ids)).astype("float32")
            mask = (padding * -1e4).unsqueeze([1, 2])  # [B, 1, 1, T], added to the scores
            x = self.encoder(x, mask)
            pooled = paddle.tanh(self.pooler(x[:, 0]))
            return F.softmax(self.classify(pooled), -1)

    class Classifier(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.rnn = nn.GRU(EMBED, HIDDEN, direction="bidirect")
            self.norm = nn.LayerNorm(4 * HIDDEN)
            self.out = nn.Linear(4 * HIDDEN, CLASSES)

        def forward(self, ids, lens):
            y, _ = self.rnn(self.embed(ids), sequence_length=lens)  # padded steps are zeros
            steps = paddle.arange(paddle.shape(ids)[1], dtype="int64").unsqueeze(0)
            valid = paddle.less_than(steps, lens.unsqueeze(1)).astype("float32").unsqueeze(2)
            mean = paddle.sum(y * valid, 1) / lens.astype("float32").unsqueeze(1)
            peak = paddle.max(y + (valid - 1.0) * 1e4, 1)
            x = self.norm(paddle.concat([mean, peak], -1))
            return F.softmax(self.out(x), -1)

    layer, specs = {
        "deepspeech": lambda: (
            DeepSpeech(),
            [spec([None, 1, None, FREQ], "float32", "audio"), spec([None], "int64", "lens")],
        ),
        "crnn": lambda: (Crnn(), [spec([None, 1, LINE_HEIGHT, None], "float32", "image")]),
        "ernie": lambda: (Ernie(), [spec([None, None], "int64", "ids")]),
        "classifier": lambda: (
            Classifier(),
            [spec([None, None], "int64", "ids"), spec([None], "int64", "lens")],
        ),
    }[name]()
    layer.eval()
    return layer, specs


def _seed_values(layer: Any, seed: int) -> dict[str, np.ndarray]:
    """Parameter and buffer values (batch norm's running mean and variance included), keyed by
    the layer's state_dict names: NumPy draws, not Paddle's initializers."""
    rng = np.random.default_rng(seed)
    values = {}
    for key, tensor in layer.state_dict().items():
        shape = tuple(tensor.shape)
        if key.endswith("_variance"):
            values[key] = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
        else:
            values[key] = rng.uniform(-0.4, 0.4, size=shape).astype(np.float32)
    return values


def save(name: str, way: str, out_dir: Path) -> None:
    """Model `name` saved `way` into out_dir/name/way/model.*."""
    import paddle

    prefix = str(out_dir / name / way / "model")
    seed = SEED + MODELS.index(name)
    if way == "jit":
        layer, specs = build(name)
        layer.set_state_dict(_seed_values(layer, seed))
        paddle.jit.save(layer, prefix, input_spec=specs)
        return
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        layer, specs = build(name)
        inputs = [paddle.static.data(s.name, s.shape, s.dtype) for s in specs]
        outputs = layer(*inputs)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    scope = paddle.static.global_scope()
    for key, value in _seed_values(layer, seed).items():
        var = layer.state_dict()[key]
        scope.find_var(var.name).get_tensor().set(value, paddle.CPUPlace())
    paddle.static.save_inference_model(prefix, inputs, outputs, exe, program=main)


def feeds(name: str, batch: int = 3, seed: int = 1) -> dict[str, np.ndarray]:
    """Inputs for model `name`, of unequal lengths (the longest fills the batch)."""
    rng = np.random.default_rng(seed)
    if name == "deepspeech":
        lens = rng.integers(6, 20, size=batch).astype(np.int64)
        lens[0] = 20
        audio = rng.standard_normal((batch, 1, 20, FREQ)).astype(np.float32)
        return {"audio": audio, "lens": lens}
    if name == "crnn":
        return {"image": rng.uniform(0, 1, (batch, 1, LINE_HEIGHT, 12)).astype(np.float32)}
    lens = rng.integers(2, 9, size=batch).astype(np.int64)
    lens[0] = 9
    ids = rng.integers(1, VOCAB, size=(batch, 9)).astype(np.int64)
    ids[np.arange(9)[None, :] >= lens[:, None]] = 0  # padding
    return {"ids": ids, "lens": lens} if name == "classifier" else {"ids": ids}


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
