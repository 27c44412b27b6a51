"""What the Paddle converters share: the table CONVERTERS (op type -> converter; `lod`, the input
slot whose sentence boundaries the op's outputs keep, None for none), the reads of an op's
slots and attributes, checked as Paddle checks them, and the numbers and dtypes they make.

A converter takes the ProgramConverter (load.py) and the OpDesc, and defines the op's outputs;
every error it raises starts with `cx.where()`, which names the model and the op (node_label:
`Paddle scale node #1 of block 0`)."""

from __future__ import annotations

import math
import reprlib

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.converters import ConverterRegistry
from fusebridge.integrations.paddle.program_desc import ATTR_TYPE_NAMES, OpDesc

CONVERTERS = ConverterRegistry("Paddle converter", lod="X")

# Paddle's VarType data type enum -> ONNX (Paddle's framework.proto).
PADDLE_DTYPES = {
    0: ir.DataType.BOOL,
    1: ir.DataType.INT16,
    2: ir.DataType.INT32,
    3: ir.DataType.INT64,
    4: ir.DataType.FLOAT16,
    5: ir.DataType.FLOAT,
    6: ir.DataType.DOUBLE,
    20: ir.DataType.UINT8,
    21: ir.DataType.INT8,
    22: ir.DataType.BFLOAT16,
}

# The AttrTypes a value of each kind may be written as (Paddle declares padding_idx and
# arg_max's axis LONG, other integers INT; fill_constant's shape LONGS, reshape2's INTS).
# Anything else is refused: bool('False') is True, int('1.5') fails, a list is no axis.
_ATTR_KINDS: dict[str, tuple[int, ...]] = {
    "int": (0, 9),
    "float": (1, 15),
    "bool": (6,),
    "str": (2,),
    "ints": (3, 11),
    "floats": (4,),
    "bools": (7,),
    "scalars": (17,),
}
_shown = reprlib.Repr()
_shown.maxlist = _shown.maxstring = 12


def show(value: object) -> str:
    """value's repr, long lists and strings cut short (for messages)."""
    return _shown.repr(value)


def read_attr(op: OpDesc, name: str, kind: str, default: object, where: str) -> object:
    """Attribute `name` of `op`, which the file must declare as a `kind` (_ATTR_KINDS); absent,
    `default` (None: it is required). `where` names the model and the op in errors."""
    if name not in op.attrs:
        if default is None:
            raise ModelFormatError(f"{where}: attribute {name!r} is missing")
        return default
    declared = op.attr_types.get(name)
    if declared not in _ATTR_KINDS[kind]:
        expected = " or ".join(ATTR_TYPE_NAMES[t] for t in _ATTR_KINDS[kind])
        raise ModelFormatError(
            f"{where}: attribute {name!r} = {show(op.attrs[name])} is declared "
            f"{ATTR_TYPE_NAMES.get(declared, declared)}; expected {expected}"
        )
    return op.attrs[name]


def attribute(cx, op: OpDesc, name: str, kind: str, default: object = None) -> object:
    return read_attr(op, name, kind, default, cx.where())


def choice(cx, op: OpDesc, name: str, choices: tuple, default: object = None) -> object:
    value = attribute(cx, op, name, "str" if isinstance(choices[0], str) else "int", default)
    if value not in choices:
        raise UnsupportedOpError(
            f"{cx.where()}: attribute {name} = {value!r} is not supported; expected one of "
            f"{list(choices)}"
        )
    return value


def axis_attribute(cx, op: OpDesc, name: str, rank: int, default: int) -> int:
    """An axis attribute, in [-rank, rank) as Paddle requires (negative counts from the end)."""
    axis = attribute(cx, op, name, "int", default)
    if not -rank <= axis < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} = {axis} is outside [{-rank}, {rank}) for an input "
            f"of rank {rank}"
        )
    return axis


def col_dims(cx, op: OpDesc, name: str, var: str) -> int:
    """mul's and fc's x/y_num_col_dims: the axes flattened into rows, in [1, rank) as Paddle's
    InferShape requires."""
    rank = cx.rank_of(var)
    cols = attribute(cx, op, name, "int", 1)
    if not 1 <= cols < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} = {cols} must lie in [1, {rank}) for {var!r} of "
            f"rank {rank}"
        )
    return cols


def permutation(cx, op: OpDesc, var: str) -> list[int]:
    """transpose2's `axis`: a permutation of X's axes."""
    perm = attribute(cx, op, "axis", "ints")
    rank = cx.rank_of(var)
    if sorted(perm) != list(range(rank)):
        raise ModelFormatError(
            f"{cx.where()}: attribute axis = {show(perm)} is not a permutation of the "
            f"{rank} axes of {var!r}"
        )
    return list(perm)


def slot_names(op: OpDesc, slot: str, *, outputs: bool = False) -> tuple[str, ...]:
    return (op.outputs if outputs else op.inputs).get(slot, ())


def one_var(cx, op: OpDesc, slot: str, *, outputs: bool = False) -> str:
    names = slot_names(op, slot, outputs=outputs)
    if len(names) != 1:
        kind = "output" if outputs else "input"
        raise ModelFormatError(
            f"{cx.where()}: {kind} {slot} must name one variable, got {list(names)}"
        )
    return names[0]


def many_vars(cx, op: OpDesc, slot: str) -> tuple[str, ...]:
    names = slot_names(op, slot)
    if not names:
        raise ModelFormatError(f"{cx.where()}: input {slot} must name one variable or more")
    return names


def optional_var(cx, op: OpDesc, slot: str) -> str | None:
    names = slot_names(op, slot)
    if len(names) > 1:
        raise ModelFormatError(
            f"{cx.where()}: input {slot} must name at most one variable, got {list(names)}"
        )
    return names[0] if names else None


def define_out(cx, op: OpDesc, value: ir.Value, slot: str = "Out") -> None:
    cx.define(one_var(cx, op, slot, outputs=True), value)


def number(cx, value: float, dtype: np.dtype, what: str) -> np.ndarray:
    """value as a 0-d array of dtype; an integer dtype takes only the values it holds (numpy
    raises on NaN and wraps others)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        if not (math.isfinite(value) and limits.min <= value <= limits.max):
            raise ModelFormatError(
                f"{cx.where()}: {what} {value} does not fit the integer dtype {dtype}"
            )
    return np.asarray(value, dtype)


def scalar_like(cx, value: float, like: ir.Value, name: str, what: str) -> ir.Value:
    dtype = like.dtype.numpy() if like.dtype is not None else np.float32
    return cx.const(number(cx, value, dtype, what), name)


def int_list(cx, op: OpDesc, name: str) -> list[int]:
    return list(attribute(cx, op, name, "ints", []))


def refuse_tensor_inputs(cx, op: OpDesc, slots: tuple[str, ...], instead: str) -> None:
    """Refuses the tensor forms of attributes (PIR's computed operands land there too)."""
    for slot in slots:
        if slot_names(op, slot):
            raise UnsupportedOpError(
                f"{cx.where()}: input {slot} = {list(slot_names(op, slot))} (a computed "
                f"{instead}) is not supported; only the attribute {instead}"
            )


def declared_dims(cx, var: str) -> tuple[int, ...] | None:
    """var's declared dims (-1: unknown), or None when it has no VarDesc."""
    if cx.is_param(var):
        return cx.param(var).shape
    desc = cx.block.vars.get(var)
    return tuple(desc.shape) if desc is not None else None
