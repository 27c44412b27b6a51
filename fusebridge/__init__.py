"""fusebridge: fuse passes and compiled kernels for GRU- and dropout-heavy models."""

from fusebridge import conventions, kernels, ops, random
from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    CoreImportError,
    Error,
    ExecutionError,
    MissingDependencyError,
    ModelFormatError,
    UnsupportedOpError,
)
from fusebridge.fuse_passes import OptimizeReport, optimize
from fusebridge.integrations import load, save_onnx
from fusebridge.integrations.mxnet.save import save_mxnet
from fusebridge.integrations.paddle.save import save_paddle
from fusebridge.lod_tensor import LoDTensor
from fusebridge.runtime import Session

__version__ = conventions.PACKAGE_VERSION

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "CoreImportError",
    "Error",
    "ExecutionError",
    "LoDTensor",
    "MissingDependencyError",
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
