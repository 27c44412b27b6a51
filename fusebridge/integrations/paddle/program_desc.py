"""Paddle's legacy ProgramDesc (`__model__`, `*.pdmodel`) read without paddle or protobuf.

A minimal protobuf wire-format reader driven by tables of field numbers copied from the
framework.proto shipped in the paddlepaddle 3.3.1 wheel. Model files are
untrusted input: every malformation becomes a ModelFormatError that says where it was found.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import ml_dtypes
import numpy as np

from fusebridge.errors import ModelFormatError

# VarType.Type values that are data types (the same enum also names variable kinds).
DTYPES: dict[int, np.dtype] = {
    0: np.dtype(np.bool_),
    1: np.dtype(np.int16),
    2: np.dtype(np.int32),
    3: np.dtype(np.int64),
    4: np.dtype(np.float16),
    5: np.dtype(np.float32),
    6: np.dtype(np.float64),
    20: np.dtype(np.uint8),
    21: np.dtype(np.int8),
    22: np.dtype(ml_dtypes.bfloat16),
    23: np.dtype(np.complex64),
    24: np.dtype(np.complex128),
    32: np.dtype(ml_dtypes.float8_e4m3fn),
    33: np.dtype(ml_dtypes.float8_e5m2),
    36: np.dtype(np.uint16),
    37: np.dtype(np.uint32),
    38: np.dtype(np.uint64),
}

# VarType.Type values that are variable kinds.
DENSE_TENSOR = 7
SELECTED_ROWS = 8
FEED_MINIBATCH = 9
FETCH_LIST = 10
DENSE_TENSOR_ARRAY = 13
READER = 15
RAW = 17


@dataclass(frozen=True)
class VarDesc:
    name: str
    type: int  # VarType.Type: DENSE_TENSOR, FEED_MINIBATCH, ...
    dtype: np.dtype | None  # None for variables that hold no tensor (feed, fetch, raw, ...)
    shape: tuple[int, ...]  # -1 = unknown
    lod_level: int
    persistable: bool
    # Set on the variables paddle.static.data declares: what a training program is fed.
    need_check_feed: bool = False


@dataclass(frozen=True)
class OpDesc:
    type: str
    inputs: dict[str, tuple[str, ...]]
    outputs: dict[str, tuple[str, ...]]
    attrs: dict[str, object]
    # Each attribute's AttrType as the file declares it (ATTR_TYPE_NAMES): readers check it, so
    # that a STRING 'False' is never read where Paddle declares a BOOLEAN.
    attr_types: dict[str, int] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class BlockDesc:
    idx: int
    parent_idx: int
    vars: dict[str, VarDesc]
    ops: tuple[OpDesc, ...]


@dataclass(frozen=True)
class ProgramDesc:
    blocks: tuple[BlockDesc, ...]
    version: int


# Message tables: field number -> (name, kind, repeated). A kind is a scalar type or "msg";
# sub-messages are kept as (start, end) spans and decoded by the caller, which knows how to
# name them in error messages.
_Table = dict[int, tuple[str, str, bool]]

_PROGRAM: _Table = {1: ("blocks", "msg", True), 4: ("version", "msg", False)}
_VERSION: _Table = {1: ("version", "int64", False)}
_BLOCK: _Table = {
    1: ("idx", "int32", False),
    2: ("parent_idx", "int32", False),
    3: ("vars", "msg", True),
    4: ("ops", "msg", True),
}
_OP: _Table = {
    1: ("inputs", "msg", True),
    2: ("outputs", "msg", True),
    3: ("type", "string", False),
    4: ("attrs", "msg", True),
}
_OP_VAR: _Table = {1: ("parameter", "string", False), 2: ("arguments", "string", True)}
_ATTR: _Table = {
    1: ("name", "string", False),
    2: ("type", "int32", False),
    3: ("i", "int32", False),
    4: ("f", "float", False),
    5: ("s", "string", False),
    6: ("ints", "int32", True),
    7: ("floats", "float", True),
    8: ("strings", "string", True),
    10: ("b", "bool", False),
    11: ("bools", "bool", True),
    12: ("block_idx", "int32", False),
    13: ("l", "int64", False),
    14: ("blocks_idx", "int32", True),
    15: ("longs", "int64", True),
    16: ("float64s", "double", True),
    17: ("var_name", "string", False),
    18: ("vars_name", "string", True),
    19: ("float64", "double", False),
    20: ("scalar", "msg", False),
    21: ("scalars", "msg", True),
}
_SCALAR: _Table = {
    1: ("type", "int32", False),
    2: ("b", "bool", False),
    3: ("i", "int64", False),
    4: ("r", "double", False),
    5: ("c", "msg", False),
}
_COMPLEX: _Table = {1: ("r", "double", False), 2: ("i", "double", False)}
_VAR: _Table = {
    1: ("name", "string", False),
    2: ("type", "msg", False),
    3: ("persistable", "bool", False),
    4: ("need_check_feed", "bool", False),
}
_VAR_TYPE: _Table = {
    1: ("type", "int32", False),
    2: ("selected_rows", "msg", False),
    3: ("dense_tensor", "msg", False),
    4: ("tensor_array", "msg", False),
}
_DENSE: _Table = {1: ("tensor", "msg", False), 2: ("lod_level", "int32", False)}
_TENSOR: _Table = {1: ("data_type", "int32", False), 2: ("dims", "int64", True)}

# AttrType -> the Attr field holding the value, and its default when the field is absent
# (None: a repeated field, default []).
_ATTR_VALUE: dict[int, tuple[str, object]] = {
    0: ("i", 0),
    1: ("f", 0.0),
    2: ("s", ""),
    3: ("ints", None),
    4: ("floats", None),
    5: ("strings", None),
    6: ("b", False),
    7: ("bools", None),
    8: ("block_idx", 0),
    9: ("l", 0),
    10: ("blocks_idx", None),
    11: ("longs", None),
    12: ("float64s", None),
    13: ("var_name", ""),
    14: ("vars_name", None),
    15: ("float64", 0.0),
    16: ("scalar", 0),
    17: ("scalars", None),
}

# AttrType names (framework.proto), for messages.
ATTR_TYPE_NAMES = {
    0: "INT",
    1: "FLOAT",
    2: "STRING",
    3: "INTS",
    4: "FLOATS",
    5: "STRINGS",
    6: "BOOLEAN",
    7: "BOOLEANS",
    8: "BLOCK",
    9: "LONG",
    10: "BLOCKS",
    11: "LONGS",
    12: "FLOAT64S",
    13: "VAR",
    14: "VARS",
    15: "FLOAT64",
    16: "SCALAR",
    17: "SCALARS",
}
_BLOCK_ATTR, _BLOCKS_ATTR = 8, 10
_INT64_MAX = (1 << 63) - 1

_WIRE = {"int32": 0, "int64": 0, "bool": 0, "float": 5, "double": 1, "string": 2, "msg": 2}
_FIXED = {"float": struct.Struct("<f"), "double": struct.Struct("<d")}
_Span = tuple[int, int]


def _fail(what: str, problem: str, pos: int) -> NoReturn:
    raise ModelFormatError(f"{what}: {problem} at byte {pos}")


def _varint(buf: bytes | memoryview, pos: int, end: int, what: str) -> tuple[int, int]:
    start, result, shift = pos, 0, 0
    while True:
        if pos >= end:
            _fail(what, "truncated varint", start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            # Bits past 64 are dropped, as protobuf does.
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7
        if shift >= 70:
            _fail(what, "varint longer than 10 bytes", start)


def _signed(value: int, kind: str) -> int | bool:
    if kind == "bool":
        return value != 0
    if kind == "int32":
        value &= 0xFFFF_FFFF  # protobuf truncates int32 (negatives arrive sign-extended)
        return value - (1 << 32) if value >= 1 << 31 else value
    return value - (1 << 64) if value >= 1 << 63 else value


def _string(buf: bytes | memoryview, start: int, end: int, what: str) -> str:
    try:
        return bytes(buf[start:end]).decode("utf-8")
    except UnicodeDecodeError as e:
        _fail(what, f"invalid UTF-8 string ({e.reason})", start + e.start)


def _decode(
    buf: bytes | memoryview,
    span: _Span,
    table: _Table,
    what: str,
    label: tuple[str, Callable[[Any], str]] | None = None,
) -> tuple[dict[str, Any], str]:
    """The fields of one message, and `what` renamed by `label` = (field, rename) once that field
    is read, so that errors later in the message name e.g. the op type."""
    pos, end = span
    fields: dict[str, Any] = {}
    while pos < end:
        key_pos = pos
        key, pos = _varint(buf, pos, end, what)
        number, wire = key >> 3, key & 7
        if wire == 0:
            raw, pos = _varint(buf, pos, end, what)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if end - pos < size:
                _fail(what, f"truncated {size * 8}-bit field {number}", pos)
            value_span, pos = (pos, pos + size), pos + size
        elif wire == 2:
            length, pos = _varint(buf, pos, end, what)
            if length > end - pos:
                _fail(what, f"field {number}: length {length} past the end", pos)
            value_span, pos = (pos, pos + length), pos + length
        else:  # groups (3, 4) are unused by Paddle; 6 and 7 do not exist
            _fail(what, f"unsupported wire type {wire} (field {number})", key_pos)
        if number not in table:
            continue  # unknown fields are skipped, as protobuf does
        name, kind, repeated = table[number]
        packed = repeated and wire == 2 and kind not in ("string", "msg")
        if wire != _WIRE[kind] and not packed:
            _fail(what, f"field {number} ({name}) has wire type {wire}", key_pos)
        if packed:
            values = _unpack(buf, value_span, kind, f"{what}: {name}")
        elif wire == 0:
            values = [_signed(raw, kind)]
        elif kind in _FIXED:
            values = [_FIXED[kind].unpack_from(buf, value_span[0])[0]]
        elif kind == "string":
            values = [_string(buf, *value_span, what)]
        else:
            values = [value_span]
        if repeated:
            fields.setdefault(name, []).extend(values)
        else:
            fields[name] = values[0]  # the last one wins, as in protobuf
            if label is not None and name == label[0]:
                what = label[1](values[0])
    return fields, what


def _unpack(buf: bytes | memoryview, span: _Span, kind: str, what: str) -> list:
    pos, end = span
    if kind in _FIXED:
        size = _FIXED[kind].size
        if (end - pos) % size:
            _fail(what, f"packed length {end - pos} is not a multiple of {size}", pos)
        return [v for (v,) in _FIXED[kind].iter_unpack(bytes(buf[pos:end]))]
    values = []
    while pos < end:
        raw, pos = _varint(buf, pos, end, what)
        values.append(_signed(raw, kind))
    return values


def _require(fields: dict[str, Any], names: tuple[str, ...], what: str, span: _Span) -> None:
    for name in names:
        if name not in fields:
            _fail(what, f"missing field '{name}' in the message", span[0])


def parse_tensor_desc(
    buf: bytes | memoryview, start: int, end: int, what: str
) -> tuple[np.dtype, tuple[int, ...]]:
    """A VarType.TensorDesc held in buf[start:end] (byte positions in errors are in buf)."""
    fields, _ = _decode(buf, (start, end), _TENSOR, what)
    _require(fields, ("data_type",), what, (start, end))
    code = fields["data_type"]
    if code not in DTYPES:
        _fail(what, f"unknown data type enum {code}", start)
    return DTYPES[code], tuple(fields.get("dims", ()))


def _var(buf: bytes | memoryview, span: _Span, where: str) -> VarDesc:
    fields, what = _decode(buf, span, _VAR, where, ("name", lambda n: f"{where} ({n})"))
    _require(fields, ("name", "type"), what, span)
    var_type, _ = _decode(buf, fields["type"], _VAR_TYPE, what)
    _require(var_type, ("type",), what, span)
    dtype, shape, lod_level = None, (), 0
    for key in ("dense_tensor", "tensor_array", "selected_rows"):
        if key not in var_type:
            continue
        tensor_span = var_type[key]
        if key != "selected_rows":
            dense, _ = _decode(buf, tensor_span, _DENSE, f"{what}: {key}")
            _require(dense, ("tensor",), f"{what}: {key}", tensor_span)
            tensor_span, lod_level = dense["tensor"], dense.get("lod_level", 0)
        dtype, shape = parse_tensor_desc(buf, *tensor_span, f"{what}: {key}")
        _check_declared_shape(shape, lod_level, f"{what}: {key}", tensor_span[0])
        break
    return VarDesc(
        name=fields["name"],
        type=var_type["type"],
        dtype=dtype,
        shape=shape,
        lod_level=lod_level,
        persistable=fields.get("persistable", False),
        need_check_feed=fields.get("need_check_feed", False),
    )


def _check_declared_shape(shape: tuple[int, ...], lod_level: int, what: str, pos: int) -> None:
    """A VarDesc's dims are sizes or -1 (unknown); their known product must fit in int64, as
    Paddle's numel does. Later code multiplies them without further checks."""
    if any(d < -1 for d in shape):
        _fail(what, f"dims {list(shape)}: a size below -1 (-1 = unknown)", pos)
    known = 1
    for d in shape:
        known *= max(d, 1)
        if known > _INT64_MAX:
            _fail(what, f"dims {list(shape)}: more than 2**63 - 1 elements", pos)
    if lod_level < 0:
        _fail(what, f"negative lod_level {lod_level}", pos)


