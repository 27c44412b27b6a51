"""MXNet's `.params` files (`nd.save`, `HybridBlock.export`) read with numpy alone.

The layout follows MXNet 1.9.1's NDArray::Load / LegacyLoad (src/ndarray/ndarray.cc), summed up
in docs/mxnet.md ("The .params format"). The file is untrusted: every malformation is a
ModelFormatError that names the file, the part and the byte position. The file is read front to
back, each part exactly as long as it is declared, and every declared size is checked against
the bytes the file still holds before anything is allocated or read. Bytes after the last name
are not read: NDArray::Load stops there too.
"""

from __future__ import annotations

import io
import math
import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO, NoReturn

import ml_dtypes
import numpy as np

from fusebridge.errors import ModelFormatError

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8  # int64 shape, no storage type
V2_MAGIC = 0xF993FAC9  # storage type; ndim 0 = none
V3_MAGIC = 0xF993FACA  # numpy shape semantics: ndim 0 = scalar, -1 = none; dense only

# mshadow's TypeFlag.
DTYPES: dict[int, np.dtype] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float64),
    2: np.dtype(np.float16),
    3: np.dtype(np.uint8),
    4: np.dtype(np.int32),
    5: np.dtype(np.int8),
    6: np.dtype(np.int64),
    7: np.dtype(np.bool_),
    8: np.dtype(np.int16),
    9: np.dtype(np.uint16),
    10: np.dtype(np.uint32),
    11: np.dtype(np.uint64),
    12: np.dtype(ml_dtypes.bfloat16),
}
_STORAGE = {0: "dense", 1: "row_sparse", 2: "csr"}  # value = number of aux arrays, too
_PREFIXES = ("arg", "aux")

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
# The smallest array record: a pre-V1 header of ndim 0, dev_type, dev_id, type flag.
_MIN_ARRAY_BYTES = 16


class _Reader:
    """Reads `stream` (`size` bytes in all) front to back; every read is checked against the
    bytes left first, and reads exactly what it asks for."""

    def __init__(self, stream: BinaryIO, size: int, source: str) -> None:
        self.stream = stream
        self.size = size
        self.source = source
        self.pos = 0

    def fail(self, part: str, at: int, message: str) -> NoReturn:
        raise ModelFormatError(f"{self.source}: {part} at byte {at}: {message}")

    def left(self) -> int:
        return self.size - self.pos

    def need(self, size: int, part: str) -> None:
        if size > self.left():
            self.fail(
                part, self.pos, f"{size} bytes needed, {self.left()} left in the file (truncated)"
            )

    def read_into(self, buffer: memoryview, part: str) -> None:
        """Fills `buffer` (bytes) from the file, which must hold that many more."""
        self.need(len(buffer), part)
        done = 0
        while done < len(buffer):
            got = self.stream.readinto(buffer[done:])
            if not got:  # shorter than its size said: it changed while being read
                self.fail(part, self.pos + done, "the file ended early")
            done += got
        self.pos += done

    def read(self, size: int, part: str) -> bytes:
        self.need(size, part)
        data = bytearray(size)
        self.read_into(memoryview(data), part)
        return bytes(data)

    def skip(self, size: int, part: str) -> None:
        self.need(size, part)
        self.stream.seek(size, io.SEEK_CUR)
        self.pos += size

    def take(self, st: struct.Struct, part: str) -> int:
        (value,) = st.unpack(self.read(st.size, part))
        return value

    def dims(self, ndim: int, item: str, part: str) -> list[int]:
        return np.frombuffer(self.read(ndim * np.dtype(item).itemsize, part), item).tolist()


def _shape(r: _Reader, part: str, v3: bool) -> list[int] | None:
    """A TShape (i32 ndim, i64 dims); None for V3's unknown shape (ndim or a dim -1)."""
    at = r.pos
    ndim = r.take(_I32, f"{part} ndim")
    if ndim == -1 and v3:
        return None
    if ndim < 0:
        r.fail(f"{part} ndim", at, f"negative ndim {ndim}")
    dims = r.dims(ndim, "<i8", f"{part} of {ndim} dims")
    if v3 and -1 in dims:
        return None
    if any(d < 0 for d in dims):
        r.fail(part, at, f"negative dimension in {_show(dims)}")
    return dims


