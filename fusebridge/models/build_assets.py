"""Writes the example Paddle models and their example inputs under fusebridge/models/assets/:

    python -m fusebridge.models.build_assets [ROOT]

Each of ROOT/tagger and ROOT/sentiment holds inference.pdmodel + inference.pdiparams (legacy
format, combined, clip_extra=False so that Paddle Inference can run them), example_words.npy
(int64 [words, 1]) and example_lengths.txt (the sentence lengths). The script is deterministic:
rerunning it rewrites the same bytes (tests/models/test_paddle_models.py checks).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from fusebridge.models import paddle_models

ASSETS_DIR = Path(__file__).resolve().parent / "assets"

# 16 sentences of 3..40 words, not sorted: runtimes that batch by length must reorder.
EXAMPLE_LENGTHS = [12, 3, 40, 7, 25, 18, 33, 5, 21, 9, 37, 14, 28, 4, 30, 16]
EXAMPLE_SEED = 0


def build_assets(root: str | os.PathLike = ASSETS_DIR) -> list[Path]:
    """Builds both models with their default sizes, saves them and the example inputs under
    root; returns the files written."""
    root = Path(root)
    written: list[Path] = []
    for model in (paddle_models.build_tagger(), paddle_models.build_sentiment()):
        out = root / model.name
        paddle_models.save_model(model, out, combined=True, clip_extra=False)
        words, lengths = paddle_models.example_feed(
            model.config["vocab_size"], EXAMPLE_LENGTHS, EXAMPLE_SEED
        )
        # The last word of the first sentence is the padding id 0, so that the sentiment
        # model's padding_idx (a zero embedding row) is exercised by the example.
        words[lengths[0] - 1, 0] = 0
        np.save(out / "example_words.npy", words)
        (out / "example_lengths.txt").write_text(" ".join(map(str, lengths)) + "\n")
        written += [
            out / paddle_models.COMBINED_MODEL,
            out / paddle_models.COMBINED_PARAMS,
            out / "example_words.npy",
            out / "example_lengths.txt",
        ]
    return written


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for path in build_assets(args[0] if args else ASSETS_DIR):
        print(f"{path} {path.stat().st_size}")


if __name__ == "__main__":
    main()
