"""Parameters of Paddle legacy inference models, read without paddle.

Either one file per persistable variable, named after it, or one combined file (save_combine:
`*.pdiparams`, `__params__`) holding the same records back to back in sorted-name order
(feed and fetch variables excluded; the names are not in the file but taken from the
ProgramDesc). A record, little endian: uint32 version (0), uint64 lod_level, then per level a
uint64 byte count and that many bytes of size_t offsets; then the tensor: uint32 version (0),
int32 desc_size, a TensorDesc protobuf of desc_size bytes (dtype, dims), and the raw data,
numel * itemsize bytes in C order.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.model_paths import file_inside
from fusebridge.integrations.paddle.pir_program import (
    MAX_JSON_BYTES,
    is_pir_file,
    parse_pir_program,
)
from fusebridge.integrations.paddle.program_desc import (
    DENSE_TENSOR,
    FEED_MINIBATCH,
    FETCH_LIST,
    RAW,
    READER,
    ProgramDesc,
    VarDesc,
    parse_program_desc,
    parse_tensor_desc,
)

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
# Persistable variables that Paddle never writes to the parameter files.
_NOT_SAVED = (FEED_MINIBATCH, FETCH_LIST, READER, RAW)
_COMBINED_NAMES = ("__params__", "params")


class _Records:
    """Where the records are read from, every read checked against the bytes left first: a
    header declaring more than the source holds fails before anything is allocated or read."""

    def __init__(self, size: int, pos: int, what: str) -> None:
        if not 0 <= pos <= size:
            raise ModelFormatError(f"{what}: record position {pos} outside the {size} bytes")
        self.size, self.pos, self.what = size, pos, what

    def need(self, size: int, part: str) -> None:
        if self.size - self.pos < size:
            raise ModelFormatError(
                f"{self.what}: {part} of {size} bytes at byte {self.pos} runs past the end "
                f"({size - (self.size - self.pos)} bytes missing)"
            )

    def take(self, st: struct.Struct, part: str) -> int:
        left = self.size - self.pos
        if left < st.size:
            raise ModelFormatError(
                f"{self.what}: truncated {part} at byte {self.pos} ({st.size - left} bytes missing)"
            )
        (value,) = st.unpack(self.read(st.size))
        return value

    def read(self, size: int) -> bytes | memoryview:
        """size bytes (need() checked them)."""
        raise NotImplementedError

    def array(self, dtype: np.dtype, count: int) -> np.ndarray:
        """count elements of dtype (need() checked them), read-only and aligned."""
        raise NotImplementedError

    def indexed(self, size: int) -> bytes | memoryview:
        """The next size bytes (need() checked them) as a buffer indexed by source position, so
        that the protobuf reader's error positions are positions in the file."""
        raise NotImplementedError


class _BufferRecords(_Records):
    def __init__(self, buf: bytes | memoryview, pos: int, what: str) -> None:
        self.view = memoryview(buf).cast("B")
        super().__init__(len(self.view), pos, what)

    def read(self, size: int) -> memoryview:
        self.pos += size
        return self.view[self.pos - size : self.pos]

    def indexed(self, size: int) -> memoryview:
        self.pos += size
        return self.view

    def array(self, dtype: np.dtype, count: int) -> np.ndarray:
        array = np.frombuffer(self.view, dtype, count, self.pos)
        self.pos += count * dtype.itemsize
        if not array.flags.aligned:
            # Records are packed back to back; the kernels want aligned arrays.
            array = array.copy()
        array.flags.writeable = False
        return array


class _FileRecords(_Records):
    def __init__(self, file: BinaryIO, what: str) -> None:
        self.file = file
        super().__init__(os.fstat(file.fileno()).st_size, 0, what)

    def read(self, size: int) -> bytes:
        data = bytearray(size)
        self._fill(data)
        return bytes(data)

    def _fill(self, buffer: bytearray | np.ndarray) -> None:
        try:
            got = self.file.readinto(buffer)
        except OSError as e:
            raise ModelFormatError(f"{self.what}: reading at byte {self.pos}: {e}") from None
        if got != len(buffer):  # the file shrank while it was read
            raise ModelFormatError(f"{self.what}: short read at byte {self.pos}")
        self.pos += got

    def indexed(self, size: int) -> bytes | memoryview:
        return _Shifted(self.read(size), self.pos - size)  # type: ignore[return-value]

    def array(self, dtype: np.dtype, count: int) -> np.ndarray:
        array = np.empty(count, dtype)
        self._fill(array.view(np.uint8))
        array.flags.writeable = False
        return array


