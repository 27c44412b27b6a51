"""inference_dropout: an is_test Dropout becomes what it computes, an identity
(upscale_in_train) or a scale by 1 - p (downgrade_in_infer), so that the ops around it can
fuse. Never dropped silently where the mode needs the scale."""

from __future__ import annotations

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
