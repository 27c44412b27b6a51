"""LoDToPadded and PaddedToLoD: the explicit reorders between LoD words and right-padded
batches, used around padded recurrences (the portable ONNX export)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge import kernels
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_layout import as_offsets
from fusebridge.ops.common import OpDef, ReferenceOp, Run
from fusebridge.ops.schema import Attribute, OpSchema

PADDED_LAYOUTS = ("tnc", "ntc")


@dataclasses.dataclass(frozen=True)
class ReorderAttributes:
    layout: str = "tnc"


_LAYOUT = Attribute("layout", "tnc", PADDED_LAYOUTS, "the padded layout")
LOD_TO_PADDED_SCHEMA = OpSchema(
    "LoDToPadded",
    ("X", "offsets"),
    ("Padded",),
    (_LAYOUT,),
    "LoD words [words, C...] to right-padded [T, N, C...] (tnc) or [N, T, C...] (ntc), "
    "T the longest sentence, zeros after each sentence. Used around padded recurrences "
    "(the portable ONNX export).",
    output_ranks=("X+1",),
    attributes_type=ReorderAttributes,
)
PADDED_TO_LOD_SCHEMA = OpSchema(
    "PaddedToLoD",
    ("Padded", "offsets"),
    ("Y",),
    (_LAYOUT,),
    "The inverse of LoDToPadded: each sentence's real steps stacked into [words, C...]. "
    "The pass cancel_reorders removes a PaddedToLoD -> LoDToPadded pair over the same "
    "offsets (between stacked GRUs).",
    output_ranks=("X-1",),
    attributes_type=ReorderAttributes,
)


def _to_padded_cpu(node: ir.Node, attrs: ReorderAttributes, constants: dict, reuse: bool) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [kernels.lod_to_padded(inputs[0], inputs[1], attrs.layout)[0]]

    return run


def _to_lod_cpu(node: ir.Node, attrs: ReorderAttributes, constants: dict, reuse: bool) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        padded, offsets = inputs
        # No data array here says how many words the offsets split: their own last entry does
        # (padded_to_lod checks each length against the padded steps).
        arr = np.asarray(offsets)
        words = int(arr[-1]) if arr.ndim == 1 and arr.size and arr.dtype.kind in "iu" else 0
        lengths = np.diff(as_offsets(arr, "padded_to_lod", words))
        return [kernels.padded_to_lod(padded, lengths, attrs.layout)[0]]

    return run


class LoDToPadded(ReferenceOp):
    schema = LOD_TO_PADDED_SCHEMA

    def _run(self, x, offsets, **_):
        return (reference.lod_to_padded(x, offsets, self.attrs().layout)[0],)


class PaddedToLoD(ReferenceOp):
    schema = PADDED_TO_LOD_SCHEMA

    def _run(self, padded, offsets, **_):
        return (reference.padded_to_lod(padded, offsets, self.attrs().layout),)


def _lower_to_padded(op, node: ir.Node) -> list[ir.Value]:
    from fusebridge.integrations.onnx import standard_ops

    layout = LOD_TO_PADDED_SCHEMA.parse(node).layout
    return [standard_ops.lod_to_padded(op, node.inputs[0], node.inputs[1], layout)]


def _lower_to_lod(op, node: ir.Node) -> list[ir.Value]:
    from fusebridge.integrations.onnx import standard_ops

    layout = PADDED_TO_LOD_SCHEMA.parse(node).layout
    return [standard_ops.padded_to_lod(op, node.inputs[0], node.inputs[1], layout)]


OPS = (
    OpDef(LOD_TO_PADDED_SCHEMA, _to_padded_cpu, LoDToPadded, _lower_to_padded),
    OpDef(PADDED_TO_LOD_SCHEMA, _to_lod_cpu, PaddedToLoD, _lower_to_lod),
)
