"""GRU layouts: the Reshape/Transpose round trips around a padded (tnc/ntc) FusionGRU, folded
into the layouts of the op itself.

Where they come from: the ONNX import puts our Y [T, N, D*OC] back into ONNX GRU's
[T, D, N, OC] (Reshape [0, 0, D, OC], Transpose (0, 2, 1, 3)), and the exporters take it
straight back out: torch writes Squeeze(axis 1) for one direction and Transpose (0, 2, 1, 3) +
Reshape [0, 0, -1] for two (between stacked GRUs and at the end). torch's batch_first puts a
Transpose (1, 0, 2) before the GRU and one after. The passes here, in pipeline order:

- transpose_pairs (onnxscript's transpose_transpose and no_op_transpose rules): the import's
  Transpose and the exporter's cancel;
- gru_output_squeeze, gru_output_round_trip: what is left of the round trip goes;
- reshape_pairs: two Reshapes in a row that are left (an exporter's constant target shape)
  become one;
- gru_input_layout: Transpose (1, 0, 2) -> FusionGRU in one layout becomes the FusionGRU in the
  other, with a Transpose after it (Y has X's layout), which gru_layout_transposes
  (transpose_pairs again) cancels against a batch_first output Transpose, or the next GRU of a
  stack takes in turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import RewriteRuleSet
from onnxscript.rewriter._basics import MatchResult
from onnxscript.rewriter.rules.common._basic_rules import (
    ReshapeReshape,
    TransposeIdentity,
    TransposeTranspose,
)

from fusebridge import conventions, ops
from fusebridge.fuse_passes.passes import FusePass, tidy_after_rewrite
from fusebridge.fuse_passes.report import PassReport
from fusebridge.fuse_passes.rule import FusionRule
from fusebridge.ops.gru import FUSION_GRU

_SWAP = (1, 0, 2)  # time-major <-> batch-major
_OTHER_LAYOUT = {"tnc": "ntc", "ntc": "tnc"}


def _permutation_of_rank(x: ir.Value, *perms: ir.Attr) -> MatchResult:
    """The condition onnxscript's Transpose rules take for granted: each perm given and a
    permutation of the input's axes (a malformed one would fail in their rewrite, and an empty
    list would read as the identity)."""
    result = MatchResult()
    rank = len(x.shape) if x.shape is not None else None
    for perm in perms:
        if perm.is_ref():
            return result.fail("the perm is a reference attribute")
        axes = sorted(perm.as_ints())
        if not axes or axes != list(range(rank if rank is not None else len(axes))):
            return result.fail(f"perm {perm.as_ints()} is not a permutation of {rank} axes")
        rank = len(axes)
    return result


class _TransposeTranspose(TransposeTranspose):
    def check(self, context, x, perm1, perm2) -> MatchResult:
        return _permutation_of_rank(x, perm1, perm2)


class _TransposeIdentity(TransposeIdentity):
    def check(self, context, x, perm) -> MatchResult:
        return _permutation_of_rank(x, perm) and super().check(context, x, perm)


class _ReshapeReshape(ReshapeReshape):
    def check(self, context, x, shape_ignored, shape) -> MatchResult:
        # What the rule takes for granted: the outer target a 1-D integer constant.
        value = shape.const_value
        if value is None or len(value.shape) != 1 or not value.dtype.is_integer():
            return MatchResult().fail("the second Reshape's shape is not a 1-D integer constant")
        return super().check(context, x, shape_ignored, shape)


class TransposePairs(FusePass):
    """onnxscript's basic rules on Transposes (transpose_transpose, no_op_transpose), with the
    perms checked first (_permutation_of_rank): two in a row become one (none where their perms
    cancel), an identity perm goes. Its matcher leaves a Transpose whose output has other
    consumers."""

    def __init__(self, name: str, runs_after: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.runs_after = runs_after or {}

    def rules(self) -> RewriteRuleSet:
        return RewriteRuleSet([_TransposeTranspose.rule(), _TransposeIdentity.rule()])

    def run(self, model: ir.Model) -> PassReport:
        count = self.rules().apply_to_model(model)
        tidy_after_rewrite(model.graph)
        return PassReport(self.name, count > 0, count)


class ReshapePairs(TransposePairs):
    """onnxscript's reshape_reshape: Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) for a constant
    s2 (a 0 copying a dim of the middle shape is resolved from it, or refused). What is left of
    the exporters' output chains where gru_output_round_trip cannot drop them (torch's dynamo
    export reshapes to a constant [T, -1, OC]): one Reshape instead of two, in a Session's ONNX
    Runtime partitions too."""

    def rules(self) -> RewriteRuleSet:
        return RewriteRuleSet([_ReshapeReshape.rule()])


def _padded_gru(value: ir.Value) -> tuple[ir.Node | None, str]:
    """The FusionGRU that produced `value` as its Y in a padded layout, or why not."""
    gru = value.producer()
    if not FUSION_GRU.matches(gru):
        return None, "not a FusionGRU's output"
    if gru.outputs[0] is not value:
        return None, "the FusionGRU's Y_last, not its Y"
    layout = FUSION_GRU.schema.attribute_values(gru)["layout"]
    if layout not in _OTHER_LAYOUT:
        return None, f"layout {layout}: only padded GRUs (tnc, ntc) are laid out again"
    return gru, ""


def _ints(value: ir.Value | None) -> list[int] | None:
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    return np.asarray(value.const_value.numpy()).reshape(-1).tolist()


def _split_shape(gru: ir.Node) -> list[int]:
    """The shape constant of the import's Reshape: [0, 0, D, OC] (the first two dims copied)."""
    attrs = FUSION_GRU.schema.attribute_values(gru)
    wh = gru.inputs[3].shape
    return [0, 0, 2 if attrs["direction"] == "bidirectional" else 1, wh[-2]]


