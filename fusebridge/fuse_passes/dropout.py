"""Dropout rules. inference_dropout: an is_test Dropout becomes what it computes, an identity
(upscale_in_train) or a scale by 1 - p (downgrade_in_infer), so that the ops around it can
fuse; never dropped silently where the mode needs the scale. matmul_dropout,
matmul_add_dropout, softmax_dropout: a training dropout and its producer in one op, with the
same seed and offset, so the same bits. softmax_dropout_training: the same for a softmax whose
backward is in the graph too, whose gradient then recomputes the probabilities."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.fuse_passes.rule import FusionRule


class InferenceDropout(FusionRule):
    name = "inference_dropout"

    def pattern(self, op, x):
        return op.Dropout(x, _domain=conventions.DOMAIN, _allow_other_inputs=True, _outputs=["y"])

    def check(self, context, y, **_):
        self.begin(context)
        node = y.producer()
        if not ops.schema("Dropout").attribute_values(node)["is_test"]:
            return self.refuse(node, "is_test = 0: a training dropout stays")
        if len(node.outputs) > 1:
            return self.refuse(node, "its mask output is used")
        x = node.inputs[0]
        if node.attributes.get("axes") is not None and (x.shape is None):
            # Folded, its axes would never meet the rank they must fit: the Session checks them
            # when it runs the node (attribute_values above checked them where it was known).
            return self.refuse(node, "axes against an input of unknown rank: checked when it runs")
        return self.accept()

    def rewrite(self, op, x, y, **_):
        scale = ops.schema("Dropout").parse(y.producer()).inference_scale
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

    runs_after: ClassVar[dict[str, str]] = {
        "explicit_rng": "it numbers the streams in the order of the unfused dropouts; a fused "
        "one sits where its producer was, and would draw another dropout's bits"
    }

    def check_dropout(self, context, y, produced, what: str, more: str | None = None):
        """Accepts or refuses a match: the dropout must be a training one without shared axes,
        `produced` (the producer's output) must feed it alone, and `more` names any other
        reason to refuse."""
        self.begin(context)
        node = y.producer()
        attrs = ops.schema("Dropout").attribute_values(node)
        if attrs["is_test"]:
            return self.skip("an inference dropout (inference_dropout handles it)")
        if attrs["axes"]:
            return self.refuse(node, f"its mask is shared along axes {list(attrs['axes'])}")
        reason = self.second_consumer(produced, what) or more
        return self.refuse(node, reason) if reason else self.accept()

    def fused(self, op, op_type: str, inputs: list, y, attrs: dict):
        node = y.producer()
        dropout = ops.schema("Dropout").attribute_values(node)
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
        **_TrainingDropoutFusion.runs_after,
        "matmul_add_dropout": "it would take the MatMul and leave the bias Add outside",
    }

    def pattern(self, op, a, b):
        return op.Dropout(
            op.MatMul(a, b, _outputs=["product"]),
            _domain=conventions.DOMAIN,
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
            _domain=conventions.DOMAIN,
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
            _domain=conventions.DOMAIN,
            _allow_other_inputs=True,
            _outputs=["y"],
        )

    def check(self, context, y, probs, **_):
        return self.check_dropout(context, y, probs, "Softmax output")

    def rewrite(self, op, x, probs, y, **_):
        axis = probs.producer().attributes.get_int("axis", -1)
        return self.fused(op, "SoftmaxDropout", [x], y, {"axis": axis})


class SoftmaxDropoutTraining(_TrainingDropoutFusion):
    """Softmax -> Dropout with their backward in the same graph (DropoutGrad over the mask,
    then softmax's gradient P * (g - ReduceSum(g * P, axis)), as the Paddle frontend writes
    softmax_grad) -> SoftmaxDropout + SoftmaxDropoutGrad. The gradient recomputes P from x, so
    the probabilities are no longer kept for the backward (softmax_dropout refuses this softmax:
    its gradient reads P). The mask stays an output for recompute_dropout_mask to drop."""

    name = "softmax_dropout_training"
    commute = True  # Mul(g, P), Mul(P, centred) either way round

    def pattern(self, op, x, dy, axes):
        probs = op.Softmax(x, _outputs=["probs"])
        y, mask = op.Dropout(
            probs, _domain=conventions.DOMAIN, _allow_other_inputs=True, _outputs=["y", "mask"]
        )
        g = op.DropoutGrad(dy, mask, _domain=conventions.DOMAIN, _outputs=["g"])
        weighted = op.Mul(g, probs, _outputs=["weighted"])
        total = op.ReduceSum(weighted, axes, _outputs=["total"])
        centred = op.Sub(g, total, _outputs=["centred"])
        return y, op.Mul(probs, centred, _outputs=["dx"])

    def check(self, context, y, probs, **bound):
        self.begin(context)
        names = ("mask", "g", "weighted", "total", "centred", "dx", "axes")
        if any(bound.get(n) is None for n in names):
            # onnxscript tries the pattern from each output node and may stop halfway.
            return self.skip("not the whole softmax backward")
        mask, g, weighted, total, centred, dx, axes = (bound[n] for n in names)
        node = y.producer()
        dropout = ops.schema("Dropout").attribute_values(node)
        if dropout["is_test"]:
            return self.skip("an inference dropout")
        grad = ops.schema("DropoutGrad").attribute_values(g.producer())
        axis = probs.producer().attributes.get_int("axis", -1)
        rank = len(probs.shape) if probs.shape is not None else None
        summed = self.constant(axes)
        reduce = total.producer()
        inside = {node, weighted.producer(), dx.producer()}
        reason = (
            (f"its mask is shared along axes {list(dropout['axes'])}" if dropout["axes"] else None)
            or (
                "the DropoutGrad has another p or mode than the dropout"
                if (grad["p"], grad["mode"], grad["axes"]) != (dropout["p"], dropout["mode"], ())
                else None
            )
            or (
                f"the probabilities {probs.name!r} are read outside the softmax backward"
                if probs.is_graph_output() or set(self.consumers(probs)) != inside
                else None
            )
            or self.second_consumer(mask, "mask")
            or self.second_consumer(weighted, "product g * P")
            or self.second_consumer(total, "sum")
            or self.second_consumer(centred, "difference")
            or (
                "g = DropoutGrad(dy) is read outside the softmax backward"
                if g.is_graph_output()
                or set(self.consumers(g)) != {weighted.producer(), centred.producer()}
                else None
            )
            or (
                f"the ReduceSum is not over the softmax axis {axis} with keepdims"
                if summed is None
                or reduce.attributes.get_int("keepdims", 1) != 1
                or not _same_axes(summed, axis, rank)
                else None
            )
        )
        return self.refuse(node, reason) if reason else self.accept()

    def rewrite(self, op, x, dy, y, probs, g, **_):
        node = y.producer()
        dropout = ops.schema("Dropout").attribute_values(node)
        attrs = {
            "p": dropout["p"],
            "mode": dropout["mode"],
            "axis": probs.producer().attributes.get_int("axis", -1),
        }
        y_new, mask = self.fusebridge_node(
            op, "SoftmaxDropout", [x, *_dropout_inputs(node)], attrs, 2, node.name or ""
        )
        mask.type = ir.TensorType(ir.DataType.UINT8)
        dx = self.fusebridge_node(
            op,
            "SoftmaxDropoutGrad",
            [dy, x, mask],
            attrs,
            name=g.producer().name or "",
            fires=False,
        )
        return y_new, dx


def _same_axes(summed: np.ndarray, axis: int, rank: int | None) -> bool:
    """Whether ReduceSum's axes are exactly the softmax axis (negative ones need the rank)."""
    if summed.size != 1:
        return False
    a = int(summed.reshape(-1)[0])
    if a == axis:
        return True
    return rank is not None and a % rank == axis % rank
