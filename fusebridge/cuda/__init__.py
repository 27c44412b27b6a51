"""The cuda engine: fusebridge.kernels' dropout family and fused dropouts on NVIDIA GPUs, with
the cpu engine's signatures and the same bits (docs/cuda.md).

Kernels are CUDA C++ compiled at run time by NVRTC for the device's own architecture
(build.py), launched through CuPy on its current stream; inputs are device arrays (CuPy, or
anything with __cuda_array_interface__ or __dlpack__), outputs CuPy arrays. Importing this
package needs neither a GPU nor CuPy: what is missing is named when a call needs it."""

from fusebridge.cuda.build import CudaBuildError, CudaUnavailableError
from fusebridge.cuda.device import is_available, status
from fusebridge.cuda.dropout import dropout, dropout_backward, dropout_mask
from fusebridge.cuda.fused_dropout import (
    matmul,
    matmul_dropout,
    matmul_dropout_backward,
    softmax,
    softmax_dropout,
    softmax_dropout_backward,
)

__all__ = [
    "CudaBuildError",
    "CudaUnavailableError",
    "dropout",
    "dropout_backward",
    "dropout_mask",
    "is_available",
    "matmul",
    "matmul_dropout",
    "matmul_dropout_backward",
    "softmax",
    "softmax_dropout",
    "softmax_dropout_backward",
    "status",
]
