"""recompute_dropout_mask: a training graph stops keeping dropout masks from its forward to its
backward pass; the backward recomputes the bits from the forward's (seed, offset).

A training dropout that writes a mask (Dropout, MatMulDropout, SoftmaxDropout: any fusebridge
op with a `mask?` output and seed?/offset? inputs) whose mask only DropoutGrad nodes read loses
that output, and those DropoutGrad nodes take the forward's seed and offset instead. Element i
of the dropout's output draws from (seed, offset, i) in both passes (shared/reference/rng.md),
and dY has the output's shape, so the gradients are bit for bit those from the stored mask.
Saved: the mask, numel/8 bytes per dropout, for as long as the forward's results wait for the
backward. Paid: the Philox draws a second time (docs/dropout.md).

Run it after explicit_rng (a dropout without a seed input has no bits to recompute) and after
the training fusions (the fused ops' masks are recomputed the same way).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from fusebridge import ir as fir

_GRAD_ATTRIBUTES = ("p", "mode", "axes")


@dataclasses.dataclass(frozen=True)
class RecomputeReport:
    recomputed: tuple[str, ...]  # forward nodes that no longer write their mask
    refused: tuple[tuple[str, str], ...]  # (forward node, why its mask stays)

    def text(self) -> str:
        lines = [f"recompute_dropout_mask: {len(self.recomputed)} mask(s) recomputed"]
        lines += [f"  {name!r}: recomputed in its DropoutGrad" for name in self.recomputed]
        lines += [f"  {name!r}: kept, {why}" for name, why in self.refused]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _plain(value: object) -> object:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _mask_output(node: ir.Node) -> ir.Value | None:
    """The mask a training dropout writes and someone reads, or None."""
    if not fir.is_fusebridge(node) or node.op_type not in fir.SCHEMAS:
        return None
    schema = fir.SCHEMAS[node.op_type]
    if "mask?" not in schema.outputs or not {"seed?", "offset?"} <= set(schema.inputs):
        return None
    k = schema.outputs.index("mask?")
    mask = node.outputs[k] if k < len(node.outputs) else None
    return mask if mask is not None and (mask.uses() or mask.is_graph_output()) else None


def _refusal(node: ir.Node, mask: ir.Value) -> str | None:
    schema = fir.SCHEMAS[node.op_type]
    if mask.is_graph_output():
        return "the mask is a graph output"
    readers = {u.node for u in mask.uses()}
    others = sorted(f"{n.op_type} {n.name!r}" for n in readers if n.op_type != "DropoutGrad")
    if others or any(not fir.is_fusebridge(n) for n in readers):
        return f"the mask is also read by {others}"
    seed_slot = schema.inputs.index("seed?")
    if seed_slot >= len(node.inputs) or node.inputs[seed_slot] is None:
        return "no seed input (run explicit_rng first)"
    if schema.outputs.index("mask?") != len(node.outputs) - 1:
        return "the mask is not the last output"
    forward = schema.attribute_values(node)
    forward.setdefault("axes", ())  # the fused ops share no mask axes
    for grad in readers:
        wanted = fir.schema("DropoutGrad").attribute_values(grad)
        if grad.inputs[1] is not mask or (len(grad.inputs) > 2 and grad.inputs[2] is not None):
            return f"DropoutGrad {grad.name!r} reads the mask in another slot or has a seed"
        differ = [a for a in _GRAD_ATTRIBUTES if _plain(forward[a]) != _plain(wanted[a])]
        if differ:
            return f"DropoutGrad {grad.name!r} has other {differ} than the forward"
    return None


def recompute_dropout_mask(model: ir.Model) -> RecomputeReport:
    """Rewrites `model` in place (subgraphs included); running it twice changes nothing."""
    recomputed, refused = [], []
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        mask = _mask_output(node)
        if mask is None:
            continue
        why = _refusal(node, mask)
        if why:
            refused.append((node.name or node.op_type, why))
            continue
        schema = fir.SCHEMAS[node.op_type]
        seed = node.inputs[schema.inputs.index("seed?")]
        offset_slot = schema.inputs.index("offset?")
        offset = node.inputs[offset_slot] if offset_slot < len(node.inputs) else None
        for use in list(mask.uses()):
            grad = use.node
            grad.resize_inputs(4)
            grad.replace_input_with(1, None)
            grad.replace_input_with(2, seed)
            grad.replace_input_with(3, offset)
        node.resize_outputs(len(node.outputs) - 1)
        recomputed.append(node.name or node.op_type)
    return RecomputeReport(tuple(recomputed), tuple(refused))
