"""Small MXNet Gluon models exported with HybridBlock.export as test fixtures:

    python -m fusebridge.models.mxnet_models [OUT_DIR]   (default tests/fixtures/mxnet)

Each fixture is OUT_DIR/NAME-symbol.json + OUT_DIR/NAME-0000.params:
- gru_tagger: Embedding -> 2-layer bidirectional GRU (NTC, use_sequence_length=True) ->
  Dropout(0.2, axes=(1,)) -> Dense(flatten=False) to tags. Inputs data0 = word ids [N, T]
  (float32, as Embedding wants) and data1 = sentence lengths [N] (float32).
- gru_tagger_fixed: the same without use_sequence_length (input data: word ids), with the same
  weights, so both give the same numbers on full-length sentences.
- mlp_dropout: Dense -> relu -> Dropout(0.3) -> Dense -> LeakyReLU -> softmax, input data [N, 20].
- attention: two-head self-attention on data [N, T, 16]: q, k, v Dense, Reshape/transpose into
  heads, batch_dot / sqrt(d), softmax, Dropout(0.1), batch_dot, heads merged, output Dense.
- deepspeech: a DeepSpeech2-style speech model on a spectrogram data [N, 1, time, 16]: Conv2D
  (stride 2) + BatchNorm + clip(0, 20), reshaped to [time / 2, N, features], a 2-layer
  bidirectional GRU (TNC), Dense(flatten=False), softmax over the characters.
- crnn: a CRNN-style text recogniser on a line image data [N, 1, 8, width]: Conv2D/relu/
  MaxPool2D stack to height 1, the columns as [width / 2, N, channels], a bidirectional LSTM
  (TNC), Dense(flatten=False), argmax over the characters (float32, as MXNet gives it).

build_deepspeech and build_crnn take their sizes as keyword arguments, the fixtures' by default
(benchmarks/mxnet_families.py builds them at Paddle's benchmark sizes). Weights are random but
seeded (NumPy), set in parameter order (BatchNorm's running variance kept positive). mxnet
(1.9.1, numpy < 1.24) is imported only inside the functions: the module imports without it.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT_DIR = Path("tests/fixtures/mxnet")
SEED = 0
WEIGHT_SCALE = 0.3

VOCAB, EMBED, HIDDEN, TAGS = 200, 24, 16, 9
MLP_IN, MLP_HIDDEN, MLP_OUT = 20, 32, 10
ATT_DIM, ATT_HEADS = 16, 2
SPEECH_FREQ, CHARS, CHANNELS, RNN_HIDDEN = 16, 7, (4, 6), 6
LINE_HEIGHT = 8  # crnn: image rows (three poolings by 2 make them one)


def _seed_parameters(block: Any, seed: int = SEED, scale: float = WEIGHT_SCALE) -> None:
    # NumPy rather than mx.random: the same values whatever MXNet's initializers do, nonzero
    # biases, and the tagger with and without sequence lengths gets identical weights.
    import mxnet as mx

    rng = np.random.default_rng(seed)
    block.initialize(mx.init.Zero())
    for param in block.collect_params().values():
        param.set_data(mx.nd.array(rng.uniform(-scale, scale, size=param.shape)))


def _gru_class() -> type:
    import mxnet as mx

    class _KeywordRNN:
        """Gluon 1.9.1 passes sequence_length to F.RNN positionally; the symbol API binds the
        4th positional argument to state_cell (LSTM only), so a hybridized GRU with
        use_sequence_length fails ("argument name state_cell not found"). This passes it by
        name; the exported graph is the one gluon means to write."""

        def __init__(self, F: Any):
            self._F = F

        def __getattr__(self, name: str) -> Any:
            return getattr(self._F, name)

        def RNN(self, data: Any, parameters: Any, state: Any, sequence_length: Any, **kw: Any):
            return self._F.RNN(data, parameters, state, sequence_length=sequence_length, **kw)

    class GRU(mx.gluon.rnn.GRU):
        def _forward_kernel(self, F, inputs, states, sequence_length, **kwargs):
            if sequence_length is not None and F is mx.sym:
                F = _KeywordRNN(F)
            return super()._forward_kernel(F, inputs, states, sequence_length, **kwargs)

    return GRU


def build_gru_tagger(
    use_sequence_length: bool = True,
    prefix: str = "gru_tagger_",
    sizes: tuple[int, int, int, int] = (VOCAB, EMBED, HIDDEN, TAGS),
) -> Any:
    """The tagger as a Gluon HybridBlock with seeded weights (not hybridized).
    forward(ids [N, T], lengths [N]) or forward(ids) -> tag scores [N, T, tags];
    sizes = (vocabulary, embedding, hidden, tags)."""
    vocab, embed, hidden, tags = sizes
    import mxnet as mx

    nn = mx.gluon.nn
    gru_class = _gru_class()

    class GruTagger(mx.gluon.HybridBlock):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            with self.name_scope():
                self.embed = nn.Embedding(vocab, embed)
                self.gru = gru_class(
                    hidden,
                    num_layers=2,
                    layout="NTC",
                    bidirectional=True,
                    input_size=embed,
                    use_sequence_length=use_sequence_length,
                )
                # Variational dropout: one mask per sentence, shared over time steps.
                self.dropout = nn.Dropout(0.2, axes=(1,))
                self.out = nn.Dense(tags, flatten=False, in_units=2 * hidden)

        def hybrid_forward(self, F, ids, lengths=None):
            h = self.embed(ids)
            h = self.gru(h, sequence_length=lengths) if use_sequence_length else self.gru(h)
            return self.out(self.dropout(h))

    block = GruTagger(prefix=prefix)
    _seed_parameters(block)
    return block


def build_gru_tagger_fixed() -> Any:
    """The tagger without sequence lengths: forward(ids [N, T]) -> [N, T, TAGS]."""
    return build_gru_tagger(use_sequence_length=False, prefix="gru_tagger_fixed_")


def build_mlp_dropout() -> Any:
    """forward(x [N, MLP_IN]) -> class probabilities [N, MLP_OUT]."""
    import mxnet as mx

    nn = mx.gluon.nn

    class MlpDropout(mx.gluon.HybridBlock):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            with self.name_scope():
                self.fc1 = nn.Dense(MLP_HIDDEN, in_units=MLP_IN)
                self.act = nn.Activation("relu")
                self.dropout = nn.Dropout(0.3)
                self.fc2 = nn.Dense(MLP_OUT, in_units=MLP_HIDDEN)
                self.leaky = nn.LeakyReLU(0.1)

        def hybrid_forward(self, F, x):
            h = self.leaky(self.fc2(self.dropout(self.act(self.fc1(x)))))
            return F.softmax(h, axis=-1)

    block = MlpDropout(prefix="mlp_dropout_")
    _seed_parameters(block)
    return block


def build_attention() -> Any:
    """Two-head scaled dot-product self-attention: forward(x [N, T, ATT_DIM]) -> [N, T, ATT_DIM].
    Heads are split and merged with Reshape codes 0, -1, -3, -4 and transpose, as GluonNLP does."""
    import mxnet as mx

    nn = mx.gluon.nn
    head_dim = ATT_DIM // ATT_HEADS

    class Attention(mx.gluon.HybridBlock):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            with self.name_scope():
                self.q = nn.Dense(ATT_DIM, flatten=False, in_units=ATT_DIM)
                self.k = nn.Dense(ATT_DIM, flatten=False, in_units=ATT_DIM)
                self.v = nn.Dense(ATT_DIM, flatten=False, in_units=ATT_DIM)
                self.dropout = nn.Dropout(0.1)
                self.out = nn.Dense(ATT_DIM, flatten=False, in_units=ATT_DIM)

        def hybrid_forward(self, F, x):
            def split_heads(h):
                # [N, T, H*d] -> [N, T, H, d] -> [N, H, T, d] -> [N*H, T, d]
                h = F.reshape(h, shape=(0, 0, ATT_HEADS, -1))
                return F.reshape(F.transpose(h, axes=(0, 2, 1, 3)), shape=(-3, 0, 0))

            q, k, v = split_heads(self.q(x)), split_heads(self.k(x)), split_heads(self.v(x))
            scores = F.batch_dot(q, k, transpose_b=True) / math.sqrt(head_dim)
            ctx = F.batch_dot(self.dropout(F.softmax(scores, axis=-1)), v)
            # [N*H, T, d] -> [N, H, T, d] -> [N, T, H, d] -> [N, T, H*d]
            ctx = F.reshape(ctx, shape=(-4, -1, ATT_HEADS, 0, 0))
            ctx = F.reshape(F.transpose(ctx, axes=(0, 2, 1, 3)), shape=(0, 0, -1))
            return self.out(ctx)

    block = Attention(prefix="attention_")
    _seed_parameters(block)
    return block


def _positive_variances(block: Any, seed: int = SEED) -> None:
    # A running variance seeded in [-0.3, 0.3] would normalize by the root of a negative.
    import mxnet as mx

    rng = np.random.default_rng(seed)
    for name, param in block.collect_params().items():
        if name.endswith("running_var"):
            param.set_data(mx.nd.array(rng.uniform(0.5, 1.5, size=param.shape)))


def build_deepspeech(
    *,
    freq: int = SPEECH_FREQ,
    channels: int = CHANNELS[0],
    hidden: int = RNN_HIDDEN,
    chars: int = CHARS,
    prefix: str = "deepspeech_",
) -> Any:
    """forward(spectrogram [N, 1, T, freq]) -> character probabilities [ceil(T / 2), N, chars]
    (time-major, as the GRU runs). The defaults are the fixture's sizes; `channels` is the
    convolution's, `hidden` each GRU direction's."""
    import mxnet as mx

    nn = mx.gluon.nn
    features = channels * (freq // 2)

    class DeepSpeech(mx.gluon.HybridBlock):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            with self.name_scope():
                self.conv = nn.Conv2D(
                    channels, (3, 3), strides=(2, 2), padding=(1, 1), in_channels=1
                )
                self.norm = nn.BatchNorm(in_channels=channels)
                self.gru = mx.gluon.rnn.GRU(
                    hidden, num_layers=2, bidirectional=True, input_size=features
                )
                self.out = nn.Dense(chars, flatten=False, in_units=2 * hidden)

        def hybrid_forward(self, F, audio):
            x = F.clip(self.norm(self.conv(audio)), 0, 20)  # [N, C, T', F'], hardtanh
            x = F.reshape(F.transpose(x, axes=(2, 0, 1, 3)), shape=(0, 0, -1))  # [T', N, C*F']
            return F.softmax(self.out(self.gru(x)), axis=-1)

    block = DeepSpeech(prefix=prefix)
    _seed_parameters(block)
    _positive_variances(block)
    return block


def build_crnn(
    *,
    channels: tuple[int, int] = CHANNELS,
    hidden: int = RNN_HIDDEN,
    chars: int = CHARS,
    prefix: str = "crnn_",
) -> Any:
    """forward(image [N, 1, LINE_HEIGHT, W]) -> the best character of each column pair
    [W / 2, N] (float32 indices). The defaults are the fixture's sizes; `channels` are the two
    convolutions', `hidden` each LSTM direction's."""
    import mxnet as mx

    nn = mx.gluon.nn

    class Crnn(mx.gluon.HybridBlock):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            with self.name_scope():
                self.conv1 = nn.Conv2D(channels[0], 3, padding=1, in_channels=1)
                self.conv2 = nn.Conv2D(channels[1], 3, padding=1, in_channels=channels[0])
                self.pool1 = nn.MaxPool2D(2, 2)
                self.pool2 = nn.MaxPool2D((2, 1), (2, 1))
                self.pool3 = nn.MaxPool2D((2, 1), (2, 1))
                self.lstm = mx.gluon.rnn.LSTM(hidden, bidirectional=True, input_size=channels[1])
                self.out = nn.Dense(chars, flatten=False, in_units=2 * hidden)

        def hybrid_forward(self, F, image):
            x = self.pool1(F.relu(self.conv1(image)))  # [N, C1, 4, W/2]
            x = self.pool3(self.pool2(F.relu(self.conv2(x))))  # [N, C2, 1, W/2]
            x = F.transpose(F.reshape(x, shape=(0, 0, -1)), axes=(2, 0, 1))  # [W/2, N, C2]
            return F.argmax(self.out(self.lstm(x)), axis=-1)

    block = Crnn(prefix=prefix)
    # Weights in [-1, 1]: at +-0.3 the LSTM's outputs stay within +-0.25 and the Dense's bias
    # decides every column alike, so that argmax would check nothing before it.
    _seed_parameters(block, scale=1.0)
    return block


BUILDERS = {
    "gru_tagger": build_gru_tagger,
    "gru_tagger_fixed": build_gru_tagger_fixed,
    "mlp_dropout": build_mlp_dropout,
    "attention": build_attention,
    "deepspeech": build_deepspeech,
    "crnn": build_crnn,
}


def sample_inputs(name: str, seed: int = 1) -> list[np.ndarray]:
    """Inputs for fixture `name` in the order of its exported inputs (data, or data0, data1):
    two sentences of 7 steps, the second of length 4 where the model takes lengths; two
    spectrograms of 12 frames; two line images 12 columns wide."""
    rng = np.random.default_rng(seed)
    if name in ("gru_tagger", "gru_tagger_fixed"):
        ids = rng.integers(0, VOCAB, size=(2, 7)).astype(np.float32)
        return [ids, np.array([7, 4], np.float32)] if name == "gru_tagger" else [ids]
    if name == "mlp_dropout":
        return [rng.standard_normal((3, MLP_IN)).astype(np.float32)]
    if name == "attention":
        return [rng.standard_normal((2, 5, ATT_DIM)).astype(np.float32)]
    if name == "deepspeech":
        return [rng.standard_normal((2, 1, 12, SPEECH_FREQ)).astype(np.float32)]
    if name == "crnn":
        return [rng.uniform(0, 1, (2, 1, LINE_HEIGHT, 12)).astype(np.float32)]
    raise KeyError(name)


def export_fixture(name: str, out_dir: str | os.PathLike) -> Path:
    """Builds fixture `name` (a BUILDERS key), hybridizes it, runs it once (export needs the
    traced graph) and writes OUT_DIR/name-symbol.json + name-0000.params; returns the prefix."""
    import mxnet as mx

    block = BUILDERS[name]()
    block.hybridize()
    block(*[mx.nd.array(a, dtype=a.dtype) for a in sample_inputs(name)])
    prefix = Path(out_dir) / name
    block.export(str(prefix), epoch=0)
    return prefix


def export_fixtures(out_dir: str | os.PathLike = DEFAULT_OUT_DIR) -> list[Path]:
    """Exports every fixture into out_dir; returns the prefixes written."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return [export_fixture(name, out_dir) for name in BUILDERS]


def describe(prefix: str | os.PathLike) -> str:
    """The op types (with counts), inputs and parameters (names, shapes) of an exported model."""
    import mxnet as mx

    with open(f"{prefix}-symbol.json") as f:
        graph = json.load(f)
    params = mx.nd.load(f"{prefix}-0000.params")
    ops = Counter(node["op"] for node in graph["nodes"] if node["op"] != "null")
    names = {name.split(":", 1)[1] for name in params}
    inputs = [
        graph["nodes"][i]["name"]
        for i in graph["arg_nodes"]
        if graph["nodes"][i]["name"] not in names
    ]
    lines = [f"{prefix}: inputs {inputs}"]
    lines.append("  ops: " + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())))
    lines += [f"  {name} {tuple(value.shape)}" for name, value in params.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for prefix in export_fixtures(args[0] if args else DEFAULT_OUT_DIR):
        print(describe(prefix))


if __name__ == "__main__":
    main()
