"""The Paddle 3 benchmark tagger: Embedding (5000 words x 128) + 2-layer bidirectional nn.GRU
(hidden 128, with sequence_length) + Dropout + Linear (20 tags), weights from a seeded NumPy
generator, saved by paddle.jit.save with PIR on (model.json + model.pdiparams). Inputs: ids
int64 [N, T] right-padded with zeros, lens int64 [N]. With lengths=False the GRU gets no
sequence_length and the model takes ids alone: every sentence runs all T steps, padding included
(the configuration issue 41 measured: 16 sentences padded to 60).

Paddle reads FLAGS_enable_pir_api at its first import, and the benchmark process must not
import it: save() runs `python benchmarks/paddle3_tagger.py PREFIX` in a child with the flag on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

VOCAB, EMBED, HIDDEN, LAYERS, TAGS = 5000, 128, 128, 2, 20
SEED = 0


def save(directory: Path, lengths: bool = True) -> Path:
    """Saves the tagger into `directory` (in a child process); returns its model.json."""
    prefix = Path(directory) / "model"
    env = {**os.environ, "FLAGS_enable_pir_api": "1", "GLOG_minloglevel": "3"}
    argv = [sys.executable, __file__, str(prefix)] + ([] if lengths else ["--no-lengths"])
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"saving the Paddle 3 tagger failed:\n{done.stderr.strip()}")
    return prefix.with_suffix(".json")


def _save_here(prefix: str, lengths: bool) -> None:
    import paddle

    nn = paddle.nn

    class Tagger(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.rnn = nn.GRU(EMBED, HIDDEN, num_layers=LAYERS, direction="bidirect")
            self.drop = nn.Dropout(0.2)
            self.out = nn.Linear(2 * HIDDEN, TAGS)

        def forward(self, ids, lens=None):
            y, _ = self.rnn(self.embed(ids), sequence_length=lens)
            return self.out(self.drop(y))

    layer = Tagger()
    layer.eval()
    rng = np.random.default_rng(SEED)
    for param in layer.parameters():
        param.set_value(rng.uniform(-0.1, 0.1, size=param.shape).astype(np.float32))
    specs = [paddle.static.InputSpec([None, None], "int64", "ids")]
    if lengths:
        specs.append(paddle.static.InputSpec([None], "int64", "lens"))
    paddle.jit.save(layer, prefix, input_spec=specs)


if __name__ == "__main__":
    _save_here(sys.argv[1], "--no-lengths" not in sys.argv[2:])
