"""ONNX shape inference on an onnx_ir model, the inferred types merged back whole.

onnx_ir's ShapeInferencePass (onnx_ir 1.1) merges by setting `value.dtype`, which turns a
sequence value (SplitToSequence's output) into a tensor of its element type: a file written
afterwards fails strict shape inference ("type case mismatch. existing=tensor_type
inferred=sequence_type"), and an ONNX Runtime partition would declare the wrong type. Here a
value whose inferred type is not a tensor type takes that type as it is; tensors merge as in
onnx_ir (shape and element type).

Without data propagation: with it, onnx computes the values of small shape-like tensors, and a
Range of constants that a file makes 3e9 long had it allocate that (killed for memory here)."""

from __future__ import annotations

import logging

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import _c_api_utils

logger = logging.getLogger(__name__)


class InferTypes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        def infer(proto: onnx.ModelProto) -> onnx.ModelProto:
            return onnx.shape_inference.infer_shapes(
                proto, check_type=True, strict_mode=True, data_prop=False
            )

        try:
            # call_onnx_api leaves the initializers' data out of the proto it hands to onnx.
            inferred = ir.serde.deserialize_model(_c_api_utils.call_onnx_api(infer, model))
        except Exception as exc:  # onnx raises InferenceError and others
            logger.warning("shape inference failed, types left as they were: %s", exc)
            return ir.passes.PassResult(model, False)
        modified = False
        for graph, inferred_graph in zip(model.graphs(), inferred.graphs()):
            found = ir.convenience.create_value_mapping(inferred_graph)
            for name, value in ir.convenience.create_value_mapping(graph).items():
                new = found.get(name)
                if new is None or new.type is None:
                    continue
                if not isinstance(new.type, ir.TensorType):
                    modified |= value.type != new.type
                    value.type = new.type
                    continue
                if new.shape is not None and value.shape != new.shape:
                    value.shape = new.shape
                    modified = True
                if value.dtype != new.dtype:
                    value.dtype = new.dtype
                    modified = True
        return ir.passes.PassResult(model, modified)
