"""Paddle 3 PIR programs (`model.json`, as paddle.jit.save and save_inference_model write them
with FLAGS_enable_pir_api on), read without paddle, as the legacy ProgramDesc the converters
take.

The file (Paddle's paddle/fluid/pir/serialize_deserialize, checked on 3.3.1):
`{"base_code": {"magic": "pir", "version": 4, ...}, "program": {"regions": [{"blocks": [{"ops":
[...]}]}]}}`. An op is `{"#": "<dialect>.<name>", "I": operands, "O": results, "A": attributes}`,
dialect 0 builtin, 1 pd_op; an operand is `{"%": id}` (0: absent), a result `{"%": id, "TT":
type}`, an attribute `{"N": name, "AT": {"#": kind, "D": data}}`. A parameter is the compressed
op `{"#": "p", "A": [.., .., .., name], "O": result, "OA": [persistable, ..]}`.

Each pd_op becomes the OpDesc of its legacy op (_OPS: legacy type, operand and result slots,
attribute names), so one set of converters serves both forms. PIR passes some legacy attributes
as operands made by `full` / `full_int_array` (dropout's p, scale's scale, reshape's shape,
slice's starts and ends): those operands become the attributes again. builtin.combine makes a
list of variables (a slot of several), builtin.split names a list's elements.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.paddle.program_desc import (
    DENSE_TENSOR,
    BlockDesc,
    OpDesc,
    ProgramDesc,
    VarDesc,
)

MAGIC = "pir"
# PIR file versions read here: the one Paddle 3.3 writes. Older files (Paddle 3.0-3.2) pass
# through Paddle's own version patches, which this reader does not apply.
CHECKED_VERSIONS = (4,)

# AttrType codes of the legacy OpDesc (program_desc.ATTR_TYPE_NAMES).
INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, LONG, LONGS, FLOAT64, SCALARS = (
    0, 1, 2, 3, 4, 5, 6, 7, 9, 11, 15, 17,
)  # fmt: skip
_SCALAR_ATTRS = {
    "0.a_i32": INT,
    "0.a_i64": LONG,
    "0.a_f32": FLOAT,
    "0.a_f64": FLOAT64,
    "0.a_bool": BOOLEAN,
    "0.a_str": STRING,
}
_LIST_ATTRS = {INT: INTS, LONG: LONGS, FLOAT: FLOATS, FLOAT64: FLOATS, BOOLEAN: BOOLEANS}
_LIST_ATTRS[STRING] = STRINGS
# Paddle's data type names (1.a_dtype) and PIR's tensor element types, as NumPy dtypes, and the
# legacy VarType enum that dtype attributes hold.
_DTYPE_NAMES = {
    "bool": (np.bool_, 0),
    "int16": (np.int16, 1),
    "int32": (np.int32, 2),
    "int64": (np.int64, 3),
    "float16": (np.float16, 4),
    "float32": (np.float32, 5),
    "float64": (np.float64, 6),
    "uint8": (np.uint8, 20),
    "int8": (np.int8, 21),
}
_ELEMENT_TYPES = {
    "0.t_bool": "bool",
    "0.t_i16": "int16",
    "0.t_i32": "int32",
    "0.t_i64": "int64",
    "0.t_f16": "float16",
    "0.t_f32": "float32",
    "0.t_f64": "float64",
    "0.t_ui8": "uint8",
    "0.t_i8": "int8",
}
# A model.json is read whole (JSON has no streaming form): larger files are refused first.
MAX_JSON_BYTES = 1 << 30


@dataclass(frozen=True)
class _Op:
    """How a pd_op maps to its legacy op: operand slots in order ("" drops an operand; "=name"
    makes a constant operand the attribute `name`), result slots, attribute renames."""

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ("Out",)
    attrs: dict[str, str] = field(default_factory=dict)


# Activations: the same name and attributes in both forms, or renamed below.
_UNARY = (
    "relu", "tanh", "sigmoid", "gelu", "exp", "sqrt", "abs", "log", "silu", "swish", "softsign",
    "square", "rsqrt", "relu6", "elu", "softplus",
)  # fmt: skip
_COMPARISONS = ("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal")
_OPS: dict[str, _Op] = {
    "embedding": _Op("lookup_table_v2", ("Ids", "W")),
    "matmul": _Op(
        "matmul_v2", ("X", "Y"), attrs={"transpose_x": "trans_x", "transpose_y": "trans_y"}
    ),
    "add": _Op("elementwise_add", ("X", "Y")),
    "subtract": _Op("elementwise_sub", ("X", "Y")),
    "multiply": _Op("elementwise_mul", ("X", "Y")),
    "divide": _Op("elementwise_div", ("X", "Y")),
    "scale": _Op("scale", ("X", "=scale")),
    "softmax": _Op("softmax", ("X",)),
    "transpose": _Op("transpose2", ("X",), attrs={"perm": "axis"}),
    "reshape": _Op("reshape2", ("X", "=shape"), ("Out", "XShape")),
    "concat": _Op("concat", ("X", "=axis")),
    "stack": _Op("stack", ("X",), ("Y",)),
    "gather": _Op("gather", ("X", "Index", "=axis")),
    "gather_nd": _Op("gather_nd", ("X", "Index")),
    # Both give a vector of parts, which builtin.split names: legacy split's Out list.
    "split": _Op("split", ("X", "=sections", "=axis")),
    "split_with_num": _Op("split", ("X", "=axis")),
    "cast": _Op("cast", ("X",), attrs={"dtype": "out_dtype"}),
    "shape": _Op("shape", ("Input",)),
    "shape64": _Op("shape", ("Input",)),
    "slice": _Op("slice", ("Input", "=starts", "=ends")),
    "full": _Op("fill_constant", ()),
    "full_int_array": _Op("assign_value", ()),
    "assign_value": _Op("assign_value", ()),
    "assign_value_": _Op("assign_value", ("",)),  # its operand: the tensor it overwrites
    "full_with_tensor": _Op("fill_constant", ("=value", "ShapeTensor")),
    "layer_norm": _Op("layer_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance")),
    "dropout": _Op(
        "dropout",
        ("X", "Seed", "=dropout_prob"),
        ("Out", "Mask"),
        {"mode": "dropout_implementation"},
    ),
    "rnn": _Op(
        "rnn",
        ("Input", "PreState", "WeightList", "SequenceLength", ""),
        ("Out", "DropoutState", "State", "Reserve"),
    ),
    **{name: _Op(name, ("X",)) for name in _UNARY},
    "leaky_relu": _Op("leaky_relu", ("X",), attrs={"negative_slope": "alpha"}),
    "hardsigmoid": _Op("hard_sigmoid", ("X",)),
    "hardswish": _Op("hard_swish", ("X",)),
    "mish": _Op("mish", ("X",), attrs={"lambda": "threshold"}),
    "hardtanh": _Op("brelu", ("X",)),
    "maximum": _Op("elementwise_max", ("X", "Y")),
    "minimum": _Op("elementwise_min", ("X", "Y")),
    "elementwise_pow": _Op("elementwise_pow", ("X", "Y")),
    "floor_divide": _Op("elementwise_floordiv", ("X", "Y")),
    **{name: _Op(name, ("X", "Y")) for name in _COMPARISONS},
    **{
        name: _Op(f"reduce_{name}", ("X", "=dim"), attrs={"keepdim": "keep_dim"})
        for name in ("sum", "mean", "max", "min", "prod")
    },
    "argmax": _Op("arg_max", ("X", "=axis")),
    "unsqueeze": _Op("unsqueeze2", ("X", "=axes"), ("Out", "XShape")),
    "squeeze": _Op("squeeze2", ("X", "=axes"), ("Out", "XShape")),
    "flatten": _Op("flatten_contiguous_range", ("X",), ("Out", "XShape")),
    "full_like": _Op("fill_any_like", ("X", "=value")),
    "arange": _Op("range", ("Start", "End", "Step")),
    "conv2d": _Op("conv2d", ("Input", "Filter"), ("Output",)),
    "depthwise_conv2d": _Op("depthwise_conv2d", ("Input", "Filter"), ("Output",)),
    "pool2d": _Op("pool2d", ("X", "=ksize")),
    **{
        name: _Op(
            "batch_norm",
            ("X", "Mean", "Variance", "Scale", "Bias"),
            ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
            {"data_format": "data_layout"},
        )
        for name in ("batch_norm", "batch_norm_")
    },
}


def _fail(where: str, problem: str) -> ModelFormatError:
    return ModelFormatError(f"{where}: {problem}")


def _field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _fail(where, f"expected an object with the field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise _fail(where, f"field {key!r} = {str(value)[:60]!r} has the wrong kind")
    return value


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.names: dict[int, str] = {}  # value id -> variable name
        self.lists: dict[int, tuple[str, ...]] = {}  # vector value id -> variable names
        self.constants: dict[int, object] = {}  # ids made by full / full_int_array
        self.vars: dict[str, VarDesc] = {}
        self.ops: list[OpDesc] = []
        self.feeds = 0

    def where(self, index: int, name: str = "") -> str:
        op = f" op {index} ({name})" if name else f" op {index}"
        return f"paddle PIR program {self.source}:{op}"

    # -- types and attributes ---------------------------------------------------------------
    def _tensor_type(self, tt: Any, where: str) -> tuple[np.dtype, tuple[int, ...], int]:
        kind = _field(tt, "#", str, where)
        if kind != "0.t_dtensor":
            raise _fail(where, f"a value of type {kind!r}, expected a dense tensor (0.t_dtensor)")
        data = _field(tt, "D", list, where)
        if len(data) < 4 or not isinstance(data[1], list) or not isinstance(data[3], list):
            raise _fail(where, "a dense tensor type needs [dtype, dims, layout, lod, ...]")
        element = _field(data[0], "#", str, where)
        if element not in _ELEMENT_TYPES:
            raise _fail(where, f"element type {element!r} is not supported")
        dims = data[1]
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in dims):
            raise _fail(where, f"dims {str(dims)[:60]} must be sizes or -1")
        dtype = np.dtype(_DTYPE_NAMES[_ELEMENT_TYPES[element]][0])
        return dtype, tuple(dims), len(data[3])

    def _attr(self, at: Any, where: str) -> tuple[object, int] | None:
        """(value, legacy AttrType) of a PIR attribute; None for those no converter reads
        (places, layouts)."""
        kind = _field(at, "#", str, where)
        data = at.get("D") if isinstance(at, dict) else None
        if kind in _SCALAR_ATTRS:
            code = _SCALAR_ATTRS[kind]
            python = {BOOLEAN: bool, STRING: str, FLOAT: float, FLOAT64: float}.get(code, int)
            if not isinstance(data, python if python is not float else (int, float)) or (
                python is int and isinstance(data, bool)
            ):
                raise _fail(where, f"attribute of kind {kind} holds {str(data)[:60]!r}")
            return data, code
        if kind == "0.a_array":
            if not isinstance(data, list):
                raise _fail(where, "an array attribute must hold a list")
            items = [self._attr(item, where) for item in data]
            codes = {code for _, code in items if code is not None}
            if len(codes) > 1 or (codes and next(iter(codes)) not in _LIST_ATTRS):
                raise _fail(where, f"an array attribute of mixed or nested kinds {sorted(codes)}")
            code = _LIST_ATTRS[codes.pop()] if codes else INTS
            return [value for value, _ in items], code
        if kind == "1.a_intarray":
            if not isinstance(data, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in data
            ):
                raise _fail(where, "an int array attribute must hold integers")
            return data, LONGS
        if kind == "1.a_dtype":
            if data == "Undefined(ALL_DTYPE)":  # "the input's" (sum, cast-free reductions)
                return -1, INT
            if data not in _DTYPE_NAMES:
                raise _fail(where, f"data type {data!r} is not supported")
            return _DTYPE_NAMES[data][1], INT
        return None  # 1.a_place, 1.a_datalayout, ...: nothing a converter reads

    def _attrs(self, op: dict, where: str) -> dict[str, tuple[object, int]]:
        attrs = {}
        for a in _field(op, "A", list, where) if "A" in op else []:
            name = _field(a, "N", str, where)
            value = self._attr(_field(a, "AT", dict, where), f"{where}: attribute {name!r}")
            if value is not None:
                attrs[name] = value
        return attrs

    # -- values -----------------------------------------------------------------------------
    def _define(self, result: Any, name: str, where: str, persistable: bool = False) -> None:
        vid = _field(result, "%", int, where)
        if vid <= 0 or vid in self.names or vid in self.lists:
            raise _fail(where, f"value id {vid} is not a new positive id")
        tt = _field(result, "TT", dict, where)
        if tt.get("#") == "0.t_vec":
            items = _field(tt, "D", list, where)
            names = tuple(f"{name}.{k}" for k in range(len(items)))
            for item, item_name in zip(items, names):
                self._declare(item_name, item, where, persistable)
            self.lists[vid] = names
            return
        self._declare(name, tt, where, persistable)
        self.names[vid] = name

    def _declare(self, name: str, tt: Any, where: str, persistable: bool) -> None:
        if name in self.vars:
            raise _fail(where, f"variable {name!r} is defined twice")
        dtype, dims, lod_level = self._tensor_type(tt, where)
        self.vars[name] = VarDesc(name, DENSE_TENSOR, dtype, dims, lod_level, persistable)

    def _operand(self, operand: Any, where: str) -> int:
        vid = _field(operand, "%", int, where)
        if vid and vid not in self.names and vid not in self.lists:
            raise _fail(where, f"operand %{vid} is not defined before its use")
        return vid

    def _names_of(self, vid: int) -> tuple[str, ...]:
        if vid == 0:
            return ()
        return self.lists.get(vid) or (self.names[vid],)

    # -- ops --------------------------------------------------------------------------------
    def read(self, ops: list) -> None:
        for index, op in enumerate(ops):
            kind = _field(op, "#", str, self.where(index))
            where = self.where(index, kind)
            if kind == "p":
                self._parameter(op, where)
            elif kind == "0.combine":
                names = [n for o in _field(op, "I", list, where) for n in self._one(o, where)]
                (result,) = self._results(op, where, 1)
                self.lists[_field(result, "%", int, where)] = tuple(names)
            elif kind == "0.split":
                (operand,) = _field(op, "I", list, where)
                names = self.lists.get(self._operand(operand, where))
                results = _field(op, "O", list, where)
                if names is None or len(names) != len(results):
                    raise _fail(where, "builtin.split needs a list of as many values as results")
                for result, name in zip(results, names):
                    self.names[_field(result, "%", int, where)] = name
            else:
                self._pd_op(op, kind, index, where)

    def _one(self, operand: Any, where: str) -> tuple[str, ...]:
        vid = self._operand(operand, where)
        if vid in self.lists:
            raise _fail(where, f"operand %{vid} is a list where one value belongs")
        return self._names_of(vid)

    def _results(self, op: dict, where: str, count: int) -> list:
        results = _field(op, "O", list, where)
        if len(results) != count:
            raise _fail(where, f"{len(results)} results, expected {count}")
        return results

    def _parameter(self, op: dict, where: str) -> None:
        attrs, flags = _field(op, "A", list, where), _field(op, "OA", list, where)
        if len(attrs) < 4 or not isinstance(attrs[3], str) or not attrs[3] or not flags:
            raise _fail(
                where, "a parameter needs A = [.., .., .., name] and OA = [persistable, ..]"
            )
        self._define(_field(op, "O", dict, where), attrs[3], where, persistable=bool(flags[0]))

    def _pd_op(self, op: dict, kind: str, index: int, where: str) -> None:
        dialect, _, name = kind.partition(".")
        attrs = self._attrs(op, where)
        operands = [self._operand(o, where) for o in _field(op, "I", list, where)]
        results = _field(op, "O", list, where)
        if dialect == "1" and name == "data":
            var, _ = attrs.get("name", (None, None))
            if not isinstance(var, str) or not var:
                raise _fail(where, "a data op needs its name attribute")
            self._define(self._single(results, where), var, where)
            self._emit("feed", {"X": ("feed",)}, {"Out": (var,)}, {"col": (self.feeds, INT)})
            self.feeds += 1
            return
        if dialect == "1" and name == "fetch":
            fetched = self._names_of(operands[0]) if len(operands) == 1 else ()
            if len(fetched) != 1:
                raise _fail(where, "a fetch op takes one value")
            # Paddle names a PIR program's outputs by the fetch's name (fetch_name_0, ...).
            out, _ = attrs.get("name", (None, None))
            if not isinstance(out, str) or not out or out in self.vars:
                raise _fail(where, f"fetch name {out!r} is missing or names another variable")
            self.vars[out] = dataclasses.replace(self.vars[fetched[0]], name=out, persistable=False)
            self._emit("assign", {"X": fetched}, {"Out": (out,)}, {})
            col = attrs.get("col", (0, INT))
            self._emit("fetch", {"X": (out,)}, {"Out": ("fetch",)}, {"col": col})
            return
        spec = _OPS.get(name) if dialect == "1" else None
        base = f"{name}_{self._first_id(results, where)}"
        if spec is None:  # listed with the other unsupported ops by the converter
            self._emit(f"pd_op.{name}" if dialect == "1" else kind, {}, {}, {})
            for k, result in enumerate(results):
                self._define(result, f"{base}.out{k}", where)
            return
        if len(operands) > len(spec.inputs) or len(results) > len(spec.outputs):
            raise _fail(
                where,
                f"{len(operands)} operands and {len(results)} results, expected at most "
                f"{len(spec.inputs)} and {len(spec.outputs)}",
            )
        legacy_attrs = {spec.attrs.get(k, k): v for k, v in attrs.items()}
        inputs: dict[str, tuple[str, ...]] = {}
        for slot, vid in zip(spec.inputs, operands):
            if slot.startswith("="):
                self._constant_attr(vid, slot[1:], legacy_attrs, inputs, where)
            elif slot:
                inputs[slot] = self._names_of(vid)
        outputs = {}
        for k, (slot, result) in enumerate(zip(spec.outputs, results)):
            var = base if k == 0 else f"{base}.{slot.lower()}"
            self._define(result, var, where)
            rid = result["%"]
            outputs[slot] = self.lists.get(rid) or (var,)
        _FIXUPS.get(spec.type, _no_fixup)(self, legacy_attrs, results, where)
        if spec.type in ("fill_constant", "assign_value"):
            self._remember_constant(spec.type, legacy_attrs, results, inputs)
        self._emit(spec.type, inputs, outputs, legacy_attrs)

    def _single(self, results: list, where: str) -> Any:
        if len(results) != 1:
            raise _fail(where, f"{len(results)} results, expected 1")
        return results[0]

    def _first_id(self, results: list, where: str) -> int:
        return _field(results[0], "%", int, where) if results else len(self.ops)

    def _constant_attr(self, vid: int, name: str, attrs: dict, inputs: dict, where: str) -> None:
        """Operand `vid` as the legacy attribute `name` when a full / full_int_array made it;
        otherwise as the legacy tensor input that stands for that attribute."""
        if vid == 0:
            return
        if vid in self.constants:
            value = self.constants[vid]
            code = LONGS if isinstance(value, list) else FLOAT if name != "axis" else INT
            attrs[name] = (value if code != INT else int(value), code)
            return
        tensor_slot = _TENSOR_SLOTS.get(name)
        if tensor_slot is None:
            raise _fail(where, f"{name} must be a constant (made by full or full_int_array)")
        inputs[tensor_slot] = self._names_of(vid)

    def _remember_constant(self, kind: str, attrs: dict, results: list, inputs: dict) -> None:
        if inputs or not results:
            return
        vid = results[0]["%"]
        if kind == "assign_value":
            self.constants[vid] = list(attrs["values"][0])
        elif attrs.get("shape", ([], 0))[0] in ([], [1]):
            self.constants[vid] = attrs["value"][0]

    def _emit(self, kind: str, inputs: dict, outputs: dict, attrs: dict) -> None:
        self.ops.append(
            OpDesc(
                kind,
                inputs,
                outputs,
                {k: v for k, (v, _) in attrs.items()},
                {k: code for k, (_, code) in attrs.items()},
            )
        )


# Tensor inputs that legacy ops take in place of an attribute PIR passes as an operand.
_TENSOR_SLOTS = {
    "starts": "StartsTensor",
    "ends": "EndsTensor",
    "shape": "Shape",
    "scale": "ScaleTensor",
    "value": "ValueTensor",
    "axis": "AxisTensor",
    "axes": "AxesTensor",
    "sections": "SectionsTensorList",
}


def _no_fixup(reader: _Reader, attrs: dict, results: list, where: str) -> None:
    return None


def _full(reader: _Reader, attrs: dict, results: list, where: str) -> None:
    """full: shape and value as fill_constant's; full_with_tensor: its value operand too."""
    if "value" in attrs:
        value, _ = attrs["value"]
        attrs["value"] = (float(value), FLOAT)
        if isinstance(value, float) and not math.isfinite(value):
            attrs["str_value"] = (str(value), STRING)
    if "dtype" not in attrs and results:
        dtype = reader.vars[reader.names[results[0]["%"]]].dtype
        attrs["dtype"] = (next(c for t, c in _DTYPE_NAMES.values() if np.dtype(t) == dtype), INT)


