"""Frontends and back ends: one subpackage per framework. `load` picks the frontend by file."""

from __future__ import annotations

import os
from pathlib import Path

import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge.errors import ArgumentError, ModelFormatError


def load(path: str | os.PathLike) -> ir.Model:
    """A model file as canonical IR: an ONNX file (.onnx), or a Paddle inference model (a
    directory with __model__ or *.pdmodel, a .pdmodel file, or a save_inference_model prefix)."""
    p = Path(path)
    if p.suffix == ".onnx":
        if not p.is_file():
            raise ArgumentError(f"load: no such ONNX file {str(p)!r}")
        try:
            return ir.load(p)
        except Exception as exc:  # onnx raises DecodeError and others
            raise ModelFormatError(f"load: {str(p)!r} is not a readable ONNX model: {exc}") from exc
    from fusebridge.integrations.paddle.load import load_paddle

    return load_paddle(p)


def save_onnx(model: ir.Model, path: str | os.PathLike) -> None:
    """Writes `model` as one .onnx file (fusebridge-domain ops included, weights inline)."""
    model.opset_imports.update(fir.opset_imports())
    model.ir_version = fir.IR_VERSION
    ir.save(model, os.fspath(path))
