"""One converter per Paddle op type: Paddle op -> ONNX ops, or fusebridge ops where ONNX has no
equivalent (gru, fusion_gru, crf_decoding, sequence_pool, dropout). Each takes the
ProgramConverter (load.py) and the OpDesc, and defines the op's outputs."""

from __future__ import annotations

import itertools
import math
import reprlib
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.program_desc import ATTR_TYPE_NAMES, OpDesc
from fusebridge.integrations.paddle.weight_layouts import paddle_weight_h_to_canonical
from fusebridge.kernels.arguments import as_probability
from fusebridge.ops.dropout import MODES
from fusebridge.ops.gru import ACTIVATIONS

CONVERTERS: dict[str, Callable] = {}
# Ops whose outputs keep the sentence boundaries of this input slot.
KEEPS_LOD: dict[str, str] = {}

# Paddle's VarType data type enum -> ONNX (Paddle's framework.proto).
_PADDLE_DTYPES = {
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


def converter(*op_types: str, lod: str | None = "X") -> Callable:
    def register(fn: Callable) -> Callable:
        for t in op_types:
            CONVERTERS[t] = fn
            if lod is not None:
                KEEPS_LOD[t] = lod
        return fn

    return register


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
            f"{where}: attribute {name!r} = {_shown.repr(op.attrs[name])} is declared "
            f"{ATTR_TYPE_NAMES.get(declared, declared)}; expected {expected}"
        )
    return op.attrs[name]


def _attr(cx, op: OpDesc, name: str, kind: str, default: object = None) -> object:
    return read_attr(op, name, kind, default, cx.where())


def _choice(cx, op: OpDesc, name: str, choices: tuple, default: object = None) -> object:
    value = _attr(cx, op, name, "str" if isinstance(choices[0], str) else "int", default)
    if value not in choices:
        raise UnsupportedOpError(
            f"{cx.where()}: attribute {name} = {value!r} is not supported; expected one of "
            f"{list(choices)}"
        )
    return value


def _axis(cx, op: OpDesc, name: str, rank: int, default: int) -> int:
    """An axis attribute, in [-rank, rank) as Paddle requires (negative counts from the end)."""
    axis = _attr(cx, op, name, "int", default)
    if not -rank <= axis < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} = {axis} is outside [{-rank}, {rank}) for an input "
            f"of rank {rank}"
        )
    return axis


def _num_col_dims(cx, op: OpDesc, name: str, var: str) -> int:
    """mul's and fc's x/y_num_col_dims: the axes flattened into rows, in [1, rank) as Paddle's
    InferShape requires."""
    rank = cx.rank_of(var)
    cols = _attr(cx, op, name, "int", 1)
    if not 1 <= cols < rank:
        raise ModelFormatError(
            f"{cx.where()}: attribute {name} = {cols} must lie in [1, {rank}) for {var!r} of "
            f"rank {rank}"
        )
    return cols


def _permutation(cx, op: OpDesc, var: str) -> list[int]:
    """transpose2's `axis`: a permutation of X's axes."""
    perm = _attr(cx, op, "axis", "ints")
    rank = cx.rank_of(var)
    if sorted(perm) != list(range(rank)):
        raise ModelFormatError(
            f"{cx.where()}: attribute axis = {_shown.repr(perm)} is not a permutation of the "
            f"{rank} axes of {var!r}"
        )
    return list(perm)


def _probability(cx, op: OpDesc) -> float:
    """dropout_prob, which Paddle requires in [0, 1] (as_probability: NaN refused too)."""
    value = _attr(cx, op, "dropout_prob", "float", 0.5)
    try:
        return as_probability(value, cx.where(), "attribute dropout_prob")
    except ArgumentError as e:
        raise ModelFormatError(str(e)) from None


def _names(op: OpDesc, slot: str, *, outputs: bool = False) -> tuple[str, ...]:
    return (op.outputs if outputs else op.inputs).get(slot, ())