def _assign_values(reader: _Reader, attrs: dict, results: list, where: str) -> None:
    """full_int_array as assign_value: its values (SCALARS, as Paddle 3 writes them), a 1-D
    shape, int64. assign_value(_) (a constant tensor in the program, paddle.to_tensor inside a
    forward) has assign_value's own shape, dtype and values: the values become SCALARS."""
    if "values" in attrs:
        values, _ = attrs["values"]
        if not all(isinstance(v, (int, float)) for v in values):
            raise _fail(where, "assign_value's values must be numbers")
        attrs["values"] = (values, SCALARS)
        return
    values, _ = attrs.pop("value", ([], LONGS))
    if not all(isinstance(v, int) for v in values):
        raise _fail(where, "full_int_array values must be integers")
    attrs["shape"] = ([len(values)], INTS)
    attrs["values"] = (values, SCALARS)
    attrs.setdefault("dtype", (_DTYPE_NAMES["int64"][1], INT))


def _dropout(reader: _Reader, attrs: dict, results: list, where: str) -> None:
    if "dropout_prob" not in attrs:
        raise _fail(where, "dropout's p must be a constant (made by full)")


_FIXUPS: dict[str, Callable] = {
    "fill_constant": _full,
    "assign_value": _assign_values,
    "dropout": _dropout,
}


