"""An .onnx file as a checked ModelProto, before anything converts it: every way the file can
be malformed is a ModelFormatError (or, for what is valid ONNX that we cannot take, an
UnsupportedOpError) naming the file and what is wrong, raised before any tensor is allocated.

Checked here: the file is not empty and parses; it has a graph with outputs; its opsets are
known; external data stays in the model's directory and fits its files (external_data.py);
every tensor holds exactly the bytes its dims and element type need; then onnx.checker (node
arity, attribute types, topological order so no cycle and no dangling reference, single
assignment of names, declared domains). The model keeps its own opsets: nothing converts it
(ONNX Runtime partitions run at the model's opset imports, and the ops our passes write are
written in their form at the model's standard opset: opset_forms.py)."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.onnx.external_data import (
    all_graphs,
    all_tensors,
    element_bits,
    is_external,
    read_external_data,
    tensor_nbytes,
)

_STANDARD_DOMAINS = ("", "ai.onnx")


def read_model_proto(path: Path) -> onnx.ModelProto:
    """The model in `path`, checked, its external data read in, at its own opsets."""
    where = f"load: {str(path)!r}"
    data = path.read_bytes()
    if not data:
        raise ModelFormatError(f"{where}: the file is empty (0 bytes), expected an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelFormatError(f"{where} is not a readable ONNX model: {exc}") from exc
    if not model.HasField("graph"):
        raise ModelFormatError(f"{where}: the model has no graph")
    if not model.graph.output:
        raise ModelFormatError(f"{where}: the graph has no outputs")
    _check_opsets(model, where)
    if any(
        g.sparse_initializer
        or any(a.HasField("sparse_tensor") for n in g.node for a in n.attribute)
        for g in all_graphs(model.graph)
    ):
        # onnx_ir would drop a sparse initializer, leaving its readers dangling.
        raise UnsupportedOpError(f"{where}: sparse tensors are not supported")
    external = any(is_external(t) for t in all_tensors(model.graph))
    read_external_data(model, path)
    _check_tensor_sizes(model, where)
    check_declared_dims(model.graph, where)
    _check_structure(model, None if external else data, path, where)
    _check_constants(model, where)
    return model


def _check_constants(model: onnx.ModelProto, where: str) -> None:
    """Every standard Constant node holds exactly one value attribute: onnx.checker does not
    check it (a field of another wire type is dropped as unknown, leaving none), and the
    constant folder would fail on it untyped."""
    for graph in all_graphs(model.graph):
        for node in graph.node:
            if node.domain in _STANDARD_DOMAINS and node.op_type == "Constant":
                names = [a.name for a in node.attribute]
                if len(names) != 1:
                    raise ModelFormatError(
                        f"{where}: Constant node {node.name!r} has attributes {names}, "
                        "expected exactly one (value, value_float, value_ints, ...)"
                    )


def check_declared_dims(graph: onnx.GraphProto, where: str) -> None:
    """No value is declared with a negative dim: onnx's shape inference aborts the whole
    process on one (a failed std::clamp assertion, onnx 1.23), and it runs at load and save."""
    for g in all_graphs(graph):
        for v in (*g.input, *g.output, *g.value_info):
            dims = [d.dim_value for d in v.type.tensor_type.shape.dim if d.HasField("dim_value")]
            if any(d < 0 for d in dims):
                raise ModelFormatError(
                    f"{where}: value {v.name!r} is declared with dims {dims}, expected none "
                    "negative"
                )


def _check_structure(model: onnx.ModelProto, data: bytes | None, path: Path, where: str) -> None:
    """onnx.checker on the model (`data`: its bytes, if they are the file's as read). The
    checker wants a shape on every graph input and output, which ONNX Runtime does not: a
    missing one is given (rank 0) for the check only."""
    unshaped = [
        v.type.tensor_type
        for v in (*model.graph.input, *model.graph.output)
        if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape")
    ]
    for tensor_type in unshaped:
        tensor_type.shape.SetInParent()
    try:
        if data is None or unshaped:
            # More than one protobuf can hold only with external data: the file on disk is
            # small then, and the checker resolves its data from there.
            small = model.ByteSize() <= onnx.checker.MAXIMUM_PROTOBUF
            data = model.SerializeToString() if small else None
        onnx.checker.check_model(str(path) if data is None else data)
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise ModelFormatError(f"{where}: {_one_line(exc)}") from exc
    finally:
        for tensor_type in unshaped:
            tensor_type.ClearField("shape")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _check_opsets(model: onnx.ModelProto, where: str) -> None:
    """Refuses a missing opset of the standard domain, one newer than onnx knows, and a
    fusebridge domain version other than ours."""
    versions = {o.domain: o.version for o in model.opset_import}
    standard = [versions[d] for d in _STANDARD_DOMAINS if d in versions]
    if not standard:
        raise ModelFormatError(
            f"{where}: no opset import for the standard ONNX domain (opset_import lists "
            f"{sorted(versions.items())})"
        )
    newest = onnx.defs.onnx_opset_version()
    if not 1 <= standard[0] <= newest:
        raise UnsupportedOpError(
            f"{where}: opset {standard[0]} of the standard domain, expected 1 to {newest}"
        )
    ours = versions.get(conventions.DOMAIN)
    if ours is not None and ours != conventions.DOMAIN_VERSION:
        raise UnsupportedOpError(
            f"{where}: {conventions.DOMAIN} domain version {ours}, "
            f"expected {conventions.DOMAIN_VERSION}"
        )


# The typed fields: complex numbers take two values an element; 4- and 2-bit types pack 2 and 4
# elements into one int32 value.
_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _check_tensor_sizes(model: onnx.ModelProto, where: str) -> None:
    """Every inline tensor holds exactly what its dims need (onnx.checker refuses too little
    data, not too much; numpy would then fail to reshape it, untyped)."""
    for tensor in all_tensors(model.graph):
        what = f"{where}: tensor {tensor.name!r}"
        if tensor.data_type == onnx.TensorProto.STRING:
            held, needed = len(tensor.string_data), math.prod(tensor.dims)
            if any(d < 0 for d in tensor.dims) or held != needed:
                raise ModelFormatError(
                    f"{what}: {held} strings, expected {needed} for dims {list(tensor.dims)}"
                )
            continue
        nbytes = tensor_nbytes(tensor, what)
        if tensor.HasField("raw_data"):
            held, needed, unit = len(tensor.raw_data), nbytes, "bytes of raw_data"
        else:
            complex_ = tensor.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128)
            bits = element_bits(tensor, what)
            per_value = 8 // bits if bits < 8 else 1
            elements = math.prod(tensor.dims) * (2 if complex_ else 1)
            held = sum(len(getattr(tensor, f)) for f in _FIELDS)
            needed = math.ceil(elements / per_value)
            unit = "values"
        if held != needed:
            raise ModelFormatError(
                f"{what}: {held} {unit}, expected {needed} for dims {list(tensor.dims)} of "
                f"element type {onnx.TensorProto.DataType.Name(tensor.data_type)}"
            )