def _one(cx, op: OpDesc, slot: str, *, outputs: bool = False) -> str:
    names = _names(op, slot, outputs=outputs)
    if len(names) != 1:
        kind = "output" if outputs else "input"
        raise ModelFormatError(
            f"{cx.where()}: {kind} {slot} must name one variable, got {list(names)}"
        )
    return names[0]


def _many(cx, op: OpDesc, slot: str) -> tuple[str, ...]:
    names = _names(op, slot)
    if not names:
        raise ModelFormatError(f"{cx.where()}: input {slot} must name one variable or more")
    return names


def _opt(cx, op: OpDesc, slot: str) -> str | None:
    names = _names(op, slot)
    if len(names) > 1:
        raise ModelFormatError(
            f"{cx.where()}: input {slot} must name at most one variable, got {list(names)}"
        )
    return names[0] if names else None


def _out(cx, op: OpDesc, value: ir.Value, slot: str = "Out") -> None:
    cx.define(_one(cx, op, slot, outputs=True), value)


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


def _scalar(cx, value: float, like: ir.Value, name: str, what: str) -> ir.Value:
    dtype = like.dtype.numpy() if like.dtype is not None else np.float32
    return cx.const(number(cx, value, dtype, what), name)


# -- elementwise and activations ---------------------------------------------------------------
# The activations: activation_converters.py.
def elementwise_placement(cx, op: OpDesc) -> tuple[int, int, int]:
    """(k, rank of the placed operand, trailing ones it needs) for an elementwise op.

    Paddle aligns Y with X's dimensions starting at `axis` (-1: at the end, as numpy does);
    trailing ones on Y make numpy's right-aligned broadcasting do the same. When X has the
    lower rank, Paddle places X inside Y's dimensions the same way: k is the operand placed,
    X (0) or Y (1)."""
    x_rank, y_rank = cx.rank_of(_one(cx, op, "X")), cx.rank_of(_one(cx, op, "Y"))
    axis = _attr(cx, op, "axis", "int", -1)
    k = 0 if x_rank < y_rank else 1
    rank, big_rank = (x_rank, y_rank) if k == 0 else (y_rank, x_rank)
    trailing = 0 if axis == -1 else big_rank - axis - rank
    if trailing < 0 or axis < -1:
        raise UnsupportedOpError(
            f"{cx.where()}: axis {axis} does not place {'XY'[k]} (rank {rank}) inside "
            f"{'YX'[k]} (rank {big_rank})"
        )
    return k, rank, trailing


def elementwise_operands(cx, op: OpDesc, out: str) -> list[ir.Value]:
    """X and Y as values that broadcast the numpy way (the placed one with its trailing ones)."""
    xv, yv = _one(cx, op, "X"), _one(cx, op, "Y")
    k, rank, trailing = elementwise_placement(cx, op)
    var = (xv, yv)[k]
    if trailing and cx.is_param(var):
        p = cx.param(var)
        placed = cx.const(p.reshape(p.shape + (1,) * trailing), f"{var}/aligned")
    elif trailing:
        axes = cx.ints(list(range(rank, rank + trailing)), f"{out}/axes")
        placed = cx.add("Unsqueeze", [cx.value(var), axes], name=f"{out}/{'xy'[k]}")
    else:
        placed = cx.value(var)
    return [placed, cx.value(yv)] if k == 0 else [cx.value(xv), placed]


@converter("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div")
def _elementwise(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    operands = elementwise_operands(cx, op, out)
    onnx_op = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}[op.type.split("_")[1]]
    _out(cx, op, cx.add(onnx_op, operands, name=out))