def is_pir_json(head: bytes) -> bool:
    """Whether a file starting with `head` is a PIR program (a JSON object whose first key is
    base_code), as opposed to an MXNet symbol file (nodes, arg_nodes, ...)."""
    text = head.lstrip()
    return text.startswith(b"{") and text[1:].lstrip().startswith(b'"base_code"')


def is_pir_file(path: Path) -> bool:
    """Whether the file at `path` is a PIR program (False when it cannot be read: the reader
    the caller picks instead says what is wrong with it)."""
    try:
        with path.open("rb") as file:
            return is_pir_json(file.read(256))
    except OSError:
        return False


def parse_pir_program(data: bytes, source: str) -> ProgramDesc:
    """The PIR program in `data` (a model.json's bytes) as a one-block legacy ProgramDesc."""
    where = f"paddle PIR program {source}"
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise _fail(where, f"not valid JSON ({e})") from None
    base = _field(doc, "base_code", dict, where)
    if base.get("magic") != MAGIC:
        raise _fail(where, f"base_code.magic = {str(base.get('magic'))[:40]!r}, expected 'pir'")
    version = base.get("version")
    if version not in CHECKED_VERSIONS:
        raise _fail(
            where,
            f"PIR version {version!r} is not one this reader was checked on "
            f"({', '.join(map(str, CHECKED_VERSIONS))}: Paddle 3.3); re-save the model with "
            "Paddle 3.3, or with FLAGS_enable_pir_api=0 for a legacy .pdmodel",
        )
    regions = _field(_field(doc, "program", dict, where), "regions", list, where)
    if len(regions) != 1:
        raise _fail(where, f"{len(regions)} regions, expected 1")
    blocks = _field(regions[0], "blocks", list, where)
    if len(blocks) != 1:
        raise _fail(where, f"{len(blocks)} top-level blocks, expected 1")
    reader = _Reader(source)
    reader.read(_field(blocks[0], "ops", list, where))
    block = BlockDesc(0, -1, dict(reader.vars), tuple(reader.ops))
    return ProgramDesc((block,), int(version))
