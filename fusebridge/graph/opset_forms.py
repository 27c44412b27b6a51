"""Each standard op in the form its schema has at a target opset. Our builders write ops in one
form (opset 17's, and an `axes` list either as the attribute or as the input); a model keeps
its own opset (ONNX Runtime partitions run at it, the portable export is written at it), so
what a pass emits is rewritten here into that opset's form: Unsqueeze/Squeeze/ReduceSum take
axes as an attribute below 13 (the other Reduce* below 18), Split its split below 13, Shape has
no start/end below 15, CastLike does not exist below 15, GRU has no layout below 14, Softmax
flattened its trailing axes below 13. What has no form at the target opset raises
UnsupportedOpError naming the node, the op and the opset."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir

from fusebridge.errors import UnsupportedOpError

_INT64_MAX = np.iinfo(np.int64).max

# The inputs that were attributes in earlier opsets: name -> their input position.
_MOVED_TO_INPUTS = {"axes": 1, "split": 1}

Emit = Callable[[list, dict, int], object]  # (inputs, attributes, outputs) -> value(s)


def schema_at(op_type: str, opset: int, where: str) -> onnx.defs.OpSchema:
    """The schema of standard op `op_type` in force at `opset`."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        schema = None
    if schema is None or schema.deprecated:
        raise UnsupportedOpError(
            f"{where}: standard op {op_type} does not exist at opset {opset}, the model's"
        )
    return schema


def check_form(op_type: str, opset: int, inputs: list, attributes: dict, outputs: int, where: str):
    """`op_type` with these inputs, attributes and number of outputs is valid at `opset`."""
    schema = schema_at(op_type, opset, where)
    known = set(schema.attributes)
    wrong = sorted(set(attributes) - known)
    if wrong or not schema.min_input <= len(inputs) <= schema.max_input:
        raise UnsupportedOpError(
            f"{where}: {op_type} with {len(inputs)} input(s) and attribute(s) "
            f"{sorted(attributes)} has no form at opset {opset} (the model's), which takes "
            f"{schema.min_input} to {schema.max_input} input(s) and attributes {sorted(known)}"
        )
    if outputs > schema.max_output:
        raise UnsupportedOpError(
            f"{where}: {op_type} with {outputs} outputs has no form at opset {opset}"
        )
    _check_types(schema, inputs, where)


def _check_types(schema: onnx.defs.OpSchema, inputs: list, where: str) -> None:
    """Each input of a known type is of a type the schema allows (Min takes int64 from 12)."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    formal = list(schema.inputs)
    for i, value in enumerate(inputs):
        if value is None or value.dtype is None or not formal:
            continue
        param = formal[min(i, len(formal) - 1)]
        type_str = f"tensor({onnx.TensorProto.DataType.Name(value.dtype.value).lower()})"
        types = allowed.get(param.type_str, {param.type_str})
        if type_str not in types:
            raise UnsupportedOpError(
                f"{where}: {schema.name} takes no {type_str} {param.name} at opset "
                f"{schema.since_version}+ (the model's opset), expected one of {sorted(types)}"
            )


def emit_at(
    op_type: str,
    opset: int,
    inputs: list,
    attributes: dict,
    outputs: int,
    emit: Emit,
    builder,
    where: str,
) -> object:
    """The op's value(s), recorded in its form at `opset` through `emit` (the builder's raw
    recorder) and `builder` (for the ops a form adds around it)."""
    special = _SPECIAL.get(op_type)
    if special is not None:
        result = special(opset, inputs, attributes, outputs, emit, builder, where)
        if result is not None:
            return result
    inputs, attributes = _moved_lists(op_type, opset, inputs, attributes, builder, where)
    check_form(op_type, opset, inputs, attributes, outputs, where)
    return emit(inputs, attributes, outputs)


def _moved_lists(op_type, opset, inputs, attributes, builder, where):
    """An `axes`/`split` list as the input or the attribute, whichever the schema at `opset`
    takes."""
    schema = schema_at(op_type, opset, where)
    input_names = [i.name for i in schema.inputs]
    inputs, attributes = list(inputs), dict(attributes)
    for name, position in _MOVED_TO_INPUTS.items():
        if name in attributes and name in input_names:
            values = attributes.pop(name)
            inputs += [None] * (position + 1 - len(inputs))
            inputs[position] = builder.ints(list(values), name)
        elif name in schema.attributes and len(inputs) > position and name not in input_names:
            value = inputs.pop(position)
            if value is not None:
                attributes[name] = [int(a) for a in _constant(value, op_type, name, opset, where)]
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs, attributes


def _constant(value: ir.Value, op_type: str, name: str, opset: int, where: str) -> np.ndarray:
    if value.const_value is None or value.is_graph_input():
        raise UnsupportedOpError(
            f"{where}: {op_type} takes {name} as an attribute at opset {opset} (the model's), "
            f"but its {name} {value.name!r} is computed in the graph"
        )
    return value.const_value.numpy().reshape(-1)


def _shape(opset, inputs, attributes, outputs, emit, builder, where):
    """Shape(x, start, end) below 15: Shape(x) then Slice."""
    if opset >= 15 or not ({"start", "end"} & attributes.keys()):
        return None
    start, end = attributes.get("start", 0), attributes.get("end", _INT64_MAX)
    full = emit(inputs, {}, 1)
    return builder.Slice(full, builder.ints([start], "start"), builder.ints([end], "end"))


def _cast_like(opset, inputs, attributes, outputs, emit, builder, where):
    """CastLike(x, like) below 15: Cast to like's type, which must be known here."""
    if opset >= 15:
        return None
    x, like = inputs
    if like.dtype is None:
        raise UnsupportedOpError(
            f"{where}: CastLike does not exist at opset {opset} (the model's), and the type of "
            f"{like.name!r} to cast to is not known"
        )
    return builder.Cast(x, to=like.dtype)