@converter("scale")
def _scale(cx, op: OpDesc) -> None:
    x = cx.value(_one(cx, op, "X"))
    out = _one(cx, op, "Out", outputs=True)
    bias = _attr(cx, op, "bias", "float", 0.0)
    after = _attr(cx, op, "bias_after_scale", "bool", True)
    scale_tensor = _opt(cx, op, "ScaleTensor")
    if scale_tensor:
        scale = cx.add("Cast", [cx.value(scale_tensor)], {"to": x.dtype}, name=f"{out}/s")
    else:
        scale_value = _attr(cx, op, "scale", "float", 1.0)
        scale = None if scale_value == 1.0 else _scalar(cx, scale_value, x, f"{out}/scale", "scale")
    y = x
    if bias and not after:
        y = cx.add("Add", [y, _scalar(cx, bias, x, f"{out}/bias", "bias")], name=f"{out}/biased")
    if scale is not None:
        y = cx.add("Mul", [y, scale], name=f"{out}/scaled")
    if bias and after:
        y = cx.add("Add", [y, _scalar(cx, bias, x, f"{out}/bias", "bias")], name=f"{out}/biased")
    if y is x:
        y = cx.add("Identity", [x], name=out)
    _out(cx, op, y)


@converter("softmax")
def _softmax(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "X")
    axis = _axis(cx, op, "axis", cx.rank_of(xv), -1)
    _out(cx, op, cx.add("Softmax", [cx.value(xv)], {"axis": axis}, name=out))


