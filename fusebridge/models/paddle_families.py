"""The four model families Paddle users hold beyond taggers, built from paddle.nn layers and saved
by Paddle itself: small ones (TEST sizes) as test fixtures, regenerated from the repository root
by

    python -m fusebridge.models.paddle_families [OUT_DIR]   (default tests/fixtures/paddle_families)

and larger ones (BENCH sizes) by benchmarks/paddle_families.py.

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

Each is saved `paddle.jit.save` with PIR on, and save_inference_model with PIR on and off, each
way in a child process of its own (the PIR flag is read when paddle is first imported); a way
Paddle itself cannot save is reported and skipped. Weights come from a seeded NumPy generator
(batch norm's running variance kept positive). paddle is imported only inside the functions."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT_DIR = Path("tests/fixtures/paddle_families")  # from the repository root
WAYS = ("jit", "pir", "legacy")
MODELS = ("deepspeech", "crnn", "ernie", "classifier")
SEED = 10
LINE_HEIGHT = 8  # crnn: image rows (three poolings by 2 make them one)
MAX_LEN = 64  # ernie: its position table, the longest input it takes


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The models' sizes, and the lengths their inputs are drawn with (tokens, spectrogram
    frames, image columns: low to high inclusive; a batch's first input gets the longest)."""

    freq: int = 16  # deepspeech: spectrogram bins
    chars: int = 7  # deepspeech and crnn: output alphabet
    channels: tuple[int, int] = (4, 6)  # the convolutions' output channels
    hidden: int = 6  # every GRU and LSTM
    vocab: int = 50
    embed: int = 8  # classifier
    d_model: int = 16  # ernie
    heads: int = 2
    ffn: int = 32
    classes: int = 3
    tokens: tuple[int, int] = (2, 9)
    frames: tuple[int, int] = (6, 20)
    columns: tuple[int, int] = (12, 12)


TEST = Sizes()
BENCH = Sizes(
    freq=64,
    chars=29,
    channels=(16, 32),
    hidden=128,
    vocab=5000,
    embed=128,
    d_model=128,
    heads=4,
    ffn=512,
    classes=5,
    tokens=(5, 60),
    frames=(40, 200),
    columns=(32, 160),
)