def _gru(opset, inputs, attributes, outputs, emit, builder, where):
    """GRU below 14 has no layout: layout 1 (batch first) is transposed around it."""
    if opset >= 14 or "layout" not in attributes:
        return None
    attributes = dict(attributes)
    batch_first = attributes.pop("layout")
    inputs = list(inputs)
    if batch_first:
        inputs[0] = builder.Transpose(inputs[0], perm=[1, 0, 2])  # [N, T, C] -> [T, N, C]
        if len(inputs) > 5 and inputs[5] is not None:
            inputs[5] = builder.Transpose(inputs[5], perm=[1, 0, 2])  # [N, D, H] -> [D, N, H]
    check_form("GRU", opset, inputs, attributes, outputs, where)
    result = emit(inputs, attributes, outputs)
    if not batch_first:
        return result
    values = [result] if outputs == 1 else list(result)
    perms = ([2, 0, 1, 3], [1, 0, 2])  # Y [T, D, N, H] -> [N, T, D, H]; Y_h -> [N, D, H]
    values = [builder.Transpose(v, perm=p) for v, p in zip(values, perms)]
    return values[0] if outputs == 1 else tuple(values)


def _min_max(opset, inputs, attributes, outputs, emit, builder, where, op_type="Min"):
    """Min/Max of two tensors below 12, where they take floats only: Where over Less, unless
    an input is known to be a float (the tape does not type every value it records)."""
    if (
        opset >= 12
        or len(inputs) != 2
        or any(v.dtype and v.dtype.is_floating_point() for v in inputs)
    ):
        return None
    a, b = inputs
    first = builder.Less(a, b) if op_type == "Min" else builder.Greater(a, b)
    return builder.Where(first, a, b)


def _softmax(opset, inputs, attributes, outputs, emit, builder, where, op_type="Softmax"):
    """Softmax/LogSoftmax/Hardmax below 13 flatten the axes from `axis` on: the same as ours
    (one axis) only for the last axis."""
    if opset >= 13:
        return None
    axis = attributes.get("axis", -1)
    rank = inputs[0].shape.rank() if inputs[0].shape is not None else None
    if axis != -1 and (rank is None or axis != rank - 1):
        raise UnsupportedOpError(
            f"{where}: {op_type} over axis {axis} (not the last) has no form at opset {opset} "
            "(the model's), where it flattens the trailing axes"
        )
    check_form(op_type, opset, inputs, {**attributes, "axis": -1}, outputs, where)
    return emit(inputs, {**attributes, "axis": -1}, outputs)


def _softmax_like(op_type: str):
    def adapt_softmax(opset, inputs, attributes, outputs, emit, builder, where):
        return _softmax(opset, inputs, attributes, outputs, emit, builder, where, op_type)

    return adapt_softmax


def _min_max_like(op_type: str):
    def adapt_min_max(opset, inputs, attributes, outputs, emit, builder, where):
        return _min_max(opset, inputs, attributes, outputs, emit, builder, where, op_type)

    return adapt_min_max


_SPECIAL = {
    "Min": _min_max_like("Min"),
    "Max": _min_max_like("Max"),
    "Shape": _shape,
    "CastLike": _cast_like,
    "GRU": _gru,
    **{name: _softmax_like(name) for name in ("Softmax", "LogSoftmax", "Hardmax")},
}
