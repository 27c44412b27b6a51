"""The op schemas: node checks, and the generated op reference in docs/ kept up to date."""

from pathlib import Path

import onnx_ir as ir
import pytest

import fusebridge as fb
from fusebridge import ops


def value(name):
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT))


def test_docs_ops_md_is_generated_from_the_schemas():
    doc = Path(__file__).parents[2] / "docs" / "ops.md"
    assert doc.read_text() == ops.reference_markdown(), (
        "run: python -m fusebridge.ops > docs/ops.md"
    )


def test_node_fills_defaults_and_drops_trailing_absent_inputs():
    node = ops.node("GRU", [value("x"), value("o"), value("wh"), None, None, None])
    assert len(node.inputs) == 3
    attrs = ops.schema("GRU").attribute_values(node)
    assert (
        attrs["origin_mode"] == 1 and attrs["layout"] == "lod" and attrs["direction"] == "forward"
    )


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "match"),
    [
        ("GRU", 2, {}, r"2 inputs, expected 3 to 6 \(X, lengths\?, Wh, B\?, B_h\?, H0\?\)"),
        ("GRU", 3, {"direction": "up"}, "attribute direction = 'up', expected one of"),
        ("GRU", 3, {"origin_mode": 2}, r"attribute origin_mode = 2, expected one of \[0, 1\]"),
        ("SequencePool", 2, {"pooltype": "MEDIAN"}, "pooltype = 'MEDIAN'"),
        ("SequencePool", 2, {"stride": 2}, r"unknown attribute\(s\) \['stride'\]"),
        ("Softmax", 1, {}, "unknown op 'Softmax'"),
    ],
)
def test_bad_nodes_name_the_op_and_what_was_expected(op, inputs, attrs, match):
    with pytest.raises(fb.ArgumentError, match=match):
        ops.node(op, [value(f"i{k}") for k in range(inputs)], attrs)


def test_a_required_input_cannot_be_absent():
    with pytest.raises(fb.ArgumentError, match="input Wx is required"):
        ops.node("FusionGRU", [value("x"), value("offsets"), None, value("wh")])
    # lengths may be left out (a padded layout whose sequences all have T steps)
    ops.node("FusionGRU", [value("x"), None, value("wx"), value("wh")], {"layout": "tnc"})