def _scalar(buf: bytes | memoryview, span: _Span, what: str) -> bool | int | float | complex:
    fields, _ = _decode(buf, span, _SCALAR, what)
    kind = fields.get("type")
    if kind == 1:
        return fields.get("b", False)
    if kind == 2:
        return fields.get("i", 0)
    if kind == 3:
        return fields.get("r", 0.0)
    if kind == 4:
        parts, _ = _decode(buf, fields.get("c", (0, 0)), _COMPLEX, what)
        return complex(parts.get("r", 0.0), parts.get("i", 0.0))
    _fail(what, f"unknown scalar type {kind}", span[0])


def _attr(buf: bytes | memoryview, span: _Span, op: str, index: int) -> tuple[str, int, object]:
    """(name, AttrType, value) of one OpDesc.Attr."""
    label = ("name", lambda n: f"{op}: attribute {n!r}")
    fields, what = _decode(buf, span, _ATTR, f"{op}: attribute {index}", label)
    _require(fields, ("name", "type"), what, span)
    kind = fields["type"]
    if kind not in _ATTR_VALUE:
        _fail(what, f"unknown attribute type {kind}", span[0])
    field_name, default = _ATTR_VALUE[kind]
    value = fields.get(field_name, [] if default is None else default)
    if field_name == "scalar":
        value = _scalar(buf, fields["scalar"], what) if "scalar" in fields else 0
    elif field_name == "scalars":
        value = [_scalar(buf, s, what) for s in value]
    return fields["name"], kind, value