def _show(dims: list[int]) -> str:
    # A corrupt header can declare millions of dims: keep messages short.
    return str(tuple(dims)) if len(dims) <= 8 else f"({', '.join(map(str, dims[:8]))}, ...)"


def _data(r: _Reader, dims: list[int], dtype: np.dtype, part: str) -> np.ndarray:
    count = math.prod(dims)
    at = r.pos
    r.need(count * dtype.itemsize, f"{part} ({dtype} {_show(dims)})")
    try:
        array = np.empty(dims, dtype.newbyteorder("<"))
    except ValueError as e:  # more dimensions than numpy allows, or an absurd empty shape
        r.fail(part, at, f"shape {_show(dims)}: {e}")
    r.read_into(memoryview(array.reshape(-1).view(np.uint8)), part)
    array = array.astype(dtype, copy=False)  # native order (a copy only on big-endian hosts)
    if dtype == np.bool_:
        # MXNet stores one byte per bool; a byte other than 0 or 1 would be a malformed True.
        array = array.view(np.uint8).astype(np.bool_)
    return array


def _dtype(r: _Reader, part: str) -> np.dtype:
    at = r.pos
    flag = r.take(_I32, f"{part} type flag")
    if flag not in DTYPES:
        r.fail(f"{part} type flag", at, f"unknown type flag {flag} (known: 0-{max(DTYPES)})")
    return DTYPES[flag]


def _array(r: _Reader, index: int) -> np.ndarray | str:
    """Array `index` at r.pos: the array, or why it cannot be used (raised once its name is
    known)."""
    part = f"array #{index}"
    at = r.pos
    magic = r.take(_U32, f"{part} header")
    stype = 0
    if magic in (V2_MAGIC, V3_MAGIC):
        v3 = magic == V3_MAGIC
        stype_at = r.pos
        stype = r.take(_I32, f"{part} storage type")
        if stype not in _STORAGE or (v3 and stype != 0):
            kind = "V3 (dense only)" if v3 else "V2"
            r.fail(f"{part} storage type", stype_at, f"storage type {stype} in a {kind} header")
        storage_dims = _shape(r, f"{part} storage shape", v3) if stype else None
        dims = _shape(r, f"{part} shape", v3)
        if dims is None or (not v3 and not dims):
            return "is an empty (none) NDArray: it holds no data"
    elif magic == V1_MAGIC:
        # LegacyLoad: as MXNet 1.9.1 reads it, ndim 0 is a scalar followed by its data.
        dims = _shape(r, f"{part} shape", v3=False)
    else:
        # Before V1 the first word was ndim itself, with uint32 dims.
        dims = r.dims(magic, "<u4", f"{part} legacy shape of {magic} dims (no known magic)")
    r.take(_I32, f"{part} dev_type")  # the device is not kept: every array is loaded to host
    r.take(_I32, f"{part} dev_id")
    dtype = _dtype(r, part)
    if stype == 0:
        return _data(r, dims, dtype, f"{part} data")
    # Sparse: read past it so that the names can be read and the refusal can name the array.
    aux = [
        (_dtype(r, f"{part} aux {i}"), _shape(r, f"{part} aux {i} shape", False))
        for i in range(stype)
    ]
    blocks = [("data", dtype, storage_dims or [])]
    blocks += [(f"aux {i} data", t, d or []) for i, (t, d) in enumerate(aux)]
    for what, item, skipped in blocks:
        r.skip(math.prod(skipped) * item.itemsize, f"{part} {what} ({item} {_show(skipped)})")
    return f"is {_STORAGE[stype]} (header at byte {at}): sparse storage is not supported"