def build(name: str, z: Sizes = TEST) -> tuple[Any, list[Any]]:
    """(layer in eval mode, input specs) of model `name` at sizes `z`."""
    import paddle

    nn, F = paddle.nn, paddle.nn.functional
    spec = paddle.static.InputSpec

    class DeepSpeech(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2D(1, z.channels[0], (3, 3), stride=(2, 2), padding=(1, 1))
            self.norm = nn.BatchNorm2D(z.channels[0])
            features = z.channels[0] * (z.freq // 2)
            self.rnn = nn.GRU(features, z.hidden, num_layers=2, direction="bidirect")
            self.out = nn.Linear(2 * z.hidden, z.chars)

        def forward(self, audio, lens):
            x = F.hardtanh(self.norm(self.conv(audio)), 0.0, 20.0)  # [B, C, T/2, F/2]
            x = x.transpose([0, 2, 1, 3]).flatten(2)  # [B, T', C * F/2]
            frames = paddle.floor_divide(lens + 2 * 1 - 3, paddle.full_like(lens, 2)) + 1
            y, _ = self.rnn(x, sequence_length=frames)
            return F.softmax(self.out(y), -1), frames

    class Crnn(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(1, z.channels[0], 3, padding=1)
            self.conv2 = nn.Conv2D(z.channels[0], z.channels[1], 3, padding=1)
            self.pool1 = nn.MaxPool2D(2, 2)
            self.pool2 = nn.MaxPool2D((2, 1), (2, 1))
            self.pool3 = nn.AvgPool2D((2, 1), (2, 1))
            self.rnn = nn.LSTM(z.channels[1], z.hidden, direction="bidirect")
            self.out = nn.Linear(2 * z.hidden, z.chars)

        def forward(self, image):
            x = self.pool1(F.relu(self.conv1(image)))  # [B, C1, 4, W/2]
            x = self.pool3(self.pool2(F.relu(self.conv2(x))))  # [B, C2, 1, W/2]
            x = x.squeeze(2).transpose([0, 2, 1])  # [B, W/2, C2]
            y, _ = self.rnn(x)
            logits = self.out(y)
            return logits, paddle.argmax(logits, -1)

    class Ernie(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(z.vocab, z.d_model, padding_idx=0)
            self.positions = nn.Embedding(MAX_LEN, z.d_model)
            self.norm = nn.LayerNorm(z.d_model)
            layer = nn.TransformerEncoderLayer(
                z.d_model, z.heads, z.ffn, dropout=0.1, activation="gelu"
            )
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.pooler = nn.Linear(z.d_model, z.d_model)
            self.classify = nn.Linear(z.d_model, z.classes)

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
            self.embed = nn.Embedding(z.vocab, z.embed)
            self.rnn = nn.GRU(z.embed, z.hidden, direction="bidirect")
            self.norm = nn.LayerNorm(4 * z.hidden)
            self.out = nn.Linear(4 * z.hidden, z.classes)

        def forward(self, ids, lens):
            y, _ = self.rnn(self.embed(ids), sequence_length=lens)  # padded steps are zeros
            steps = paddle.arange(paddle.shape(ids)[1], dtype="int64").unsqueeze(0)
            valid = paddle.less_than(steps, lens.unsqueeze(1)).astype("float32").unsqueeze(2)
            mean = paddle.sum(y * valid, 1) / lens.astype("float32").unsqueeze(1)
            peak = paddle.max(y + (valid - 1.0) * 1e4, 1)
            x = self.norm(paddle.concat([mean, peak], -1))
            return F.softmax(self.out(x), -1)

    ids, lens = spec([None, None], "int64", "ids"), spec([None], "int64", "lens")
    layer, specs = {
        "deepspeech": lambda: (
            DeepSpeech(),
            [spec([None, 1, None, z.freq], "float32", "audio"), lens],
        ),
        "crnn": lambda: (Crnn(), [spec([None, 1, LINE_HEIGHT, None], "float32", "image")]),
        "ernie": lambda: (Ernie(), [ids]),
        "classifier": lambda: (Classifier(), [ids, lens]),
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


def save_layer(
    prefix: str,
    way: str,
    make: Callable[[], tuple[Any, list[Any]]],
    values: Callable[[Any], list[tuple[Any, np.ndarray]]],
) -> None:
    """Saves the layer make() builds (in eval mode, with its input specs) at `prefix` the way
    `way` says: "jit", paddle.jit.save of the dygraph layer; else the layer built in a static
    program from paddle.static.data inputs and save_inference_model (PIR on or off as paddle
    was imported). values(layer) gives each parameter or buffer its value."""
    import paddle

    if way == "jit":
        layer, specs = make()
        for tensor, value in values(layer):
            tensor.set_value(value)
        paddle.jit.save(layer, prefix, input_spec=specs)
        return
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        layer, specs = make()
        inputs = [paddle.static.data(s.name, s.shape, s.dtype) for s in specs]
        outputs = layer(*inputs)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    scope = paddle.static.global_scope()
    for tensor, value in values(layer):
        scope.find_var(tensor.name).get_tensor().set(value, paddle.CPUPlace())
    # The layers were built in eval mode (dropout is_test); PIR programs have no
    # clone(for_test=True).
    paddle.static.save_inference_model(prefix, inputs, outputs, exe, program=main)


def save(name: str, way: str, out_dir: Path, sizes: Sizes = TEST) -> None:
    """Model `name` saved `way` into out_dir/name/way/model.*."""
    seed = SEED + MODELS.index(name)

    def values(layer: Any) -> list[tuple[Any, np.ndarray]]:
        state = layer.state_dict()
        return [(state[key], value) for key, value in _seed_values(layer, seed).items()]

    save_layer(str(out_dir / name / way / "model"), way, lambda: build(name, sizes), values)


def feeds(name: str, batch: int = 3, seed: int = 1, sizes: Sizes = TEST) -> dict[str, np.ndarray]:
    """Inputs for model `name`: `batch` of unequal lengths (the first the longest), padded with
    zeros (id 0 is padding) where the model takes lengths or masks padding."""
    rng = np.random.default_rng(seed)

    def lengths(low: int, high: int) -> np.ndarray:
        drawn = rng.integers(low, high + 1, size=batch).astype(np.int64)
        drawn[0] = high
        return drawn

    if name == "deepspeech":
        lens = lengths(*sizes.frames)
        audio = rng.standard_normal((batch, 1, int(lens.max()), sizes.freq)).astype(np.float32)
        return {"audio": audio, "lens": lens}
    if name == "crnn":
        width = int(lengths(*sizes.columns).max())
        return {"image": rng.uniform(0, 1, (batch, 1, LINE_HEIGHT, width)).astype(np.float32)}
    lens = lengths(*sizes.tokens)
    ids = rng.integers(1, sizes.vocab, size=(batch, int(lens.max()))).astype(np.int64)
    ids[np.arange(ids.shape[1])[None, :] >= lens[:, None]] = 0  # padding
    return {"ids": ids, "lens": lens} if name == "classifier" else {"ids": ids}


def save_all(out_dir: Path, sizes: Sizes = TEST, ways: tuple[str, ...] = WAYS) -> str:
    """Every model saved every way in `ways`, each way in a child process; returns what the
    children reported (the ways Paddle cannot save)."""
    reports = []
    for way in ways:
        env = dict(os.environ, FLAGS_enable_pir_api="0" if way == "legacy" else "1")
        env.setdefault("GLOG_minloglevel", "3")
        fields = json.dumps(dataclasses.asdict(sizes))
        args = [sys.executable, __file__, "--way", way, str(out_dir), fields]
        done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
        reports += [line for line in done.stdout.splitlines() if "cannot save" in line]
    return "\n".join(reports)


def _save_way(way: str, out_dir: Path, fields: str) -> None:
    sizes = Sizes(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(fields).items()}
    )
    for model in MODELS:
        try:
            save(model, way, out_dir, sizes)
        except Exception as e:  # a way Paddle itself cannot save: reported, not written
            print(f"{model} {way}: Paddle cannot save it: {type(e).__name__}: {e}"[:300])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--way"]:
        _save_way(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
    else:
        print(save_all(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT_DIR))