def _slots(buf: bytes | memoryview, spans: list[_Span], what: str) -> dict[str, tuple[str, ...]]:
    slots: dict[str, tuple[str, ...]] = {}
    for span in spans:
        fields, _ = _decode(buf, span, _OP_VAR, what)
        _require(fields, ("parameter",), what, span)
        # Paddle keeps slots in a map: a second one of a name is not something it writes.
        if fields["parameter"] in slots:
            _fail(what, f"duplicate slot {fields['parameter']!r}", span[0])
        slots[fields["parameter"]] = tuple(fields.get("arguments", ()))
    return slots


def _op(buf: bytes | memoryview, span: _Span, where: str) -> OpDesc:
    fields, what = _decode(buf, span, _OP, where, ("type", lambda t: f"{where} ({t})"))
    _require(fields, ("type",), what, span)
    attrs: dict[str, object] = {}
    attr_types: dict[str, int] = {}
    for i, attr_span in enumerate(fields.get("attrs", ())):
        name, kind, value = _attr(buf, attr_span, what, i)
        if name in attrs:
            _fail(f"{what}: attribute {name!r}", "duplicate attribute", attr_span[0])
        attrs[name], attr_types[name] = value, kind
    return OpDesc(
        type=fields["type"],
        inputs=_slots(buf, fields.get("inputs", []), f"{what}: inputs"),
        outputs=_slots(buf, fields.get("outputs", []), f"{what}: outputs"),
        attrs=attrs,
        attr_types=attr_types,
    )


