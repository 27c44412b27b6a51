"""The compiled kernels' Python face: descriptors, primitives, caches, settings."""

from fusebridge.kernels.blas import sgemm
from fusebridge.kernels.core import (
    available_extensions,
    available_isas,
    blas_info,
    extensions,
    get_num_threads,
    isa,
    set_extensions,
    set_isa,
    set_num_threads,
    thread_cap,
)
from fusebridge.kernels.crf_decoding import crf_decoding
from fusebridge.kernels.dropout import (
    DropoutDescriptor,
    dropout,
    dropout_backward,
    dropout_mask,
)
from fusebridge.kernels.fused_dropout import (
    MatmulDropoutDescriptor,
    SoftmaxDropoutDescriptor,
    matmul,
    matmul_dropout,
    matmul_dropout_backward,
    softmax,
    softmax_dropout,
    softmax_dropout_backward,
)
from fusebridge.kernels.gru import GRUDescriptor, GRUKernel, QGRUDescriptor, fusion_gru
from fusebridge.kernels.gru_origin_mode import negate_update_gate
from fusebridge.kernels.gru_weights import GRUWeights, pack_gru_weights
from fusebridge.kernels.philox import philox4x32
from fusebridge.kernels.primitive_cache import cache_stats, set_cache_capacity
from fusebridge.kernels.qgru_weights import (
    QGRUWeights,
    QuantizedGRUWeights,
    pack_qgru_weights,
    quantize_gru_weights,
)
from fusebridge.kernels.sequence_layout import lod_to_padded, padded_to_lod
from fusebridge.kernels.sequence_pool import sequence_pool

__all__ = [
    "DropoutDescriptor",
    "GRUDescriptor",
    "GRUKernel",
    "GRUWeights",
    "MatmulDropoutDescriptor",
    "QGRUDescriptor",
    "QGRUWeights",
    "QuantizedGRUWeights",
    "SoftmaxDropoutDescriptor",
    "available_extensions",
    "available_isas",
    "blas_info",
    "cache_stats",
    "crf_decoding",
    "dropout",
    "dropout_backward",
    "dropout_mask",
    "extensions",
    "fusion_gru",
    "get_num_threads",
    "isa",
    "lod_to_padded",
    "matmul",
    "matmul_dropout",
    "matmul_dropout_backward",
    "negate_update_gate",
    "pack_gru_weights",
    "pack_qgru_weights",
    "padded_to_lod",
    "philox4x32",
    "quantize_gru_weights",
    "sequence_pool",
    "set_cache_capacity",
    "set_extensions",
    "set_isa",
    "set_num_threads",
    "sgemm",
    "softmax",
    "softmax_dropout",
    "softmax_dropout_backward",
    "thread_cap",
]
