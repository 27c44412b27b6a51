"""MXNet op -> ONNX ops, or fusebridge ops (RNN gru -> FusionGRU, Dropout): one module per family
of ops, each registering its converters in CONVERTERS (common.py). Importing the package
imports every family, so that the table is complete.

activation: Activation, relu, LeakyReLU, softmax, SoftmaxOutput, ... | dropout: Dropout |
elementwise: the binary, scalar and unary arithmetic ops | linear: FullyConnected, Embedding,
dot, batch_dot | rnn: RNN (gru) | sequence: SequenceMask, SequenceLast | shape: Concat,
Reshape, transpose, SwapAxis, expand_dims, Flatten, slice_axis | tensor: _zeros, _ones, _full
and the identities."""

from fusebridge.integrations.mxnet.converters import (  # noqa: F401
    activation,
    dropout,
    elementwise,
    linear,
    rnn,
    sequence,
    shape,
    tensor,
)
from fusebridge.integrations.mxnet.converters.common import CONVERTERS

__all__ = ["CONVERTERS"]
