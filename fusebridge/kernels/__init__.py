"""The compiled kernels' Python face: descriptors, primitives, caches, settings."""

from fusebridge.kernels.blas import sgemm
from fusebridge.kernels.core import (
    available_isas,
    blas_info,
    get_num_threads,
    isa,
    set_isa,
    set_num_threads,
)
from fusebridge.kernels.dropout import (
    DropoutDescriptor,
    dropout,
    dropout_backward,
    dropout_mask,
)
from fusebridge.kernels.philox import philox4x32
from fusebridge.kernels.primitive_cache import cache_stats, set_cache_capacity

__all__ = [
    "DropoutDescriptor",
    "available_isas",
    "blas_info",
    "cache_stats",
    "dropout",
    "dropout_backward",
    "dropout_mask",
    "get_num_threads",
    "isa",
    "philox4x32",
    "set_cache_capacity",
    "set_isa",
    "set_num_threads",
    "sgemm",
]
