"""The bundled example models (saved by build_assets.py with random weights)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

NAMES = ("tagger", "sentiment")


def path(name: str) -> Path:
    """The directory of bundled model `name` (inference.pdmodel, inference.pdiparams, and an
    example input: example_words.npy with example_lengths.txt)."""
    if name not in NAMES:
        raise ValueError(f"bundled models are {NAMES}, not {name!r}")
    return Path(str(files("fusebridge.models") / "assets" / name))
