"""ProgramDesc dataclasses (program_desc.py) written back in Paddle's protobuf wire format, so
that tests can change a parsed program and save it again. Each attribute is written as the
AttrType it has in `OpDesc.attr_types`."""

from __future__ import annotations

from fusebridge.integrations.paddle.program_desc import (
    DENSE_TENSOR_ARRAY,
    DTYPES,
    SELECTED_ROWS,
    BlockDesc,
    OpDesc,
    ProgramDesc,
    VarDesc,
)

from .protobuf_wire import f32, f64, ld, vi

_CODES = {dtype: code for code, dtype in DTYPES.items()}


def _scalar(value: object) -> bytes:
    if isinstance(value, bool):
        return vi(1, 1) + vi(2, value)
    if isinstance(value, int):
        return vi(1, 2) + vi(3, value)
    if isinstance(value, float):
        return vi(1, 3) + f64(4, value)
    return vi(1, 4) + ld(5, f64(1, value.real) + f64(2, value.imag))


# AttrType -> (field number, encoder of one value, repeated)
_ATTR_FIELDS = {
    0: (3, vi, False),
    1: (4, f32, False),
    2: (5, ld, False),
    3: (6, vi, True),
    4: (7, f32, True),
    5: (8, ld, True),
    6: (10, vi, False),
    7: (11, vi, True),
    8: (12, vi, False),
    9: (13, vi, False),
    10: (14, vi, True),
    11: (15, vi, True),
    12: (16, f64, True),
    13: (17, ld, False),
    14: (18, ld, True),
    15: (19, f64, False),
    16: (20, lambda n, v: ld(n, _scalar(v)), False),
    17: (21, lambda n, v: ld(n, _scalar(v)), True),
}


def _attr(name: str, kind: int, value: object) -> bytes:
    field, encode, repeated = _ATTR_FIELDS[kind]
    values = value if repeated else [value]
    return ld(1, name) + vi(2, kind) + b"".join(encode(field, v) for v in values)


def _slots(field: int, slots: dict[str, tuple[str, ...]]) -> bytes:
    return b"".join(
        ld(field, ld(1, slot) + b"".join(ld(2, a) for a in args)) for slot, args in slots.items()
    )


def write_op(op: OpDesc) -> bytes:
    attrs = b"".join(ld(4, _attr(n, op.attr_types[n], v)) for n, v in op.attrs.items())
    return _slots(1, op.inputs) + _slots(2, op.outputs) + ld(3, op.type) + attrs


def write_var(var: VarDesc) -> bytes:
    var_type = vi(1, var.type)
    if var.dtype is not None:
        tensor = vi(1, _CODES[var.dtype]) + b"".join(vi(2, d) for d in var.shape)
        if var.type == SELECTED_ROWS:
            var_type += ld(2, tensor)
        else:
            dense = ld(1, tensor) + vi(2, var.lod_level)
            var_type += ld(4 if var.type == DENSE_TENSOR_ARRAY else 3, dense)
    flags = vi(3, var.persistable) + vi(4, var.need_check_feed)
    return ld(1, var.name) + ld(2, var_type) + flags


def write_block(block: BlockDesc) -> bytes:
    variables = b"".join(ld(3, write_var(v)) for v in block.vars.values())
    ops = b"".join(ld(4, write_op(op)) for op in block.ops)
    return vi(1, block.idx) + vi(2, block.parent_idx) + variables + ops


def write_program(program: ProgramDesc) -> bytes:
    blocks = b"".join(ld(1, write_block(b)) for b in program.blocks)
    return blocks + ld(4, vi(1, program.version))
