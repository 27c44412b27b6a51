"""save_mxnet's emitters: one module per family of IR ops, each registering in WRITERS
(common.py) how an op is written as MXNet nodes. Importing the package imports every family,
so that the table is complete.

fusebridge_ops: FusionGRU, Dropout, SequenceLengths | math: elementwise ops, activations,
Cast, Clip, MatMul | shape: Reshape, Transpose, Slice, Gather, ... and the shapes computed at
run time."""

from fusebridge.integrations.mxnet.emitters import fusebridge_ops, math, shape  # noqa: F401
from fusebridge.integrations.mxnet.emitters.common import WRITERS

__all__ = ["WRITERS"]
