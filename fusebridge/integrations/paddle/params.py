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

import numpy as np

from fusebridge.errors import ModelFormatError
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


def read_tensor_record(
    buf: bytes | memoryview, pos: int, what: str
) -> tuple[np.ndarray, list[list[int]], int]:
    """The tensor stored at buf[pos:]: (array, LoD offsets per level, position after it)."""
    view = memoryview(buf).cast("B")
    end = len(view)
    if not 0 <= pos <= end:
        raise ModelFormatError(f"{what}: record position {pos} outside the {end} bytes")

    def take(st: struct.Struct, part: str) -> int:
        nonlocal pos
        if end - pos < st.size:
            raise ModelFormatError(
                f"{what}: truncated {part} at byte {pos} ({st.size - (end - pos)} bytes missing)"
            )
        (value,) = st.unpack_from(view, pos)
        pos += st.size
        return value

    def need(size: int, part: str) -> None:
        if end - pos < size:
            raise ModelFormatError(
                f"{what}: {part} of {size} bytes at byte {pos} runs past the end "
                f"({size - (end - pos)} bytes missing)"
            )

    at = pos
    if (version := take(_U32, "LoD tensor version")) != 0:
        raise ModelFormatError(f"{what}: LoD tensor version {version} at byte {at}, expected 0")
    lod: list[list[int]] = []
    for level in range(take(_U64, "LoD level count")):
        at = pos
        size = take(_U64, f"LoD level {level} size")
        if size % 8:
            raise ModelFormatError(
                f"{what}: LoD level {level} size {size} at byte {at} is not a multiple of 8"
            )
        need(size, f"LoD level {level}")
        lod.append(np.frombuffer(view, "<u8", size // 8, pos).tolist())
        pos += size
    at = pos
    if (version := take(_U32, "tensor version")) != 0:
        raise ModelFormatError(f"{what}: tensor version {version} at byte {at}, expected 0")
    at = pos
    if (desc_size := take(_I32, "TensorDesc size")) < 0:
        raise ModelFormatError(f"{what}: negative TensorDesc size {desc_size} at byte {at}")
    need(desc_size, "TensorDesc")
    dtype, dims = parse_tensor_desc(view, pos, pos + desc_size, f"{what}: TensorDesc")
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{what}: negative dimension in shape {dims} at byte {pos}")
    pos += desc_size
    count = math.prod(dims)
    need(count * dtype.itemsize, f"data of shape {dims} {dtype}")
    array = np.frombuffer(view, dtype.newbyteorder("<"), count, pos)
    try:
        array = array.reshape(dims)
    except ValueError as e:  # empty but absurd shapes: too many or too large dimensions
        raise ModelFormatError(f"{what}: shape {dims} at byte {pos}: {e}") from None
    if not array.flags.aligned:
        # Records are packed back to back; the kernels want aligned arrays.
        array = array.copy()
        array.flags.writeable = False
    return array, lod, pos + count * dtype.itemsize


def find_model_files(path: str | os.PathLike) -> tuple[Path, Path | None]:
    """(model file, combined parameter file or None for one file per parameter) for a model
    directory, a model file, or the path prefix given to Paddle's save_inference_model."""
    path = Path(path)
    if path.is_dir():
        models = sorted(path.glob("*.pdmodel")) + [p for p in [path / "__model__"] if p.is_file()]
        if len(models) != 1:
            found = ", ".join(p.name for p in models) or "nothing"
            raise ModelFormatError(
                f"{path}: expected one model file (__model__ or *.pdmodel), found {found}"
            )
        model = models[0]
    elif path.is_file():
        model = path
    elif (prefixed := path.with_name(path.name + ".pdmodel")).is_file():
        model = prefixed
    else:
        raise ModelFormatError(f"{path}: no such model directory, model file or path prefix")
    candidates = [model.with_suffix(".pdiparams")] if model.suffix == ".pdmodel" else []
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


def _check(array: np.ndarray, var: VarDesc, what: str) -> None:
    shape_ok = len(array.shape) == len(var.shape) and all(
        want in (-1, got) for want, got in zip(var.shape, array.shape)
    )
    if array.dtype != var.dtype or not shape_ok:
        raise ModelFormatError(
            f"{what}: the file holds {array.dtype} {array.shape}, "
            f"the program declares {var.dtype} {var.shape}"
        )


def load_parameters(
    program: ProgramDesc, model_dir: Path, params_file: Path | None
) -> dict[str, np.ndarray]:
    """The saved persistable variables of `program` by name, from `params_file` (combined) or
    from one file per variable in `model_dir`; checked against their VarDesc."""
    model_dir, params_file = Path(model_dir), params_file and Path(params_file)
    saved = _saved_variables(program, combined=params_file is not None)
    params: dict[str, np.ndarray] = {}
    if params_file is not None:
        data = params_file.read_bytes()
        pos = 0
        for name in sorted(saved):
            what = f"{params_file.name}: parameter {name!r}"
            array, _, pos = read_tensor_record(data, pos, what)
            _check(array, saved[name], what)
            params[name] = array
        if pos != len(data):
            raise ModelFormatError(
                f"{params_file.name}: {len(data) - pos} bytes left at byte {pos} after the last of "
                f"{len(saved)} parameters"
            )
        return params
    for name, var in saved.items():
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise ModelFormatError(f"parameter {name!r}: the name leaves the model directory")
        path = model_dir / relative
        if not path.is_file():
            raise ModelFormatError(f"parameter {name!r}: no file {path}")
        data = path.read_bytes()
        what = f"parameter {name!r} ({path})"
        array, _, pos = read_tensor_record(data, 0, what)
        if pos != len(data):
            raise ModelFormatError(f"{what}: {len(data) - pos} bytes left at byte {pos}")
        _check(array, var, what)
        params[name] = array
    return params


def read_paddle_model(path: str | os.PathLike) -> tuple[ProgramDesc, dict[str, np.ndarray]]:
    """The program and parameters of a Paddle legacy inference model (see find_model_files)."""
    model, params_file = find_model_files(path)
    program = parse_program_desc(model.read_bytes())
    return program, load_parameters(program, model.parent, params_file)
