"""LSTM fusions: fc_lstm and mul_lstm fold the projection before a LoD LSTM (Paddle's legacy
`lstm` op, imported as LoDToPadded -> ONNX LSTM) into the LSTM's own W, as fc_gru does for the
GRU: MatMul(x, W1) [+ b1] -> LoDToPadded -> LSTM(W, B) becomes LoDToPadded(x) -> LSTM(W @ W1^T,
B + W @ b1). The padded steps after each sentence then hold W @ b1 instead of zeros, which the
LSTM never reads (sequence_lens stops each sentence at its end)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fusebridge import conventions, ops
from fusebridge.fuse_passes.rule import FusionRule
from fusebridge.ops import recurrence, standard


class _ProjectionIntoLSTM(FusionRule):
    runs_after: ClassVar[dict[str, str]] = {
        "inference_dropout": "a dropout between the FC and the LSTM hides the pattern"
    }

    def check(self, context, w, projected, padded, lstm_out, b=None, fc_out=None, **_):
        self.begin(context)
        lstm = lstm_out.producer()
        inputs = standard.inputs(lstm)
        w1, wl = self.constant(w), self.constant(inputs["W"])
        if w1 is None or w1.ndim != 2:
            return self.refuse(
                lstm, f"the projection weight {w.name!r} is not a constant 2-D matrix"
            )
        if wl is None or wl.ndim != 3:
            return self.refuse(lstm, "the LSTM's W is not a constant [D, 4H, I]")
        if any(o.uses() or o.is_graph_output() for o in lstm.outputs[1:]):
            return self.refuse(lstm, "the LSTM's Y_h or Y_c is used")
        if ops.attribute(lstm, "layout") != 0:
            return self.refuse(lstm, "the LSTM is batch-major (layout 1)")
        if ops.attribute(padded.producer(), "layout") != "tnc":
            return self.refuse(lstm, "LoDToPadded is not time-major (tnc)")
        d, gates, ic = wl.shape
        reason = self.projection_refusal(w1, (d, ic, gates), ("W", "LSTM"), projected, b, fc_out)
        reason = reason or self.second_consumer(padded, "padded projection")
        if reason:
            return self.refuse(lstm, reason)
        if inputs.get("B") is not None and self.constant(inputs["B"]) is None:
            return self.refuse(lstm, f"the LSTM bias {inputs['B'].name!r} is not a constant")
        return self.accept()

    def rewrite(self, op, x, w, offsets, padded, lstm_out, b=None, **_):
        lstm = lstm_out.producer()
        inputs = list(standard.inputs(lstm).values())
        wl = self.constant(inputs[1])
        d, gates, _ = wl.shape
        b1 = None if b is None else self.constant(b)
        folded, shift = recurrence.fold_projection(self.constant(w), b1, wl.transpose(0, 2, 1))
        bias = inputs[3]
        if shift is not None:
            whole = np.zeros((d, 2 * gates), np.float32)
            if bias is not None:
                whole += self.constant(bias).reshape(d, 2 * gates)
            whole[:, :gates] += shift
            bias = self.new_initializer(op, whole, f"{lstm_out.name}/B")
        folded = self.new_initializer(op, folded.transpose(0, 2, 1), f"{w.name}/W")
        layout = ops.attribute(padded.producer(), "layout")
        new_padded = self.fusebridge_node(
            op, "LoDToPadded", [x, offsets], {"layout": layout}, fires=False
        )
        attrs = {name: attr.value for name, attr in lstm.attributes.items()}
        self.fired += 1
        return op.LSTM(new_padded, folded, inputs[2], bias, *inputs[4:], **attrs)


class FcLSTM(_ProjectionIntoLSTM):
    name = "fc_lstm"
    commute = True  # Add(MatMul, b) and Add(b, MatMul)

    def pattern(self, op, x, w, b, offsets):
        projected = op.MatMul(x, w, _outputs=["projected"])
        fc_out = op.Add(projected, b, _outputs=["fc_out"])
        padded = op.LoDToPadded(fc_out, offsets, _domain=conventions.DOMAIN, _outputs=["padded"])
        return op.LSTM(padded, _allow_other_inputs=True, _outputs=["lstm_out"])


class MulLSTM(_ProjectionIntoLSTM):
    name = "mul_lstm"
    runs_after: ClassVar[dict[str, str]] = {
        "fc_lstm": "it would fold the MatMul and leave the Add behind",
        **_ProjectionIntoLSTM.runs_after,
    }

    def pattern(self, op, x, w, offsets):
        projected = op.MatMul(x, w, _outputs=["projected"])
        padded = op.LoDToPadded(projected, offsets, _domain=conventions.DOMAIN, _outputs=["padded"])
        return op.LSTM(padded, _allow_other_inputs=True, _outputs=["lstm_out"])
