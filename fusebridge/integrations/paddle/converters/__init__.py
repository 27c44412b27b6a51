"""Paddle op -> ONNX ops, or fusebridge ops where ONNX has no equivalent: one module per family
of ops, each registering its converters in CONVERTERS (common.py). Importing the package
imports every family, so that the table is complete.

activation: relu, gelu, softmax, brelu, ... (one ONNX op, or its formula) | compare:
less_than, equal, ... (a table) | conv: conv2d, depthwise_conv2d, pool2d | crf: crf_decoding |
dropout: dropout | grad: the *_grad ops of a training program | gru: gru, fusion_gru |
indexing: lookup_table, gather, gather_nd, arg_max | lstm: the legacy LoD lstm | math:
elementwise ops (a table), scale, sum, mean, mul, fc, matmul | normalization: layer_norm,
batch_norm | reduce: reduce_sum, reduce_max, ... (a table) | rnn: Paddle 3's padded rnn |
sequence: lod_reset, sequence_pool | shape: concat, stack, split, slice, reshape2, transpose2,
shape, squeeze2, unsqueeze2, flatten_contiguous_range | tensor: fill_constant, fill_any_like,
range, assign_value, assign, cast."""

from fusebridge.integrations.paddle.converters import (  # noqa: F401
    activation,
    compare,
    conv,
    crf,
    dropout,
    grad,
    gru,
    indexing,
    lstm,
    math,
    normalization,
    reduce,
    rnn,
    sequence,
    shape,
    tensor,
)
from fusebridge.integrations.paddle.converters.common import CONVERTERS

__all__ = ["CONVERTERS"]