class _Shifted:
    """Bytes that lie at `base` in a file, indexed by file position (all the protobuf reader
    does with a buffer that has no fixed-size fields, as a TensorDesc has none)."""

    def __init__(self, data: bytes, base: int) -> None:
        self.data, self.base = data, base

    def __getitem__(self, index: int | slice) -> int | bytes:
        if isinstance(index, slice):
            return self.data[index.start - self.base : index.stop - self.base]
        return self.data[index - self.base]


def read_tensor_record(
    buf: bytes | memoryview, pos: int, what: str
) -> tuple[np.ndarray, list[list[int]], int]:
    """The tensor stored at buf[pos:]: (array, LoD offsets per level, position after it)."""
    records = _BufferRecords(buf, pos, what)
    array, lod = _read_record(records)
    return array, lod, records.pos


def _read_record(src: _Records, var: VarDesc | None = None) -> tuple[np.ndarray, list[list[int]]]:
    """The record at src.pos; with `var`, its dtype and shape are checked against the VarDesc
    before its data is read."""
    what = src.what
    at = src.pos
    if (version := src.take(_U32, "LoD tensor version")) != 0:
        raise ModelFormatError(f"{what}: LoD tensor version {version} at byte {at}, expected 0")
    lod: list[list[int]] = []
    # A level is its uint64 size and at least one offset (offsets start at 0): each turn of
    # the loop reads 16 bytes or more, so a huge count ends at the end of the file.
    for level in range(src.take(_U64, "LoD level count")):
        at = src.pos
        size = src.take(_U64, f"LoD level {level} size")
        if size % 8 or size == 0:
            raise ModelFormatError(
                f"{what}: LoD level {level} size {size} at byte {at} is not a positive multiple "
                "of 8"
            )
        src.need(size, f"LoD level {level}")
        lod.append(np.frombuffer(src.read(size), "<u8").tolist())
    at = src.pos
    if (version := src.take(_U32, "tensor version")) != 0:
        raise ModelFormatError(f"{what}: tensor version {version} at byte {at}, expected 0")
    at = src.pos
    if (desc_size := src.take(_I32, "TensorDesc size")) < 0:
        raise ModelFormatError(f"{what}: negative TensorDesc size {desc_size} at byte {at}")
    src.need(desc_size, "TensorDesc")
    at = src.pos
    desc = src.indexed(desc_size)
    dtype, dims = parse_tensor_desc(desc, at, at + desc_size, f"{what}: TensorDesc")
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{what}: negative dimension in shape {dims} at byte {src.pos}")
    if var is not None:
        _check(dtype, dims, var, what)
    count = math.prod(dims)
    # Python integers: the product of absurd dims is exact, and need() refuses it.
    src.need(count * dtype.itemsize, f"data of shape {dims} {dtype}")
    at = src.pos
    array = src.array(dtype.newbyteorder("<"), count)
    try:
        array = array.reshape(dims)
    except ValueError as e:  # empty but absurd shapes: too many or too large dimensions
        raise ModelFormatError(f"{what}: shape {dims} at byte {at}: {e}") from None
    return array, lod


def find_model_files(path: str | os.PathLike) -> tuple[Path, Path | None]:
    """(model file, combined parameter file or None for one file per parameter) for a model
    directory, a model file (`.pdmodel`, `__model__`, or a PIR `.json`), or the path prefix
    given to Paddle's save_inference_model and paddle.jit.save."""
    path = Path(path)
    if path.is_dir():
        named = [*sorted(path.glob("*.pdmodel")), path / "__model__"]
        named += [p for p in sorted(path.glob("*.json")) if is_pir_file(p)]
        models = [p for p in named if p.is_file()]
        if len(models) != 1:
            found = ", ".join(p.name for p in models) or "nothing"
            raise ModelFormatError(
                f"{path}: expected one model file (__model__, *.pdmodel or a PIR *.json), "
                f"found {found}"
            )
        model = models[0]
    elif path.is_file():
        model = path
    else:
        prefixed = [path.with_name(path.name + s) for s in (".pdmodel", ".json")]
        models = [p for p in prefixed if p.is_file()]
        if not models:
            raise ModelFormatError(f"{path}: no such model directory, model file or path prefix")
        if len(models) > 1:
            raise ModelFormatError(
                f"{path}: the prefix names both {models[0].name} and {models[1].name}; give "
                "the file"
            )
        model = models[0]
    suffixed = model.suffix in (".pdmodel", ".json")
    candidates = [model.with_suffix(".pdiparams")] if suffixed else []
    candidates += [model.with_name(name) for name in _COMBINED_NAMES]
    params = [p for p in candidates if p.is_file()]
    if len(params) > 1:
        found = ", ".join(p.name for p in params)
        raise ModelFormatError(f"{model}: several combined parameter files: {found}")
    return model, params[0] if params else None


