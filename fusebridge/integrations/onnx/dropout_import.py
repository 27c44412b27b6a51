"""ONNX Dropout -> our Dropout, for the import_dropout pass."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.graph.builder import OpBuilder
from fusebridge.integrations.onnx.import_passes import constant, is_used, where
from fusebridge.kernels.arguments import is_probability


def _scalar(node: ir.Node, value: ir.Value | None, what: str, kind: type) -> object | None:
    """A one-element constant input of the numpy kind `kind`, as a numpy scalar."""
    array = constant(node, value, what)
    if array is None:
        return None
    if array.size != 1 or not np.issubdtype(array.dtype, kind):
        raise ModelFormatError(
            f"{where(node)}: input {what} {value.name!r} is {array.dtype} {list(array.shape)}, "
            f"expected a {np.dtype(kind).name if kind is np.bool_ else 'float'} scalar"
        )
    return array.reshape(-1)[0]


def import_dropout(op: OpBuilder, node: ir.Node) -> list[ir.Value | None]:
    """ONNX Dropout(data, ratio, training_mode) -> Dropout(p, is_test). The seed attribute
    becomes the seed input; without it the dropout draws from no explicit key (the explicit_rng
    pass gives it one). A used mask output (bool, one byte an element) keeps the ONNX op
    (UnsupportedOpError: the pass records the refusal)."""
    if is_used(node.outputs[1] if len(node.outputs) > 1 else None):
        raise UnsupportedOpError(
            f"{where(node)}: its mask output is read; our Dropout keeps its mask packed"
        )
    inputs = list(node.inputs) + [None, None]
    ratio = _scalar(node, inputs[1], "ratio", np.floating)
    training = _scalar(node, inputs[2], "training_mode", np.bool_)
    p = 0.5 if ratio is None else float(ratio)
    if not is_probability(p):
        raise ModelFormatError(f"{where(node)}: ratio {p}, expected a probability in [0, 1]")
    is_test = 0 if training is not None and bool(training) else 1
    seed = node.attributes.get("seed")
    seed_v = None
    if seed is not None and not is_test:
        # An int by the spec; a float from some exporters (an in-memory model: a file's types
        # are checked already).
        value = seed.value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and -(2**63) <= value < 2**63)
        ):
            raise ModelFormatError(
                f"{where(node)}: attribute seed = {value!r}, expected an int64 value"
            )
        seed_v = op.const(np.array([int(value)], np.int64), "seed")
    y = op.Dropout(
        inputs[0], seed_v, _domain=conventions.DOMAIN, _name=node.name, p=p, is_test=is_test
    )
    return [y]
