"""Paddle op -> ONNX ops (or fusebridge's): one module per family of ops, each registering its
converters in CONVERTERS (common.py); importing the package registers them all."""

from fusebridge.integrations.paddle.converters import (  # noqa: F401
    activation,
    grad,
    lstm,
    rnn,
    shape,
)
from fusebridge.integrations.paddle.converters.common import CONVERTERS, KEEPS_LOD

__all__ = ["CONVERTERS", "KEEPS_LOD"]
