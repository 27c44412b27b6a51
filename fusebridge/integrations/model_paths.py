"""Paths that model files name (ONNX external data locations, Paddle per-variable parameter
files): each must stay inside the model's directory, symlinks resolved, so that no model can
make fusebridge read a file the user did not give."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from fusebridge.errors import ModelFormatError


def file_inside(name: str, base: Path, where: str, what: str = "location") -> Path:
    """The file `name` (relative, from a model file) names inside `base`, a resolved directory.
    `where` and `what` name the tensor and the field in messages."""
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ModelFormatError(f"{where}: {what} {name!r}, expected a file name")
    posix, native = PurePosixPath(name), Path(name)
    if posix.is_absolute() or native.is_absolute() or native.drive:
        raise ModelFormatError(
            f"{where}: {what} {name!r} is absolute, expected a path relative to the "
            "model's directory"
        )
    if ".." in posix.parts or ".." in native.parts:
        raise ModelFormatError(
            f"{where}: {what} {name!r} contains '..', expected a path inside the model's directory"
        )
    path = Path(os.path.realpath(base / native))
    if base != path and base not in path.parents:
        raise ModelFormatError(
            f"{where}: {what} {name!r} resolves (through a symlink) to {str(path)!r}, "
            f"outside the model's directory {str(base)!r}"
        )
    return path