def _saved_variables(program: ProgramDesc, combined: bool) -> dict[str, VarDesc]:
    # Paddle saves the persistable variables of every block (Program.list_vars), once per name.
    saved: dict[str, VarDesc] = {}
    for block in program.blocks:
        for var in block.vars.values():
            if not var.persistable or var.type in _NOT_SAVED or var.name in saved:
                continue
            if var.type != DENSE_TENSOR:
                if combined:  # its record would not be a dense tensor: the rest would misalign
                    raise ModelFormatError(
                        f"variable {var.name!r} of type {var.type} in a combined parameter "
                        "file is not supported"
                    )
                continue
            saved[var.name] = var
    return saved


def _check(dtype: np.dtype, shape: tuple[int, ...], var: VarDesc, what: str) -> None:
    shape_ok = len(shape) == len(var.shape) and all(
        want in (-1, got) for want, got in zip(var.shape, shape)
    )
    # An empty record carries no values, and Paddle writes some with another dtype than the
    # program declares (the GRU's float32 [0] dropout_state, declared uint8).
    if (dtype != var.dtype and not (shape_ok and 0 in shape)) or not shape_ok:
        raise ModelFormatError(
            f"{what}: the file holds {dtype} {tuple(shape)}, "
            f"the program declares {var.dtype} {var.shape}"
        )


def load_parameters(
    program: ProgramDesc, model_dir: Path, params_file: Path | None
) -> dict[str, np.ndarray]:
    """The saved persistable variables of `program` by name, from `params_file` (combined) or
    from one file per variable in `model_dir`; checked against their VarDesc. Files are read
    record by record: each record's header is checked against its VarDesc and against the bytes
    the file still holds before its data is read, and a file is never read whole."""
    model_dir, params_file = Path(model_dir), params_file and Path(params_file)
    saved = _saved_variables(program, combined=params_file is not None)
    params: dict[str, np.ndarray] = {}
    if params_file is not None:
        with _open(params_file) as file:
            records = _FileRecords(file, str(params_file))
            for name in sorted(saved):
                records.what = f"{params_file}: parameter {name!r}"
                params[name], _ = _read_record(records, saved[name])
            if records.pos != records.size:
                raise ModelFormatError(
                    f"{params_file}: {records.size - records.pos} bytes left at byte "
                    f"{records.pos} after the last of {len(saved)} parameters"
                )
        return params
    base = Path(os.path.realpath(model_dir))
    for name, var in saved.items():
        path = file_inside(name, base, f"parameter {name!r}", "file name")
        if not path.is_file():
            raise ModelFormatError(f"parameter {name!r}: no file {path}")
        what = f"parameter {name!r} ({path})"
        with _open(path) as file:
            records = _FileRecords(file, what)
            params[name], _ = _read_record(records, var)
        if records.pos != records.size:
            raise ModelFormatError(
                f"{what}: {records.size - records.pos} bytes left at byte {records.pos}"
            )
    return params


def _open(path: Path) -> BinaryIO:
    """path opened for reading; what the system refuses (permissions, a directory, ...) is a
    ModelFormatError naming the file."""
    try:
        return path.open("rb")
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot be read: {e.strerror or e}") from None


# Protobuf refuses messages of 2 GiB or more (Paddle's ProgramDesc::ParseFromString among
# them): a larger model file is refused before it is read.
_MAX_PROGRAM_BYTES = (1 << 31) - 1


def read_paddle_model(path: str | os.PathLike) -> tuple[ProgramDesc, dict[str, np.ndarray]]:
    """The program and parameters of a Paddle inference model (see find_model_files): a legacy
    ProgramDesc, or a PIR program (model.json) read as one."""
    model, params_file = find_model_files(path)
    pir = is_pir_file(model)
    limit, kind = (
        (MAX_JSON_BYTES, "a PIR program") if pir else (_MAX_PROGRAM_BYTES, "a ProgramDesc")
    )
    with _open(model) as file:
        whole = _FileRecords(file, str(model))
        if whole.size > limit:
            raise ModelFormatError(f"{model}: {whole.size} bytes; {kind} is read up to {limit}")
        data = whole.read(whole.size)
    if pir:
        program = parse_pir_program(bytes(data), str(model))
    else:
        try:
            program = parse_program_desc(data)
        except ModelFormatError as e:
            raise ModelFormatError(f"{model}: {e}") from None
    return program, load_parameters(program, model.parent, params_file)