class _GRUOutputChain(FusionRule):
    """A chain on a FusionGRU's Y that gives Y back unchanged -> Y itself."""

    def refuse_split(self, y: ir.Value, split: ir.Value) -> str | None:
        """Why the first Reshape of the chain is not the import's Y -> [T, N, D, OC]."""
        reshape = split.producer()
        gru, _ = _padded_gru(y)
        want = _split_shape(gru)
        if ops.attribute(reshape, "allowzero"):
            return f"the Reshape {reshape.name!r} has allowzero 1 (a 0 is a size, not a copy)"
        if _ints(reshape.inputs[1]) != want:
            return f"the Reshape {reshape.name!r} is not to {want}"
        return self.second_consumer(split, "split output")

    def gives_y(self, op, y: ir.Value) -> ir.Value:
        self.fired += 1
        return op.Identity(y)


class GRUOutputSqueeze(_GRUOutputChain):
    """One direction: Y -> Reshape [0, 0, 1, OC] -> Transpose (0, 2, 1, 3) -> Squeeze(axis 1)
    (torch's) is Y."""

    name = "gru_output_squeeze"

    def pattern(self, op, y, shape, perm):
        split = op.Reshape(y, shape, _outputs=["split"])
        moved = op.Transpose(split, perm=perm, _outputs=["moved"])
        return op.Squeeze(moved, _allow_other_inputs=True, _outputs=["squeezed"])

    def check(self, context, y, split, moved, squeezed, perm, **_):
        self.begin(context)
        gru, why = _padded_gru(y)
        if gru is None:
            return self.skip(why)
        squeeze = squeezed.producer()
        inputs = squeeze.inputs
        if len(inputs) > 1:
            axes = _ints(inputs[1])
        else:
            attr = squeeze.attributes.get("axes")
            axes = None if attr is None else list(attr.value)
        reason = self.refuse_split(y, split) or self.second_consumer(moved, "Transpose output")
        if tuple(perm.as_ints()) != (0, 2, 1, 3):
            reason = f"the Transpose's perm is {list(perm.as_ints())}, not [0, 2, 1, 3]"
        elif axes not in ([1], [-3]):
            reason = f"the Squeeze takes axes {axes}, not the direction axis [1]"
        return self.refuse(squeeze, reason) if reason else self.accept()

    def rewrite(self, op, y, **_):
        return self.gives_y(op, y)