def _parse(r: _Reader) -> dict[str, tuple[str, np.ndarray]]:
    source = r.source
    if (magic := r.take(_U64, "list magic")) != LIST_MAGIC:
        r.fail("list magic", 0, f"{magic:#x}, expected {LIST_MAGIC:#x} (not an MXNet params file)")
    if (reserved := r.take(_U64, "reserved word")) != 0:
        r.fail("reserved word", 8, f"{reserved:#x}, expected 0")
    at = r.pos
    count = r.take(_U64, "array count")
    most = max(r.left() - _U64.size, 0) // _MIN_ARRAY_BYTES  # the name count follows them
    if count > most:
        r.fail(
            "array count",
            at,
            f"{count} arrays, but the {r.left()} bytes left hold at most {most} "
            f"({_MIN_ARRAY_BYTES} bytes each at least, then the name count)",
        )
    arrays = [_array(r, i) for i in range(count)]
    at = r.pos
    num_names = r.take(_U64, "name count")
    if num_names not in (0, count):
        r.fail("name count", at, f"{num_names} names for {count} arrays (expected 0 or {count})")
    names = []
    for i in range(num_names):
        at = r.pos
        length = r.take(_U64, f"name #{i} length")
        raw = r.read(length, f"name #{i} of {length} bytes")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            r.fail(f"name #{i}", at, f"not UTF-8: {e}")
    result: dict[str, tuple[str, np.ndarray]] = {}
    for i, array in enumerate(arrays):
        full = names[i] if names else str(i)
        if isinstance(array, str):
            raise ModelFormatError(f"{source}: array {full!r} (#{i}) {array}")
        kind, sep, bare = full.partition(":")
        if not sep or kind not in _PREFIXES:
            kind, bare = "", full
        if bare in result:
            raise ModelFormatError(
                f"{source}: array {full!r} (#{i}): a second array named {bare!r}"
            )
        result[bare] = (kind, array)
    return result


def read_params_with_kind(path: str | os.PathLike) -> dict[str, tuple[str, np.ndarray]]:
    """The arrays of an MXNet `.params` / `nd.save` file, in file order: bare name -> (kind,
    array), kind "arg" or "aux" from the name's prefix, "" without one. A file saved from a
    list has no names: its arrays are named "0", "1", ..."""
    path = Path(path)
    try:
        # Only a regular file: opening a FIFO would wait for a writer, a device may not end.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ModelFormatError(f"{path}: the params file is not a regular file")
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            return _parse(_Reader(stream, size, os.fspath(path)))
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read the params file: {e}") from None


def read_params(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of an MXNet `.params` file by bare name (`arg:` / `aux:` stripped)."""
    return {name: array for name, (_, array) in read_params_with_kind(path).items()}


def write_params(path: str | os.PathLike, arrays: dict[str, tuple[str, np.ndarray]]) -> None:
    """Writes `arrays` (bare name -> (kind "arg"/"aux"/"", array)) as an MXNet `.params` file
    in the V2 dense layout that MXNet 1.9 itself writes (NDArray::Save), on the CPU."""
    flags = {dtype: flag for flag, dtype in DTYPES.items()}
    out = [_U64.pack(LIST_MAGIC), _U64.pack(0), _U64.pack(len(arrays))]
    for name, (_, array) in arrays.items():
        array = np.ascontiguousarray(array)
        if array.dtype not in flags:
            raise ModelFormatError(f"{path}: array {name!r} has dtype {array.dtype}, not MXNet's")
        out += [_U32.pack(V2_MAGIC), _I32.pack(0), _I32.pack(array.ndim)]
        out += [struct.pack("<q", d) for d in array.shape]
        out += [_I32.pack(1), _I32.pack(0), _I32.pack(flags[array.dtype]), array.tobytes()]
    out.append(_U64.pack(len(arrays)))
    for name, (kind, _) in arrays.items():
        full = f"{kind}:{name}".encode() if kind else name.encode()
        out += [_U64.pack(len(full)), full]
    Path(path).write_bytes(b"".join(out))
