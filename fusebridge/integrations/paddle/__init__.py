"""Paddle: programs read without paddle (load.py, pir_program.py); with paddle installed, our
ops as Paddle custom operators (op_library.register) and as dygraph functions (functional.py),
imported when first used so that reading a model never imports paddle."""

from __future__ import annotations

from typing import Any

_LAZY = {
    "register": "fusebridge.integrations.paddle.op_library",
    "dropout": "fusebridge.integrations.paddle.functional",
    "softmax_dropout": "fusebridge.integrations.paddle.functional",
    "matmul_dropout": "fusebridge.integrations.paddle.functional",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
