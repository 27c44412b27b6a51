"""ONNX external data, read in at load: a tensor whose bytes live in another file
(`data_location` EXTERNAL, `external_data` keys location / offset / length) gets them inline.

The rules, each a ModelFormatError naming the .onnx file, the tensor and the location: the
location is a relative path without '..' or control characters that stays inside the model's
directory once symlinks are resolved, and names a regular file; offset and length are
non-negative integers; the tensor's bytes (its dims and element type say how many) lie inside
the file, and length, where given, is that many. Only that many bytes are read, after those
checks: memory is bounded by what the tensor declares and the file holds.

Reading everything in at load makes the model self-contained: nothing later reads a file
lazily (onnx_ir maps external data on first use), the files may change afterwards, and
save_onnx writes the weights inline."""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import onnx
import onnx_ir as ir

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.model_paths import file_inside


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """A graph and every subgraph in it (If branches, Loop bodies, nested)."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else []:
                yield from all_graphs(sub)
            for sub in attr.graphs:
                yield from all_graphs(sub)


def all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of a graph and its subgraphs: initializers, sparse initializers'
    parts, tensor attributes."""
    for g in all_graphs(graph):
        yield from g.initializer
        for sparse in g.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("sparse_tensor"):
                    yield from (attr.sparse_tensor.values, attr.sparse_tensor.indices)


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def element_bits(tensor: onnx.TensorProto, where: str) -> int:
    """The bits of one element of a numeric tensor."""
    try:
        dtype = ir.DataType(tensor.data_type)
    except ValueError:
        dtype = ir.DataType.UNDEFINED
    if dtype in (ir.DataType.UNDEFINED, ir.DataType.STRING):
        raise ModelFormatError(
            f"{where}: element type {tensor.data_type}, expected a numeric ONNX type"
        )
    return dtype.bitwidth


def tensor_nbytes(tensor: onnx.TensorProto, where: str) -> int:
    """The bytes the tensor's dims and element type need (Python ints: no overflow)."""
    if any(d < 0 for d in tensor.dims):
        raise ModelFormatError(f"{where}: dims {list(tensor.dims)}, expected no negative one")
    return math.ceil(math.prod(tensor.dims) * element_bits(tensor, where) / 8)


def read_external_data(model: onnx.ModelProto, model_file: Path) -> None:
    """Checks every external tensor of `model` (read from `model_file`) and puts its bytes
    inline (raw_data), in place."""
    base = Path(os.path.realpath(model_file.parent))
    for tensor in all_tensors(model.graph):
        if is_external(tensor):
            _read_in(tensor, model_file, base)


def _entries(tensor: onnx.TensorProto, where: str) -> tuple[str, int, int | None]:
    keys = {e.key: e.value for e in tensor.external_data}
    if "location" not in keys:
        raise ModelFormatError(f"{where}: external data without a location")
    numbers: list[int | None] = []
    for key in ("offset", "length"):
        text = keys.get(key)
        if text is not None and not (text.isascii() and text.isdigit()):
            raise ModelFormatError(
                f"{where}: external data {key} {text!r}, expected a non-negative integer"
            )
        numbers.append(None if text is None else int(text))
    return keys["location"], numbers[0] or 0, numbers[1]


def _read_in(tensor: onnx.TensorProto, model_file: Path, base: Path) -> None:
    where = f"load: {str(model_file)!r}: tensor {tensor.name!r}"
    location, offset, length = _entries(tensor, where)
    where += f", external data {location!r}"
    path = file_inside(location, base, where)
    nbytes = tensor_nbytes(tensor, where)
    if length is not None and length != nbytes:
        raise ModelFormatError(
            f"{where}: length {length}, but dims {list(tensor.dims)} of "
            f"{ir.DataType(tensor.data_type).name} take {nbytes} bytes"
        )
    # O_NOFOLLOW: the path is resolved already, a symlink put there since is refused;
    # O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused next).
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ModelFormatError(f"{where}: cannot open {str(path)!r}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelFormatError(f"{where}: {str(path)!r} is not a regular file")
        size = info.st_size
        if (length is None and size - offset != nbytes) or offset + nbytes > size:
            raise ModelFormatError(
                f"{where}: the tensor's {nbytes} bytes at offset {offset} do not fit the "
                f"file's {size} bytes"
                + ("" if length is not None else " (without a length, it must end the file)")
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(offset)
            data = f.read(nbytes)
    finally:
        os.close(fd)
    if len(data) != nbytes:  # the file shrank since fstat
        raise ModelFormatError(f"{where}: read {len(data)} of {nbytes} bytes at offset {offset}")
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data
