"""recompute_dropout_mask: a training graph stops keeping dropout masks from its forward to its
backward pass; the backward recomputes the bits from the forward's (seed, offset).

A training dropout that writes a mask (Dropout, MatMulDropout, SoftmaxDropout: any fusebridge
op with a `mask?` output and seed?/offset? inputs) whose mask only backward ops read
(DropoutGrad, SoftmaxDropoutGrad) loses that output, and those take the forward's seed and
offset instead. Element i of the dropout's output draws from (seed, offset, i) in both passes
(docs/dropout.md, "The bit contract"), and dY has the output's shape, so the gradients are
bit for bit those from the stored mask. Saved: the mask, numel/8 bytes per dropout, for as
long as the forward's results wait for the backward. Paid: the Philox draws a second time
(docs/dropout.md).

Run it after explicit_rng (a dropout without a seed input has no bits to recompute) and after
the training fusions (the fused ops' masks are recomputed the same way).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.fuse_passes.passes import FusePass
from fusebridge.fuse_passes.report import PassReport
from fusebridge.graph.checks import check_graph


@dataclasses.dataclass(frozen=True)
class RecomputeReport:
    recomputed: tuple[str, ...]  # forward nodes that no longer write their mask
    refused: tuple[tuple[str, str], ...]  # (forward node, why its mask stays)

    def text(self) -> str:
        lines = [f"recompute_dropout_mask: {len(self.recomputed)} mask(s) recomputed"]
        lines += [f"  {name!r}: recomputed in its backward" for name in self.recomputed]
        lines += [f"  {name!r}: kept, {why}" for name, why in self.refused]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _plain(value: object) -> object:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _mask_output(node: ir.Node) -> ir.Value | None:
    """The mask a training dropout writes and someone reads, or None."""
    if not conventions.is_fusebridge(node) or node.op_type not in ops.SCHEMAS:
        return None
    schema = ops.SCHEMAS[node.op_type]
    if "mask?" not in schema.outputs or not {"seed?", "offset?"} <= set(schema.inputs):
        return None
    k = schema.outputs.index("mask?")
    mask = node.outputs[k] if k < len(node.outputs) else None
    return mask if mask is not None and (mask.uses() or mask.is_graph_output()) else None


def _mask_slot(node: ir.Node) -> int | None:
    """Where a dropout backward (DropoutGrad, SoftmaxDropoutGrad: mask?, seed? and offset?
    inputs, no mask output) takes the mask; seed and offset follow it."""
    schema = ops.SCHEMAS.get(node.op_type) if conventions.is_fusebridge(node) else None
    if schema is None or "mask?" in schema.outputs:
        return None
    if not {"mask?", "seed?", "offset?"} <= set(schema.inputs):
        return None
    return schema.inputs.index("mask?")


def _refusal(node: ir.Node, mask: ir.Value) -> str | None:
    schema = ops.SCHEMAS[node.op_type]
    if mask.is_graph_output():
        return "the mask is a graph output"
    readers = {u.node for u in mask.uses()}
    others = sorted(f"{n.op_type} {n.name!r}" for n in readers if _mask_slot(n) is None)
    if others:
        return f"the mask is also read by {others}"
    seed_slot = schema.inputs.index("seed?")
    if seed_slot >= len(node.inputs) or node.inputs[seed_slot] is None:
        return "no seed input (run explicit_rng first)"
    if schema.outputs.index("mask?") != len(node.outputs) - 1:
        return "the mask is not the last output"
    forward = schema.attribute_values(node)
    for grad in readers:
        k = _mask_slot(grad)
        if grad.inputs[k] is not mask or (len(grad.inputs) > k + 1 and grad.inputs[k + 1]):
            return f"{grad.op_type} {grad.name!r} reads the mask in another slot or has a seed"
        wanted = ops.SCHEMAS[grad.op_type].attribute_values(grad)
        # A fused forward shares no mask axes: its `axes` are ().
        differ = [a for a in wanted if _plain(forward.get(a, ())) != _plain(wanted[a])]
        if differ:
            return f"{grad.op_type} {grad.name!r} has other {differ} than the forward"
    return None


def recompute_dropout_mask(model: ir.Model) -> RecomputeReport:
    """Rewrites `model` in place (subgraphs included); running it twice changes nothing."""
    check_graph(model.graph, "recompute_dropout_mask")
    recomputed, refused = [], []
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        mask = _mask_output(node)
        if mask is None:
            continue
        why = _refusal(node, mask)
        if why:
            refused.append((node.name or node.op_type, why))
            continue
        schema = ops.SCHEMAS[node.op_type]
        seed = node.inputs[schema.inputs.index("seed?")]
        offset_slot = schema.inputs.index("offset?")
        offset = node.inputs[offset_slot] if offset_slot < len(node.inputs) else None
        for use in list(mask.uses()):
            grad, k = use.node, _mask_slot(use.node)
            grad.resize_inputs(k + 3)
            grad.replace_input_with(k, None)
            grad.replace_input_with(k + 1, seed)
            grad.replace_input_with(k + 2, offset)
        node.resize_outputs(len(node.outputs) - 1)
        recomputed.append(node.name or node.op_type)
    return RecomputeReport(tuple(recomputed), tuple(refused))


class RecomputeDropoutMask(FusePass):
    """recompute_dropout_mask as a pass of a pipeline."""

    name = "recompute_dropout_mask"
    runs_after: ClassVar[dict[str, str]] = {
        "explicit_rng": "a dropout without a seed input has no bits to recompute",
        "softmax_dropout_training": "it fuses a softmax backward whose DropoutGrad reads the mask",
    }

    def run(self, model: ir.Model) -> PassReport:
        report = recompute_dropout_mask(model)
        notes = tuple(f"{name!r}: recomputed in its backward" for name in report.recomputed)
        return PassReport(
            self.name, bool(report.recomputed), len(report.recomputed), report.refused, notes
        )
