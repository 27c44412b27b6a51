"""MXNet op -> ONNX ops, or fusebridge ops (RNN gru -> FusionGRU, Dropout): one module per family
of ops, each registering its converters in CONVERTERS (common.py). Importing the package
imports every family, so that the table is complete.

activation: Activation, relu, LeakyReLU, clip, softmax, SoftmaxOutput, ... | conv: Convolution,
Pooling | dropout: Dropout | elementwise: the binary, scalar and unary arithmetic ops | linear:
FullyConnected, Embedding, dot, batch_dot | normalization: BatchNorm | reduce: sum, mean, max,
min, prod, argmax | rnn: RNN (gru, lstm, rnn_tanh, rnn_relu) | sequence: SequenceMask,
SequenceLast | shape: Concat, Reshape, transpose, SwapAxis, expand_dims, Flatten, slice_axis |
tensor: _zeros, _ones, _full and the identities."""

from fusebridge.integrations.mxnet.converters import (  # noqa: F401
    activation,
    conv,
    dropout,
    elementwise,
    linear,
    normalization,
    reduce,
    rnn,
    sequence,
    shape,
    tensor,
)
from fusebridge.integrations.mxnet.converters.common import CONVERTERS

__all__ = ["CONVERTERS"]
