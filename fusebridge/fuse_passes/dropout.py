"""Dropout rules. inference_dropout: an is_test Dropout becomes what it computes, an identity
(upscale_in_train) or a scale by 1 - p (downgrade_in_infer), so that the ops around it can
fuse; never dropped silently where the mode needs the scale. matmul_dropout,
matmul_add_dropout, softmax_dropout: a training dropout and its producer in one op, with the
same seed and offset, so the same bits."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fusebridge import ir as fir
from fusebridge.fuse_passes.rule import FusionRule
from fusebridge.op_kernels import inference_dropout_scale


class InferenceDropout(FusionRule):
    name = "inference_dropout"

    def pattern(self, op, x):
        return op.Dropout(x, _domain=fir.DOMAIN, _allow_other_inputs=True, _outputs=["y"])

    def check(self, context, y, **_):
        self.begin(context)
        node = y.producer()
        if not fir.schema("Dropout").attribute_values(node)["is_test"]:
            return self.refuse(node, "is_test = 0: a training dropout stays")
        if len(node.outputs) > 1:
            return self.refuse(node, "its mask output is used")
        return self.accept()

    def rewrite(self, op, x, y, **_):
        scale = inference_dropout_scale(fir.schema("Dropout").attribute_values(y.producer()))
        self.fired += 1
        if scale == 1.0:
            return op.Identity(x)
        dtype = y.dtype.numpy() if y.dtype is not None else np.float32
        factor = self.new_initializer(op, np.asarray(scale, dtype), f"{y.name}/keep_scale")
        return op.Mul(x, factor)


def _dropout_inputs(node) -> tuple[object, object]:
    """A Dropout node's (seed, offset) inputs, None where absent."""
    inputs = list(node.inputs) + [None, None]
    return inputs[1], inputs[2]


class _TrainingDropoutFusion(FusionRule):
    """The producer and a training dropout after it in one op (one pass over memory)."""

    def check_dropout(self, context, y, produced, what: str, more: str | None = None):
        """Accepts or refuses a match: the dropout must be a training one without shared axes,
        `produced` (the producer's output) must feed it alone, and `more` names any other
        reason to refuse."""
        self.begin(context)
        node = y.producer()
        attrs = fir.schema("Dropout").attribute_values(node)
        if attrs["is_test"]:
            return self.skip("an inference dropout (inference_dropout handles it)")
        if attrs["axes"]:
            return self.refuse(node, f"its mask is shared along axes {list(attrs['axes'])}")
        reason = self.second_consumer(produced, what) or more
        return self.refuse(node, reason) if reason else self.accept()

    def fused(self, op, op_type: str, inputs: list, y, attrs: dict):
        node = y.producer()
        dropout = fir.schema("Dropout").attribute_values(node)
        outputs = self.fusebridge_node(
            op,
            op_type,
            [*inputs, *_dropout_inputs(node)],
            {"p": dropout["p"], "mode": dropout["mode"], **attrs},
            num_outputs=len(node.outputs),
            name=node.name or "",
        )
        return self.second_output_moved(node, outputs)


class MatMulDropout(_TrainingDropoutFusion):
    """Dropout(MatMul(a, b) [+ bias]) -> MatMulDropout: the bits stay those of the pair."""

    name = "matmul_dropout"
    runs_after: ClassVar[dict[str, str]] = {
        "matmul_add_dropout": "it would take the MatMul and leave the bias Add outside"
    }

    def pattern(self, op, a, b):
        return op.Dropout(
            op.MatMul(a, b, _outputs=["product"]),
            _domain=fir.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y"],
        )

    def check(self, context, y, product, **_):
        return self.check_dropout(context, y, product, "MatMul output")

    def rewrite(self, op, a, b, y, **_):
        return self.fused(op, "MatMulDropout", [a, b, None], y, {})


class MatMulAddDropout(_TrainingDropoutFusion):
    name = "matmul_add_dropout"
    commute = True  # Add(MatMul, bias) and Add(bias, MatMul)

    def pattern(self, op, a, b, bias):
        product = op.MatMul(a, b, _outputs=["product"])
        return op.Dropout(
            op.Add(product, bias, _outputs=["biased"]),
            _domain=fir.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y"],
        )

    def check(self, context, y, product, biased, bias, **_):
        value = self.constant(bias)
        more = self.second_consumer(product, "MatMul output") or (
            f"the bias {bias.name!r} is not a constant vector"
            if value is None or value.ndim != 1
            else None
        )
        return self.check_dropout(context, y, biased, "biased MatMul output", more)

    def rewrite(self, op, a, b, bias, y, **_):
        return self.fused(op, "MatMulDropout", [a, b, bias], y, {})


class SoftmaxDropout(_TrainingDropoutFusion):
    """Dropout(Softmax(x, axis)) -> SoftmaxDropout."""

    name = "softmax_dropout"

    def pattern(self, op, x):
        return op.Dropout(
            op.Softmax(x, _outputs=["probs"]),
            _domain=fir.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y"],
        )

    def check(self, context, y, probs, **_):
        return self.check_dropout(context, y, probs, "Softmax output")

    def rewrite(self, op, x, probs, y, **_):
        axis = probs.producer().attributes.get_int("axis", -1)
        return self.fused(op, "SoftmaxDropout", [x], y, {"axis": axis})
