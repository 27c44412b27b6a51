"""fusebridge: fuse passes and compiled kernels for GRU- and dropout-heavy models."""

from importlib.metadata import PackageNotFoundError, version

from fusebridge import conventions, kernels, ops, random
from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    CoreImportError,
    Error,
    ExecutionError,
    ModelFormatError,
    UnsupportedOpError,
)
from fusebridge.fuse_passes import OptimizeReport, optimize
from fusebridge.integrations import load, save_onnx
from fusebridge.integrations.mxnet.save import save_mxnet
from fusebridge.integrations.paddle.save import save_paddle
from fusebridge.lod_tensor import LoDTensor
from fusebridge.runtime import Session

try:
    __version__ = version("fusebridge")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "CoreImportError",
    "Error",
    "ExecutionError",
    "LoDTensor",
    "ModelFormatError",
    "OptimizeReport",
    "Session",
    "UnsupportedOpError",
    "__version__",
    "conventions",
    "kernels",
    "load",
    "ops",
    "optimize",
    "random",
    "save_mxnet",
    "save_onnx",
    "save_paddle",
]
