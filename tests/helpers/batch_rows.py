"""Rows for the batch tests, and the oracle they are checked against: a Session run on one row
alone (placement="kernels", as BatchModel fixes it)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa

import fusebridge
from fusebridge.models import assets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "onnx"
TAGGER = assets.path("tagger")
SENTIMENT = assets.path("sentiment")
# torch exports: a padded input with its lengths input; a padded input without lengths
SPEECH = FIXTURES / "shipped" / "speech_torch_opset12_lengths.onnx"
BIGRU = FIXTURES / "torch_bigru_2layer.onnx"


def sentences(count: int, seed: int, longest: int = 40) -> list[list[int]]:
    """Word ids the bundled models embed (0..99), 1..longest words a sentence."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 100, n).tolist() for n in rng.integers(1, longest + 1, count)]


def frames(count: int, seed: int, width: int, longest: int = 9) -> list[np.ndarray]:
    """Feature frames [steps, width] a row, 1..longest steps."""
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((n, width)).astype(np.float32)
        for n in rng.integers(1, longest + 1, count)
    ]


def words_table(rows: list[list[int]]) -> pa.Table:
    return pa.table(
        {
            "id": np.arange(len(rows)),
            "note": [f"row {i}" for i in range(len(rows))],
            "words": pa.array(rows, pa.list_(pa.int64())),
        }
    )


def frames_column(rows: list[np.ndarray]) -> pa.Array:
    width = rows[0].shape[1]
    return pa.array([r.tolist() for r in rows], pa.list_(pa.list_(pa.float32(), width)))


@cache
def oracle(path: Path) -> fusebridge.Session:
    optimized, _ = fusebridge.optimize(fusebridge.load(path))
    return fusebridge.Session(optimized, placement="kernels")


def alone(path: Path, words: list[int]) -> dict[str, np.ndarray]:
    """A LoD model's outputs for one sentence run alone, each as one row's array."""
    feeds = {"words": fusebridge.LoDTensor(np.array(words, np.int64).reshape(-1, 1), [len(words)])}
    out = oracle(path).run(feeds)
    return {
        n: v.data.reshape(len(v.data), -1).squeeze(-1)
        if isinstance(v, fusebridge.LoDTensor)
        else v[0]
        for n, v in out.items()
    }


def speech_alone(frames_of_row: np.ndarray) -> np.ndarray:
    """The speech model's mask for one row alone: padded to 2 steps at least (MIN_STEPS)."""
    steps, width = frames_of_row.shape
    x = np.zeros((1, max(steps, 2), width), np.float32)
    x[0, :steps] = frames_of_row
    return oracle(SPEECH).run({"x": x, "lengths": np.array([steps])})["mask"][0, :steps]


def bigru_alone(frames_of_row: np.ndarray) -> dict[str, np.ndarray]:
    """The padded GRU without lengths, one row alone at its own length: y [steps, 32] and
    hn [4, 16]."""
    out = oracle(BIGRU).run({"x": frames_of_row[None]})
    return {"y": out["y"][0], "hn": out["hn"][:, 0]}
