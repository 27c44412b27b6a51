"""CRFDecoding: Viterbi decoding per LoD sentence (Paddle `crf_decoding`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge import kernels
from fusebridge.kernels import reference
from fusebridge.ops.common import OpDef, ReferenceOp, Run
from fusebridge.ops.schema import OpSchema


@dataclasses.dataclass(frozen=True)
class CRFDecodingAttributes:
    pass


CRF_DECODING_SCHEMA = OpSchema(
    "CRFDecoding",
    ("Emission", "offsets", "Transition", "Label?"),
    ("ViterbiPath",),
    (),
    "Viterbi decoding per LoD sentence (Paddle `crf_decoding`). Emission [words, tags], "
    "Transition [tags + 2, tags] (start row, end row, then from-to weights). "
    "ViterbiPath int64 [words, 1]: tags, or with Label 1 where the tag equals the label.",
    ("int64",),
    (2,),
    attributes_type=CRFDecodingAttributes,
)


def _cpu(node: ir.Node, attrs: CRFDecodingAttributes, constants: dict, reuse: bool) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        emission, offsets, transition, label = inputs
        return [kernels.crf_decoding(emission, transition, offsets, label)]

    return run


class CRFDecoding(ReferenceOp):
    schema = CRF_DECODING_SCHEMA

    def _run(self, emission, offsets, transition, label=None, **_):
        return (reference.crf_decoding(emission, transition, offsets, label),)


def lower(op, node: ir.Node) -> list[ir.Value]:
    from fusebridge.integrations.onnx import viterbi

    emission, offsets, transition, label = (list(node.inputs) + [None])[:4]
    return [viterbi.crf_decoding(op, emission, offsets, transition, label)]


OPS = (OpDef(CRF_DECODING_SCHEMA, _cpu, CRFDecoding, lower),)