@converter("sum")
def _sum(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    _out(cx, op, cx.add("Sum", [cx.value(v) for v in _many(cx, op, "X")], name=out))


@converter("cast")
def _cast(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    to = _choice(cx, op, "out_dtype", tuple(_PADDLE_DTYPES))
    dtype = _PADDLE_DTYPES[to]
    _out(cx, op, cx.cast(cx.value(_one(cx, op, "X")), dtype, out))


# -- shapes ------------------------------------------------------------------------------------
@converter("concat")
def _concat(cx, op: OpDesc) -> None:
    if _opt(cx, op, "AxisTensor"):
        raise UnsupportedOpError(
            f"{cx.where()}: an AxisTensor input is not supported (use attr axis)"
        )
    out = _one(cx, op, "Out", outputs=True)
    xs = _many(cx, op, "X")
    axis = _axis(cx, op, "axis", cx.rank_of(xs[0]), 0)
    _out(cx, op, cx.add("Concat", [cx.value(v) for v in xs], {"axis": axis}, name=out))


def _reshape_shape(cx, op: OpDesc) -> list[int]:
    """reshape2's `shape` attribute: sizes, 0 (copy X's) or one -1 (inferred)."""
    shape = _attr(cx, op, "shape", "ints")
    if any(d < -1 for d in shape) or shape.count(-1) > 1:
        raise ModelFormatError(
            f"{cx.where()}: attribute shape = {_shown.repr(shape)}: entries must be sizes, 0 "
            "or a single -1"
        )
    return shape


@converter("reshape2", lod=None)
def _reshape(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    shape_list = _names(op, "ShapeTensor")
    shape_var = _opt(cx, op, "Shape")
    if shape_list:
        parts = [cx.cast(cx.value(v), ir.DataType.INT64, f"{out}/dim") for v in shape_list]
        shape = cx.add("Concat", parts, {"axis": 0}, name=f"{out}/shape")
    elif shape_var:
        shape = cx.cast(cx.value(shape_var), ir.DataType.INT64, f"{out}/shape")
    else:
        shape = cx.ints(_reshape_shape(cx, op), f"{out}/shape")
    # Paddle's 0 copies the input dimension, as ONNX Reshape does with allowzero = 0.
    xv = _one(cx, op, "X")
    y = cx.add("Reshape", [cx.value(xv), shape], name=out)
    # Paddle 3.3.1's reshape2 copies X's LoD to Out whatever the shape, also when the rows
    # change and the offsets no longer fit them. Keep it where the words provably stay the
    # rows: an attribute shape that starts with 0, or with -1 while the other entries hold
    # exactly X's other (known) dimensions ([0, -1], [-1, 2, 2] on [-1, 4]); else no LoD.
    offsets = cx.offsets.get(xv)
    from_attr = not shape_list and not shape_var
    if offsets is not None and from_attr and _keeps_first_dim(cx, xv, _reshape_shape(cx, op)):
        cx.define(out, y, offsets)
    else:
        _out(cx, op, y)


def _keeps_first_dim(cx, xv: str, shape: list[int]) -> bool:
    """Whether reshaping X to `shape` (Paddle's 0 and -1 included) surely keeps X's rows."""
    desc = cx.block.vars.get(xv)
    if not shape or desc is None:
        return False
    if shape[0] == 0:
        return True
    x_rest = list(desc.shape[1:])
    rest = [x_rest[i] if d == 0 and i < len(x_rest) else d for i, d in enumerate(shape[1:])]
    known = all(d > 0 for d in x_rest + rest)
    return shape[0] == -1 and known and math.prod(rest) == math.prod(x_rest)


@converter("transpose2", lod=None)
def _transpose(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "X")
    perm = _permutation(cx, op, xv)
    _out(cx, op, cx.add("Transpose", [cx.value(xv)], {"perm": perm}, name=out))


@converter("arg_max", lod=None)
def _arg_max(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv = _one(cx, op, "X")
    x = cx.value(xv)
    keepdims = int(_attr(cx, op, "keepdims", "bool", False))
    flatten = _attr(cx, op, "flatten", "bool", False)
    if flatten:
        x = cx.add("Reshape", [x, cx.ints([-1], f"{out}/flat")], name=f"{out}/flat")
        axis = 0
    else:
        axis = _axis(cx, op, "axis", cx.rank_of(xv), -1)
    y = cx.add(
        "ArgMax", [x], {"axis": axis, "keepdims": keepdims}, name=out, dtype=ir.DataType.INT64
    )
    if flatten and keepdims:
        # Paddle keeps X's rank then ([1] * rank, e.g. [1, 1, 1]); ArgMax of the flat X gives [1].
        ones = cx.ints([1] * cx.rank_of(xv), f"{out}/kept")
        y = cx.add("Reshape", [y, ones], name=out)
    dtype = _choice(cx, op, "dtype", (2, 3, -1), -1)
    if dtype == 2:
        y = cx.cast(y, _PADDLE_DTYPES[dtype], out)
    # No LoD on the output, whatever the axis: Paddle 3.3.1's arg_max drops X's LoD (a LoD
    # feed's arg_max along the features is fetched as a plain tensor).
    _out(cx, op, y)


# -- products ----------------------------------------------------------------------------------
def _weight_2d(cx, var: str, num_col_dims: int, out: str) -> ir.Value:
    if cx.is_param(var):
        p = cx.param(var)
        if p.ndim == 2 and num_col_dims == 1:
            return cx.value(var)
        return cx.const(p.reshape(math.prod(p.shape[:num_col_dims]), -1), f"{var}/2d")
    return cx.add("Flatten", [cx.value(var)], {"axis": num_col_dims}, name=f"{out}/y2d")


def _flattened_matmul(
    cx, x_var: str, x_cols: int, y2d: ir.Value, y_tail: ir.Value | None, out: str
) -> ir.Value:
    """x flattened to 2-D at x_cols, times y2d, reshaped back to x.shape[:x_cols] + tail;
    one MatMul when x is already [rows, K] (or flattens over its last axis only)."""
    x = cx.value(x_var)
    rank = cx.rank_of(x_var)
    if x_cols == rank - 1 and y_tail is None:
        return cx.add("MatMul", [x, y2d], name=out)
    x2d = cx.add("Flatten", [x], {"axis": x_cols}, name=f"{out}/x2d")
    if x_cols == 1 and y_tail is None:
        # Already [x.shape[0], N]: no reshape back, so a GRU after it can still fuse (lookup
        # tables give [words, 1, E], which mul flattens like this).
        return cx.add("MatMul", [x2d, y2d], name=out)
    prod = cx.add("MatMul", [x2d, y2d], name=f"{out}/2d")
    head = cx.add(
        "Slice",
        [
            cx.add("Shape", [x], name=f"{out}/xshape", dtype=ir.DataType.INT64),
            cx.ints([0], f"{out}/0"),
            cx.ints([x_cols], f"{out}/k"),
        ],
        name=f"{out}/head",
    )
    tail = y_tail if y_tail is not None else cx.ints([-1], f"{out}/tail")
    shape = cx.add("Concat", [head, tail], {"axis": 0}, name=f"{out}/shape")
    return cx.add("Reshape", [prod, shape], name=out)


@converter("mul")
def _mul(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv, yv = _one(cx, op, "X"), _one(cx, op, "Y")
    x_cols = _num_col_dims(cx, op, "x_num_col_dims", xv)
    y_cols = _num_col_dims(cx, op, "y_num_col_dims", yv)
    y_rank = cx.rank_of(yv)
    tail = None
    if y_rank - y_cols != 1:
        if not cx.is_param(yv):
            raise UnsupportedOpError(f"{cx.where()}: Y of rank {y_rank} must be a parameter")
        tail = cx.ints(cx.param(yv).shape[y_cols:], f"{out}/tail")
    y2d = _weight_2d(cx, yv, y_cols, out)
    _out(cx, op, _flattened_matmul(cx, xv, x_cols, y2d, tail, out))


@converter("fc", lod="Input")
def _fc(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    xv, wv = _one(cx, op, "Input"), _one(cx, op, "W")
    x_cols = _num_col_dims(cx, op, "in_num_col_dims", xv)
    w = cx.value(wv)
    if _attr(cx, op, "padding_weights", "bool", False):
        # W is stored [K + 4, N + 4] (fc_fuse_pass pads it for MKL); Paddle's kernel reads only
        # W[:K, :N]. Ignoring the flag fails at run time (K + 4 rows against K columns).
        padded = cx.param(wv)
        if padded.ndim != 2 or min(padded.shape) <= 4:
            raise ModelFormatError(
                f"{cx.where()}: padding_weights = True needs W {wv!r} of shape [K + 4, N + 4], "
                f"got {padded.shape}"
            )
        w = cx.const(padded[:-4, :-4], f"{wv}/unpadded")
    y = _flattened_matmul(cx, xv, x_cols, w, None, f"{out}/matmul")
    b = _opt(cx, op, "Bias")
    if b:
        bias = cx.const(cx.param(b).reshape(-1), f"{b}/row") if cx.is_param(b) else cx.value(b)
        y = cx.add("Add", [y, bias], name=f"{out}/biased")
    act = _choice(cx, op, "activation_type", ("", "relu"), "")
    if act == "relu":
        y = cx.add("Relu", [y], name=out)
    _out(cx, op, y)


def _matmul(cx, op: OpDesc, tx: str, ty: str, alpha: float) -> None:
    out = _one(cx, op, "Out", outputs=True)
    operands = []
    for slot, flag in (("X", tx), ("Y", ty)):
        var = _one(cx, op, slot)
        v = cx.value(var)
        rank = cx.rank_of(var)
        if _attr(cx, op, flag, "bool", False) and rank >= 2:
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            v = cx.add("Transpose", [v], {"perm": perm}, name=f"{out}/{slot}T")
        operands.append(v)
    y = cx.add("MatMul", operands, name=out if alpha == 1.0 else f"{out}/matmul")
    if alpha != 1.0:
        y = cx.add("Mul", [y, _scalar(cx, alpha, y, f"{out}/alpha", "alpha")], name=out)
    _out(cx, op, y)


@converter("matmul")
def _matmul_v1(cx, op: OpDesc) -> None:
    _matmul(cx, op, "transpose_X", "transpose_Y", _attr(cx, op, "alpha", "float", 1.0))


@converter("matmul_v2")
def _matmul_v2(cx, op: OpDesc) -> None:
    _matmul(cx, op, "trans_x", "trans_y", 1.0)


@converter("lookup_table", "lookup_table_v2", lod="Ids")
def _lookup_table(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    wv, idsv = _one(cx, op, "W"), _one(cx, op, "Ids")
    table = cx.param(wv)
    if table.ndim != 2:
        raise ModelFormatError(f"{cx.where()}: W {wv!r} must be 2-D, got shape {table.shape}")
    rows = table.shape[0]
    pad = _attr(cx, op, "padding_idx", "int", -1)
    # Paddle's kernels give zeros where an id equals padding_idx (-1: none). Its Python APIs
    # write -1 or a row (padding_idx = -k becomes rows - k before saving); for a padding_idx
    # outside the table, which only a hand-made program holds, an id equal to it is refused at
    # run time like every id outside [0, rows) (_ids_in_range), where Paddle gives zeros.
    if 0 <= pad < rows:
        # Rows looked up by padding_idx read as zeros: a new table with that row zeroed.
        table = table.copy()
        table[pad] = 0
        w = cx.const(table, f"{wv}/padded")
    else:
        w = cx.value(wv)
    ids = cx.value(idsv)
    if ids.dtype not in (ir.DataType.INT64, ir.DataType.INT32, None):
        raise ModelFormatError(
            f"{cx.where()}: Ids {idsv!r} must be int64 or int32 (as Paddle's kernels take), got "
            f"{ids.dtype}"
        )
    if op.type == "lookup_table":  # v1 takes ids [..., 1]
        ids = cx.add("Squeeze", [ids, cx.ints([-1], f"{out}/axis")], name=f"{out}/ids")
    ids = _ids_in_range(cx, ids, rows, out)
    y = cx.add("Gather", [w, ids], {"axis": 0}, name=out, dtype=w.dtype)
    # ONNX Runtime's error names the node: the name says what failed in Paddle's terms.
    y.producer().name = (
        f"{out} ({op.type}: every id in {idsv!r} must lie in [0, {rows}); "
        f"a negative id i is reported as i - {rows})"
    )
    _out(cx, op, y)


def _ids_in_range(cx, ids: ir.Value, rows: int, out: str) -> ir.Value:
    """ids with every negative id moved below -rows, so that the Gather fails on it.

    Paddle refuses ids outside [0, rows) (lookup_table; lookup_table_v2 means to, its CPU
    kernel skips the check for -1 and reads before the table). ONNX's Gather takes [-rows,
    rows) and wraps the negatives: -1 would read the last row. Standard ops cannot raise, but
    Gather does on an index outside [-rows, rows), in ONNX Runtime and in onnx.reference alike:
    Where(ids < 0, ids - rows, ids) sends every negative id there, and ids >= rows already
    are. The check is part of the graph: the fused model, the portable export and a saved
    .onnx keep it, and nothing happens to valid ids."""
    dtype = ids.dtype.numpy() if ids.dtype is not None else np.int64
    zero = cx.const(np.array(0, dtype), f"{out}/0")
    negative = cx.add("Less", [ids, zero], name=f"{out}/negative", dtype=ir.DataType.BOOL)
    shifted = cx.add(
        "Sub", [ids, cx.const(np.array(rows, dtype), f"{out}/rows")], name=f"{out}/below"
    )
    return cx.add("Where", [negative, shifted, ids], name=f"{out}/checked", dtype=ids.dtype)


# -- LoD -----------------------------------------------------------------------------------------
@converter("lod_reset", lod=None)
def _lod_reset(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    if _attr(cx, op, "append", "bool", False):
        raise UnsupportedOpError(
            f"{cx.where()}: append = True (a second LoD level) is not supported"
        )
    yv = _opt(cx, op, "Y")
    if yv is not None and yv in cx.offsets:
        offsets = cx.offsets[yv]
    elif yv is not None:  # Y's data are the offsets
        offsets = cx.add(
            "Reshape",
            [
                cx.cast(cx.value(yv), ir.DataType.INT64, f"{out}/lod"),
                cx.ints([-1], f"{out}/flat"),
            ],
            name=conventions.offsets_name(out),
        )
    else:
        target = _attr(cx, op, "target_lod", "ints")
        if not target or target[0] != 0 or any(a > b for a, b in itertools.pairwise(target)):
            raise ModelFormatError(
                f"{cx.where()}: attribute target_lod = {_shown.repr(target)} must be offsets: "
                "0 first, never decreasing"
            )
        offsets = cx.ints(target, conventions.offsets_name(out))
    data = cx.add("Identity", [cx.value(_one(cx, op, "X"))], name=out)
    cx.define(out, data, offsets)


@converter("sequence_pool", lod=None)
def _sequence_pool(cx, op: OpDesc) -> None:
    xv = _one(cx, op, "X")
    out = _one(cx, op, "Out", outputs=True)
    pooltype = _choice(
        cx, op, "pooltype", ops.schema("SequencePool").attributes[0].choices, "AVERAGE"
    )
    attrs = {"pooltype": pooltype, "pad_value": _attr(cx, op, "pad_value", "float", 0.0)}
    y = cx.add(
        "SequencePool",
        [cx.value(xv), cx.offsets_of(xv, "X")],
        attrs,
        name=out,
        domain=conventions.DOMAIN,
    )
    _out(cx, op, y)


@converter("crf_decoding", lod="Emission")
def _crf_decoding(cx, op: OpDesc) -> None:
    if _opt(cx, op, "Length"):
        raise UnsupportedOpError(
            f"{cx.where()}: padded input with Length is not supported; give LoD Emission"
        )
    ev = _one(cx, op, "Emission")
    out = _one(cx, op, "ViterbiPath", outputs=True)
    label_var = _opt(cx, op, "Label")
    inputs = [
        cx.value(ev),
        cx.offsets_of(ev, "Emission"),
        cx.value(_one(cx, op, "Transition")),
        cx.value(label_var) if label_var else None,
    ]
    y = cx.add("CRFDecoding", inputs, name=out, dtype=ir.DataType.INT64, domain=conventions.DOMAIN)
    _out(cx, op, y, "ViterbiPath")


def dropout_attributes(cx, op: OpDesc) -> dict[str, object]:
    """p and mode of a dropout or dropout_grad, checked as Paddle checks them."""
    return {
        "p": _probability(cx, op),
        # Paddle's default implementation is downgrade_in_infer.
        "mode": _choice(cx, op, "dropout_implementation", sorted(MODES), "downgrade_in_infer"),
    }


@converter("dropout")
def _dropout(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    attrs = {
        **dropout_attributes(cx, op),
        "is_test": int(_attr(cx, op, "is_test", "bool", False)),
    }
    inputs = [cx.value(_one(cx, op, "X"))]
    if not attrs["is_test"]:
        # Paddle's order: a Seed tensor, else the seed attribute with fix_seed, else its global
        # generator (no seed input here: explicit_rng gives the op a stream).
        seed_var = _opt(cx, op, "Seed")
        if seed_var:
            seed = cx.cast(cx.value(seed_var), ir.DataType.INT64, f"{out}/seed64")
            inputs.append(cx.add("Reshape", [seed, cx.ints([], f"{out}/0d")], name=f"{out}/seed"))
        elif _attr(cx, op, "fix_seed", "bool", False):
            seed = np.array(_attr(cx, op, "seed", "int", 0), np.int64)
            inputs.append(cx.const(seed, f"{out}/seed"))
    # The Mask (uint8, one byte a value in Paddle) is our packed 1-bit mask: made only when an
    # op reads it (dropout_grad in a training program).
    mask = _names(op, "Mask", outputs=True)
    if attrs["is_test"] or not mask or mask[0] not in cx.read:
        _out(cx, op, cx.add("Dropout", inputs, attrs, name=out, domain=conventions.DOMAIN))
        return
    mask_var = _one(cx, op, "Mask", outputs=True)
    y, packed = cx.add("Dropout", inputs, attrs, name=out, domain=conventions.DOMAIN, num_outputs=2)
    packed.type = ir.TensorType(ir.DataType.UINT8)
    _out(cx, op, y)
    cx.define(mask_var, packed)


@converter("mean", lod=None)
def _mean(cx, op: OpDesc) -> None:
    out = _one(cx, op, "Out", outputs=True)
    x = cx.value(_one(cx, op, "X"))
    _out(cx, op, cx.add("ReduceMean", [x], {"keepdims": 0}, name=out))


def _gru_attributes(cx, op: OpDesc) -> dict[str, object]:
    return {
        "direction": "reverse" if _attr(cx, op, "is_reverse", "bool", False) else "forward",
        "origin_mode": int(_attr(cx, op, "origin_mode", "bool", False)),
        "activation": _choice(cx, op, "activation", ACTIVATIONS, "tanh"),
        "gate_activation": _choice(cx, op, "gate_activation", ACTIVATIONS, "sigmoid"),
        "linear_before_reset": 0,
        "layout": "lod",
    }


def _gru_weights(cx, op: OpDesc, oc_from: str) -> tuple[ir.Value, ir.Value | None, ir.Value | None]:
    """Canonical Wh [1, OC, 3*OC] from Paddle's WeightH layout; Bias [1, 3*OC]; H0 [N, OC]."""
    wv = _one(cx, op, oc_from)
    weight = cx.param(wv)
    if weight.ndim != 2 or weight.shape[1] != 3 * weight.shape[0]:
        raise ModelFormatError(
            f"{cx.where()}: {oc_from} {wv!r} must be [OC, 3*OC], got {weight.shape}"
        )
    wh = cx.const(paddle_weight_h_to_canonical(weight)[None], f"{wv}/canonical")
    bias = None
    bv = _opt(cx, op, "Bias")
    if bv:
        b = cx.param(bv)
        if b.size != weight.shape[1]:
            raise ModelFormatError(
                f"{cx.where()}: Bias {bv!r} must hold 3*OC values, got {b.shape}"
            )
        bias = cx.value(bv) if b.shape == (1, b.size) else cx.const(b.reshape(1, -1), f"{bv}/row")
    h0_var = _opt(cx, op, "H0")
    h0 = cx.value(h0_var) if h0_var else None
    return wh, bias, h0


@converter("gru", lod="Input")
def _gru(cx, op: OpDesc) -> None:
    xv = _one(cx, op, "Input")
    out = _one(cx, op, "Hidden", outputs=True)
    wh, bias, h0 = _gru_weights(cx, op, "Weight")
    inputs = [cx.value(xv), cx.offsets_of(xv, "Input"), wh, bias, None, h0]
    y = cx.add("GRU", inputs, _gru_attributes(cx, op), name=out, domain=conventions.DOMAIN)
    _out(cx, op, y, "Hidden")


@converter("fusion_gru")
def _fusion_gru(cx, op: OpDesc) -> None:
    xv = _one(cx, op, "X")
    out = _one(cx, op, "Hidden", outputs=True)
    wh, bias, h0 = _gru_weights(cx, op, "WeightH")
    wxv = _one(cx, op, "WeightX")
    weight_x = cx.param(wxv)
    if weight_x.ndim != 2 or weight_x.shape[1] != wh.shape[2]:
        raise ModelFormatError(
            f"{cx.where()}: WeightX {wxv!r} must be [IC, 3*OC] with 3*OC = {wh.shape[2]}, "
            f"got {weight_x.shape}"
        )
    wx = cx.const(weight_x[None], f"{wxv}/canonical")
    inputs = [cx.value(xv), cx.offsets_of(xv, "X"), wx, wh, bias, None, h0]
    y = cx.add("FusionGRU", inputs, _gru_attributes(cx, op), name=out, domain=conventions.DOMAIN)
    _out(cx, op, y, "Hidden")