def _block(buf: bytes | memoryview, span: _Span, what: str) -> BlockDesc:
    fields, _ = _decode(buf, span, _BLOCK, what)
    _require(fields, ("idx", "parent_idx"), what, span)
    variables: dict[str, VarDesc] = {}
    for i, var_span in enumerate(fields.get("vars", ())):
        var = _var(buf, var_span, f"{what}, var {i}")
        if var.name in variables:
            _fail(f"{what}, var {i}", f"duplicate variable {var.name!r}", var_span[0])
        variables[var.name] = var
    ops = tuple(_op(buf, s, f"{what}, op {i}") for i, s in enumerate(fields.get("ops", ())))
    return BlockDesc(fields["idx"], fields["parent_idx"], variables, ops)


def parse_program_desc(data: bytes) -> ProgramDesc:
    """Decodes a serialized ProgramDesc; raises ModelFormatError on anything malformed."""
    buf = bytes(data)
    fields, _ = _decode(buf, (0, len(buf)), _PROGRAM, "ProgramDesc")
    blocks = tuple(
        _block(buf, s, f"ProgramDesc: block {i}") for i, s in enumerate(fields.get("blocks", ()))
    )
    if not blocks:
        raise ModelFormatError("ProgramDesc: no blocks (is this a Paddle legacy model file?)")
    _check_block_references(blocks)
    version = 0
    if "version" in fields:
        version_fields, _ = _decode(buf, fields["version"], _VERSION, "ProgramDesc: version")
        version = version_fields.get("version", 0)
    return ProgramDesc(blocks, version)


def _check_block_references(blocks: tuple[BlockDesc, ...]) -> None:
    """Block i has idx i, a parent before it (block 0: -1), and every BLOCK/BLOCKS attribute
    (sub_block of while, conditional_block, ...) names a block of the program."""
    for i, block in enumerate(blocks):
        what = f"ProgramDesc: block {i}"
        if block.idx != i:
            raise ModelFormatError(f"{what}: idx {block.idx}, expected its position {i}")
        expected = "-1" if i == 0 else f"a block in [0, {i})"
        if (block.parent_idx != -1) if i == 0 else not 0 <= block.parent_idx < i:
            raise ModelFormatError(f"{what}: parent_idx {block.parent_idx}, expected {expected}")
        for k, op in enumerate(block.ops):
            for name, kind in op.attr_types.items():
                if kind not in (_BLOCK_ATTR, _BLOCKS_ATTR):
                    continue
                value = op.attrs[name]
                targets = value if kind == _BLOCKS_ATTR else [value]
                if any(not 0 <= t < len(blocks) for t in targets):
                    raise ModelFormatError(
                        f"{what}, op {k} ({op.type}): attribute {name!r} = {value}: block index "
                        f"outside the program's {len(blocks)} blocks [0, {len(blocks)})"
                    )
