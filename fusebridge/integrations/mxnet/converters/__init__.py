"""MXNet op -> ONNX ops (or fusebridge's): one module per family of ops, each registering its
converters in CONVERTERS (common.py); importing the package registers them all."""

from fusebridge.integrations.mxnet.converters.common import CONVERTERS

__all__ = ["CONVERTERS"]