class GRUOutputRoundTrip(_GRUOutputChain):
    """Y -> Reshape [0, 0, D, OC] -> Reshape [0, 0, D*OC] (or [0, 0, -1]) is Y: what is left
    of the import's and torch's chains once their two Transposes (0, 2, 1, 3) cancel."""

    name = "gru_output_round_trip"
    runs_after: ClassVar[dict[str, str]] = {
        "transpose_pairs": "the import's Transpose (0, 2, 1, 3) and the exporter's lie between "
        "the two Reshapes until they cancel"
    }

    def pattern(self, op, y, shape, target):
        return op.Reshape(op.Reshape(y, shape, _outputs=["split"]), target, _outputs=["merged"])

    def check(self, context, y, split, target, merged, **_):
        self.begin(context)
        gru, why = _padded_gru(y)
        if gru is None:
            return self.skip(why)
        reshape = merged.producer()
        d, oc = _split_shape(gru)[2:]
        dims = _ints(target)
        reason = self.refuse_split(y, split)
        if dims is None:
            source = target.producer()
            made = f"by {source.op_type} {source.name!r}" if source is not None else "at run time"
            reason = (
                f"the target shape {target.name!r} of Reshape {reshape.name!r} is computed "
                f"({made}), not a constant [0, 0, {d * oc}]"
            )
        elif ops.attribute(reshape, "allowzero") and 0 in dims:
            reason = f"the Reshape {reshape.name!r} has allowzero 1 (a 0 is a size, not a copy)"
        elif dims not in ([0, 0, -1], [0, 0, d * oc]):
            reason = f"the Reshape {reshape.name!r} is to {dims}, not back to [0, 0, {d * oc}]"
        return self.refuse(reshape, reason) if reason else self.accept()

    def rewrite(self, op, y, **_):
        return self.gives_y(op, y)


class TransposedGRUInput(FusionRule):
    """Transpose (1, 0, 2) -> FusionGRU X in layout tnc (ntc) -> the FusionGRU in ntc (tnc) on
    the Transpose's input, and a Transpose (1, 0, 2) after it: Y has X's layout, H0 and Y_last
    are [D, N, OC] and seq_lens [N] in both."""

    name = "gru_input_layout"
    runs_after: ClassVar[dict[str, str]] = {
        "gru_output_squeeze": "the Transpose it puts after a GRU would hide the import's chain",
        "gru_output_round_trip": "the Transpose it puts after a GRU would hide the import's chain",
    }

    def pattern(self, op, x, perm):
        swapped = op.Transpose(x, perm=perm, _outputs=["swapped"])
        return op.FusionGRU(
            swapped, _domain=conventions.DOMAIN, _allow_other_inputs=True, _outputs=["y"]
        )

    def check(self, context, swapped, y, perm, **_):
        self.begin(context)
        gru, why = _padded_gru(y)
        if gru is None:
            return self.skip(why)
        reason = self.second_consumer(swapped, "transposed input")
        if tuple(perm.as_ints()) != _SWAP:
            reason = f"the Transpose's perm is {list(perm.as_ints())}, not [1, 0, 2]"
        return self.refuse(gru, reason) if reason else self.accept()

    def rewrite(self, op, x, y, **_):
        gru = y.producer()
        attrs = FUSION_GRU.schema.attribute_values(gru)
        attrs["layout"] = _OTHER_LAYOUT[attrs["layout"]]
        outputs = self.fusebridge_node(
            op,
            "FusionGRU",
            [x, *gru.inputs[1:]],
            attrs,
            num_outputs=len(gru.outputs),
            name=gru.name,
        )
        new_y = self.second_output_moved(gru, outputs)
        new_y.type = y.type
        back = op.Transpose(new_y, perm=list(_SWAP))
        back.type = y.type
        return back
