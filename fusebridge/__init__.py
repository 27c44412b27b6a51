"""fusebridge: fuse passes and compiled kernels for GRU- and dropout-heavy models."""

from importlib.metadata import PackageNotFoundError, version

from fusebridge import kernels
from fusebridge.errors import ArgumentError, ArgumentTypeError, Error

try:
    __version__ = version("fusebridge")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

__all__ = ["ArgumentError", "ArgumentTypeError", "Error", "__version__", "kernels"]
