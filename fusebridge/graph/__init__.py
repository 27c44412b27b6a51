"""The graph toolkit every layer above builds and checks onnx_ir graphs with: OpBuilder and
replace_node (builder.py), each standard op's form at an opset (opset_forms.py), ONNX Runtime's
contrib ops in standard ones (contrib_ops.py), the graph checks and the one way a node is named
in messages (checks.py), ONNX type inference (type_inference.py). It knows no op of ours: those
live in fusebridge/ops/, one layer up."""
