"""The cuda engine: fusebridge.kernels' dropout family, fused dropouts and fused GRU on NVIDIA
GPUs, with the cpu engine's signatures (docs/cuda.md): the same bits for the dropouts, the
GRU within the arithmetic's bound.

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
from fusebridge.cuda.gru import CudaGRUWeights, GRUKernel, fusion_gru, pack_gru_weights
from fusebridge.cuda.sequence import crf_decoding, lod_to_padded, padded_to_lod

__all__ = [
    "CudaBuildError",
    "CudaGRUWeights",
    "CudaUnavailableError",
    "GRUKernel",
    "crf_decoding",
    "dropout",
    "dropout_backward",
    "dropout_mask",
    "fusion_gru",
    "is_available",
    "lod_to_padded",
    "matmul",
    "matmul_dropout",
    "matmul_dropout_backward",
    "pack_gru_weights",
    "padded_to_lod",
    "softmax",
    "softmax_dropout",
    "softmax_dropout_backward",
    "status",
]
