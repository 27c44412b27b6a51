"""Frontends and back ends: one subpackage per framework. `load` picks the frontend by file."""

from __future__ import annotations

import os
from pathlib import Path

import onnx_ir as ir

from fusebridge.errors import ArgumentError
from fusebridge.integrations.onnx.save import save_onnx
from fusebridge.integrations.paddle.pir_program import is_pir_file


def load(path: str | os.PathLike, *, params: str | os.PathLike | None = None) -> ir.Model:
    """A model file as canonical IR: an ONNX file (.onnx; GRU and Dropout imported as our ops),
    an MXNet `prefix-symbol.json` (its .params beside it, or `params`), or a Paddle inference
    model: legacy (a directory with __model__ or *.pdmodel, a .pdmodel file) or Paddle 3 PIR
    (a directory with model.json, the .json file), or the prefix given to save_inference_model
    or paddle.jit.save. A .json file is told apart by its content."""
    p = Path(path)
    if p.suffix == ".json" and not is_pir_file(p):
        from fusebridge.integrations.mxnet.load import load_mxnet

        return load_mxnet(p, params)
    if params is not None:
        raise ArgumentError("load: params= is for MXNet symbol files (prefix-symbol.json)")
    if p.suffix == ".onnx":
        from fusebridge.integrations.onnx.load import load_onnx

        return load_onnx(p)
    from fusebridge.integrations.paddle.load import load_paddle

    return load_paddle(p)


__all__ = ["load", "save_onnx"]
