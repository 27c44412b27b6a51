"""Frontends and back ends: one subpackage per framework. `load` picks the frontend by file."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
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
    """Writes `model` as one .onnx file (fusebridge-domain ops included, weights inline); the
    model itself is left as it is."""
    proto = ir.to_proto(model)
    domains = {o.domain for o in proto.opset_import}
    for domain, version in fir.opset_imports().items():
        if domain not in domains:
            proto.opset_import.add(domain=domain, version=version)
    onnx.save(proto, os.fspath(path))
