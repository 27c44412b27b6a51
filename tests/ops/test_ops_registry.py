"""The op registry: each op is whole in its module (schema, typed attributes, cpu binding,
oracle), and its typed attribute object agrees with its schema."""

import dataclasses

import numpy as np
import onnx_ir as ir
import pytest

from fusebridge import ops
from fusebridge.errors import ArgumentError
from fusebridge.ops.gru import ACTIVATIONS, GRUAttributes
from fusebridge.ops.schema import Attribute, OpSchema


@pytest.mark.parametrize("op_type", sorted(ops.REGISTRY))
def test_each_op_is_whole(op_type):
    d = ops.op(op_type)
    assert d.schema.op_type == op_type == d.reference.__name__
    assert d.reference.schema is d.schema
    fields = dataclasses.fields(d.schema.attributes_type)
    for f, a in zip(fields, d.schema.attributes, strict=True):
        assert (f.name, f.default) == (a.name, a.default), f"{op_type}.{a.name}"


def test_a_node_parses_into_its_typed_attributes():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    node = ops.node("FusionGRU", [x, x, x, x], {"direction": "bidirectional", "layout": "tnc"})
    attrs = ops.schema("FusionGRU").parse(node)
    assert attrs == GRUAttributes(direction="bidirectional", layout="tnc")
    assert attrs.directions == 2 and attrs.kernel_arguments()["origin_mode"] is True
    with pytest.raises(ArgumentError, match=r"activation = 'swish', expected one of"):
        ops.node("FusionGRU", [x, x, x, x], {"activation": "swish"})
    assert ops.schema("GRU").attributes[3].choices == ACTIVATIONS


def test_a_schema_whose_attribute_type_disagrees_is_refused_when_made():
    @dataclasses.dataclass(frozen=True)
    class Wrong:
        q: float = 0.5

    with pytest.raises(TypeError, match=r"fields \['q'\], the schema's attributes are \['p'\]"):
        OpSchema("Op", ("X",), ("Y",), (Attribute("p", 0.5),), "", attributes_type=Wrong)


def test_bindings_get_inputs_padded_to_the_schema():
    # A Dropout node with X alone: the binding unpacks (x, seed, offset), so the registry's
    # caller pads; here an is_test dropout runs with the one input.
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    node = ops.node("Dropout", [x], {"is_test": 1, "p": 0.25, "mode": "downgrade_in_infer"})
    run = ops.prepare(node, {})
    data = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(run([data, None, None])[0], data * np.float32(0.75))
