"""GRU fusions: fc_gru and mul_gru (projection + recurrence -> FusionGRU), canonical_update_gate
(origin_mode 0 -> 1 by update-gate negation), bigru (forward + reverse + concat -> one
bidirectional FusionGRU).

Unlike Paddle's own passes (docs/gru.md, "Paddle's gru and fusion_gru"): H0 is kept, a GRU
without bias fuses, origin_mode 1 fuses, matmul_v2/fc producers fuse (they all import as MatMul
[+ Add]), and every changed weight is a new initializer."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.fuse_passes.rule import FusionRule
from fusebridge.kernels import negate_update_gate
from fusebridge.ops import recurrence
from fusebridge.ops.gru import FUSION_GRU


def _inputs(node: ir.Node) -> dict[str, ir.Value | None]:
    """A GRU or FusionGRU node's inputs by its schema's slot names."""
    return ops.op(node.op_type).inputs(node)


def _attrs(node: ir.Node) -> dict[str, object]:
    return ops.schema(node.op_type).attribute_values(node)


class _ProjectionIntoGRU(FusionRule):
    """MatMul(x, Wx) [+ Add(b)] feeding a GRU -> FusionGRU(x) with the bias folded in."""

    def check(self, context, w, projected, gru_out, b=None, fc_out=None, **_):
        self.begin(context)
        gru = gru_out.producer()
        wx = self.constant(w)
        if wx is None or wx.ndim != 2:
            return self.refuse(
                gru, f"the projection weight {w.name!r} is not a constant 2-D matrix"
            )
        if len(gru.outputs) != 1:
            return self.refuse(gru, "the GRU's Y_last output is used")
        oc3 = wx.shape[1]
        wh = _inputs(gru)["Wh"]
        if wh.shape is not None and wh.shape.is_static() and wh.shape[-1] != oc3:
            return self.refuse(
                gru, f"the projection gives {oc3} columns, the GRU needs {wh.shape[-1]}"
            )
        reason = self.second_consumer(projected, "projection output")
        if fc_out is not None:
            reason = reason or self.second_consumer(fc_out, "FC output (after the bias)")
            bias = self.constant(b)
            if bias is None or bias.size != oc3:
                return self.refuse(gru, f"the FC bias {b.name!r} is not a constant of {oc3} values")
        if reason:
            return self.refuse(gru, reason)
        gru_bias = _inputs(gru)["B"]
        if gru_bias is not None and self.constant(gru_bias) is None:
            return self.refuse(gru, f"the GRU bias {gru_bias.name!r} is computed, not a constant")
        if _attrs(gru)["direction"] == "bidirectional":
            return self.refuse(gru, "a bidirectional GRU op has no projection per direction")
        return self.accept()

    def rewrite(self, op, x, w, gru_out, b=None, **_):
        gru = gru_out.producer()
        inputs = _inputs(gru)
        wx = self.constant(w)
        bias = inputs["B"]
        if b is not None:
            folded = self.constant(b).reshape(1, -1).astype(np.float32)
            if bias is not None:
                folded = folded + self.constant(bias).reshape(1, -1)
            bias = self.new_initializer(op, folded, f"{gru_out.name}/bias")
        new_wx = self.new_initializer(op, wx[None], f"{w.name}/wx")
        return self.fusebridge_node(
            op,
            "FusionGRU",
            [x, inputs["lengths"], new_wx, inputs["Wh"], bias, inputs["B_h"], inputs["H0"]],
            _attrs(gru),
        )


class FcGRU(_ProjectionIntoGRU):
    name = "fc_gru"
    commute = True  # Add(MatMul, b) and Add(b, MatMul)
    runs_after: ClassVar[dict[str, str]] = {
        "inference_dropout": "a dropout between the FC and the GRU hides the pattern"
    }

    def pattern(self, op, x, w, b, lengths, wh):
        projected = op.MatMul(x, w, _outputs=["projected"])
        return op.GRU(
            op.Add(projected, b, _outputs=["fc_out"]),
            lengths,
            wh,
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["gru_out"],
        )


class MulGRU(_ProjectionIntoGRU):
    name = "mul_gru"
    runs_after = FcGRU.runs_after

    def pattern(self, op, x, w, lengths, wh):
        return op.GRU(
            op.MatMul(x, w, _outputs=["projected"]),
            lengths,
            wh,
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["gru_out"],
        )


class CanonicalUpdateGate(FusionRule):
    """origin_mode 0 -> 1 by negating the update-gate columns: sigmoid(-a) = 1 - sigmoid(a)."""

    name = "canonical_update_gate"
    runs_after: ClassVar[dict[str, str]] = {
        "fc_gru": "it rewrites FusionGRU weights; a GRU fused later would keep origin_mode 0",
        "mul_gru": "it rewrites FusionGRU weights; a GRU fused later would keep origin_mode 0",
    }

    def pattern(self, op, x, lengths, wx, wh):
        return op.FusionGRU(
            x, lengths, wx, wh, _domain=conventions.DOMAIN, _allow_other_inputs=True, _outputs=["y"]
        )

    def check(self, context, y, **_):
        self.begin(context)
        node = y.producer()
        attrs = _attrs(node)
        if attrs["origin_mode"] == 1:
            return self.skip("already origin_mode 1")
        if attrs["gate_activation"] != "sigmoid":
            return self.refuse(
                node,
                f"gate_activation is {attrs['gate_activation']}: update-gate negation needs "
                "sigmoid (sigmoid(-a) = 1 - sigmoid(a)); the kernel runs origin_mode 0 as is",
            )
        inputs = _inputs(node)
        for name in ("Wx", "Wh", "B", "B_h"):
            if inputs[name] is not None and self.constant(inputs[name]) is None:
                return self.refuse(node, f"{name} {inputs[name].name!r} is not a constant")
        return self.accept()

    def rewrite(self, op, y, **_):
        node = y.producer()
        inputs = _inputs(node)
        arrays = [self.constant(inputs[n]) for n in ("Wx", "Wh", "B", "B_h")]
        negated = negate_update_gate(*arrays)
        new = [
            None if a is None else self.new_initializer(op, a, f"{inputs[n].name}/origin_mode1")
            for n, a in zip(("Wx", "Wh", "B", "B_h"), negated)
        ]
        attrs = {**_attrs(node), "origin_mode": 1}
        return self.fusebridge_node(
            op, "FusionGRU", [inputs["X"], inputs["lengths"], *new, inputs["H0"]], attrs
        )


class BiGRU(FusionRule):
    """Concat(FusionGRU forward, FusionGRU reverse) over the same input and sentences -> one
    bidirectional FusionGRU. Each sentence runs backwards from its own end, so unequal lengths
    are right (Paddle's oneDNN multi_gru pads to the longest instead)."""

    name = "bigru"
    runs_after: ClassVar[dict[str, str]] = {
        "fc_gru": "it merges FusionGRU nodes, which fc_gru produces",
        "mul_gru": "it merges FusionGRU nodes, which mul_gru produces",
    }

    def pattern(self, op, x, lengths, wx1, wh1, wx2, wh2):
        first = op.FusionGRU(
            x,
            lengths,
            wx1,
            wh1,
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y1"],
        )
        second = op.FusionGRU(
            x,
            lengths,
            wx2,
            wh2,
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y2"],
        )
        return op.Concat(first, second, _outputs=["joined"])

    def check(self, context, y1, y2, joined, **_):
        self.begin(context)
        concat = joined.producer()
        fwd, rev = y1.producer(), y2.producer()
        a1, a2 = _attrs(fwd), _attrs(rev)
        if (a1["direction"], a2["direction"]) == ("reverse", "forward"):
            return self.refuse(concat, "the concat puts the reverse direction first")
        if (a1["direction"], a2["direction"]) != ("forward", "reverse"):
            return self.skip("not a forward and a reverse GRU")
        differ = [k for k in a1 if k != "direction" and a1[k] != a2[k]]
        if differ:
            return self.refuse(concat, f"the two GRUs differ in {', '.join(differ)}")
        axis = concat.attributes["axis"].value
        rank = 2 if a1["layout"] == "lod" else 3
        if axis not in (-1, rank - 1):
            return self.refuse(concat, f"the concat joins axis {axis}, not the features")
        reason = self.second_consumer(y1, "forward GRU output") or self.second_consumer(
            y2, "reverse GRU output"
        )
        if reason:
            return self.refuse(concat, reason)
        i1, i2 = _inputs(fwd), _inputs(rev)
        for name in ("Wx", "Wh", "B", "B_h"):
            for inputs in (i1, i2):
                if inputs[name] is not None and self.constant(inputs[name]) is None:
                    return self.refuse(concat, f"{name} {inputs[name].name!r} is not a constant")
        if (i1["H0"] is None) != (i2["H0"] is None):
            return self.refuse(concat, "only one direction has an H0")
        return self.accept()

    def rewrite(self, op, x, lengths, y1, y2, joined, **_):
        fwd, rev = y1.producer(), y2.producer()
        i1, i2 = _inputs(fwd), _inputs(rev)
        oc = self.constant(i1["Wh"]).shape[-2]
        stacked = []
        for name in ("Wx", "Wh", "B", "B_h"):
            pair = [i1[name], i2[name]]
            if pair == [None, None]:
                stacked.append(None)
                continue
            dims = 1 if name in ("B", "B_h") else 2  # per-direction rank
            arrays = [
                np.zeros((1, 3 * oc), np.float32)
                if v is None
                else self.constant(v).reshape((1,) + self.constant(v).shape[-dims:])
                for v in pair
            ]
            stacked.append(
                self.new_initializer(op, np.concatenate(arrays), f"{joined.name}/{name.lower()}")
            )
        h0 = None
        if i1["H0"] is not None:
            shape = self.new_initializer(
                op, np.array([1, -1, oc], np.int64), f"{joined.name}/h0_shape"
            )
            h0 = op.Concat(op.Reshape(i1["H0"], shape), op.Reshape(i2["H0"], shape), axis=0)
            h0.type = ir.TensorType(ir.DataType.FLOAT)
        attrs = {**_attrs(fwd), "direction": "bidirectional"}
        return self.fusebridge_node(op, "FusionGRU", [x, lengths, *stacked, h0], attrs)


class _ProjectionIntoFusionGRU(FusionRule):
    """MatMul(x, W1) [+ b1] feeding a FusionGRU's X (ONNX GRU imports as FusionGRU, with its own
    W) -> one projection: Wx' = W1 @ Wx, bias' = b1 @ Wx + bias, per direction. Refused where
    the folded projection would cost more than the two it replaces."""

    def check(self, context, w, projected, gru_out, b=None, fc_out=None, **_):
        self.begin(context)
        gru = gru_out.producer()
        inputs = _inputs(gru)
        w1, wx = self.constant(w), self.constant(inputs["Wx"])
        if w1 is None or w1.ndim != 2:
            return self.refuse(
                gru, f"the projection weight {w.name!r} is not a constant 2-D matrix"
            )
        if wx is None:
            return self.refuse(gru, "the GRU's Wx is not a constant")
        weights = wx.reshape(-1, wx.shape[-2], wx.shape[-1]).shape
        reason = self.projection_refusal(w1, weights, ("Wx", "GRU"), projected, b, fc_out)
        if reason:
            return self.refuse(gru, reason)
        if inputs["B"] is not None and self.constant(inputs["B"]) is None:
            return self.refuse(gru, f"the GRU bias {inputs['B'].name!r} is not a constant")
        return self.accept()

    def rewrite(self, op, x, w, gru_out, b=None, **_):
        gru = gru_out.producer()
        inputs = _inputs(gru)
        wx = self.constant(inputs["Wx"])
        wx = wx.reshape(-1, wx.shape[-2], wx.shape[-1])
        b1 = None if b is None else self.constant(b)
        folded_wx, shift = recurrence.fold_projection(self.constant(w), b1, wx)
        bias = inputs["B"]
        if shift is not None:
            if bias is not None:
                shift = shift + self.constant(bias).reshape(shift.shape)
            bias = self.new_initializer(op, shift, f"{gru_out.name}/bias")
        new_wx = self.new_initializer(op, folded_wx, f"{inputs['Wx'].name}/folded")
        outputs = self.fusebridge_node(
            op,
            "FusionGRU",
            [x, inputs["lengths"], new_wx, inputs["Wh"], bias, inputs["B_h"], inputs["H0"]],
            _attrs(gru),
            num_outputs=len(gru.outputs),
            name=gru.name,
        )
        return self.second_output_moved(gru, outputs)


class MatMulAddFusionGRU(_ProjectionIntoFusionGRU):
    name = "matmul_add_fusion_gru"
    commute = True  # Add(MatMul, b) and Add(b, MatMul)
    runs_after: ClassVar[dict[str, str]] = {
        "zero_initial_state": "the Shape chain of a zero H0 is a second consumer of X",
        "gru_input_layout": "a batch_first Transpose between the projection and the GRU hides "
        "the pattern",
    }

    def pattern(self, op, x, w, b):
        projected = op.MatMul(x, w, _outputs=["projected"])
        return op.FusionGRU(
            op.Add(projected, b, _outputs=["fc_out"]),
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["gru_out"],
        )


class MatMulFusionGRU(_ProjectionIntoFusionGRU):
    name = "matmul_fusion_gru"
    runs_after: ClassVar[dict[str, str]] = {
        "matmul_add_fusion_gru": "it would fold the MatMul and leave the Add behind",
        **MatMulAddFusionGRU.runs_after,
    }

    def pattern(self, op, x, w):
        return op.FusionGRU(
            op.MatMul(x, w, _outputs=["projected"]),
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["gru_out"],
        )


# Ops that move or copy their first input's elements without computing new ones: all zeros in,
# all zeros out (the exporters build a zero H0 from a zero constant with these).
_SHAPE_ONLY_OPS = frozenset(
    "Slice Expand Tile Reshape Squeeze Unsqueeze Transpose Identity Cast Flatten Gather".split()
)


def zero_source(value: ir.Value) -> tuple[bool, str]:
    """(whether `value` is all zeros by construction, what it is built from): a constant of
    zeros, a ConstantOfShape of zero (its default), and shape-only ops (_SHAPE_ONLY_OPS) or a
    Concat over such values. The text names the value that decides, for a refusal."""
    if value.const_value is not None and not value.is_graph_input():
        zero = not value.const_value.numpy().any()
        return zero, f"the constant {value.name!r}" + ("" if zero else " is not all zeros")
    node = value.producer()
    if node is None:
        return False, f"the graph input {value.name!r}"
    if node.op_type == "ConstantOfShape" and node.domain in ("", "ai.onnx"):
        fill = node.attributes.get("value")
        fill_value = 0.0 if fill is None else fill.value.numpy().reshape(-1)[0]
        zero = not fill_value
        return zero, f"ConstantOfShape {node.name!r} of {fill_value}"
    if node.domain in ("", "ai.onnx") and node.op_type in _SHAPE_ONLY_OPS and node.inputs[0]:
        return zero_source(node.inputs[0])
    if node.op_type == "Concat" and node.domain in ("", "ai.onnx"):
        for part in node.inputs:
            zero, source = zero_source(part)
            if not zero:
                return False, source
        return True, f"Concat {node.name!r} of zeros"
    return False, f"{node.op_type} {node.name!r}"


def _differ(got: object, want: object) -> bool:
    """Two dimensions known to differ: two sizes, or two named symbols (an int and a symbol,
    or an unknown, may be equal when run)."""
    if want is None or got is None or isinstance(got, int) != isinstance(want, int):
        return False
    # onnx's shape inference names a dimension it cannot relate to others unk__<k>.
    unnamed = str(got).startswith("unk__") or str(want).startswith("unk__")
    return str(got) != str(want) and not unnamed


def _h0_shape_mismatch(gru: ir.Node, h0: ir.Value) -> str | None:
    """Why `h0`'s inferred shape is not the GRU's [D, N, OC] ([N, OC] with one direction), or
    None where it is (a dimension nobody knows counts as right: the GRU checks it when run)."""
    attrs = _attrs(gru)
    inputs = _inputs(gru)
    oc = inputs["Wh"].shape[-2] if inputs["Wh"].shape is not None else None
    d = 2 if attrs["direction"] == "bidirectional" else 1
    x_shape = inputs["X"].shape
    batch = None
    if x_shape is not None and attrs["layout"] != "lod" and len(x_shape) == 3:
        batch = x_shape[1 if attrs["layout"] == "tnc" else 0]
    want = [d, batch, oc]
    shown = "[" + ", ".join("?" if w is None else str(w) for w in want) + "]"
    if h0.shape is None:
        return f"the shape of H0 {h0.name!r} is unknown (it must be [D, N, OC] = {shown})"
    dims = list(h0.shape)
    if len(dims) == 2 and d == 1:
        dims = [1, *dims]
    if len(dims) != 3 or any(_differ(g, w) for g, w in zip(dims, want)):
        got = "[" + ", ".join(str(g) for g in h0.shape) + "]"
        return f"H0 {h0.name!r} is {got}, the GRU's state is [D, N, OC] = {shown}"
    return None


class ZeroInitialState(FusionRule):
    """A FusionGRU whose H0 is all zeros by construction (zero_source: ConstantOfShape 0 as
    the legacy torch.onnx writes, sliced per layer; Expand of a zero scalar as its dynamo
    exporter writes; a constant of zeros) and of the GRU's state shape -> no H0, which means
    zeros. Its Shape/Gather chain then goes dead, and with it a second consumer that would stop
    the projection from folding."""

    name = "zero_initial_state"

    def pattern(self, op, x):
        return op.FusionGRU(x, _domain=conventions.DOMAIN, _allow_other_inputs=True, _outputs=["y"])

    def check(self, context, y, **_):
        self.begin(context)
        gru = y.producer()
        h0 = _inputs(gru)["H0"]
        if h0 is None:
            return self.skip("no H0")
        zero, source = zero_source(h0)
        if not zero:
            if source.startswith(("ConstantOfShape", "the constant")):
                return self.refuse(gru, f"H0 {h0.name!r} is not all zeros: it comes from {source}")
            return self.skip(f"H0 is computed ({source}): a state, not a zero start")
        reason = _h0_shape_mismatch(gru, h0)
        if reason:
            return self.refuse(gru, f"H0 is zeros ({source}), but {reason}")
        return self.accept()

    def rewrite(self, op, x, y, **_):
        gru = y.producer()
        inputs = _inputs(gru)
        outputs = self.fusebridge_node(
            op,
            "FusionGRU",
            [x, *(inputs[n] for n in FUSION_GRU.slots[1:-1])],
            _attrs(gru),
            num_outputs=len(gru.outputs),
            name=gru.name,
        )
        return self.second_output_moved(gru, outputs)
