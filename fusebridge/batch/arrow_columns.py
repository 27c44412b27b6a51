"""Arrow columns <-> numpy arrays, without a copy per row.

A sentence is a row: a list column holds one list per row, each element a scalar or a
fixed-size tensor (nested fixed_size_list, or list of equal lengths as Parquet gives it back).
An element of shape () or (1,) is a plain scalar in Arrow: the tagger's word ids [words, 1]
are a list<int64> column, as a user would write them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from fusebridge.errors import ArgumentError, ArgumentTypeError

_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)


def is_list(t: pa.DataType) -> bool:
    return any(f(t) for f in _LISTS)


def _no_nulls(array: pa.Array, what: str) -> None:
    if array.null_count:
        row = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise ArgumentError(f"{what}: row {row} is null, expected a value in every row")


def _flat(array: pa.Array) -> pa.Array:
    """The values a list array's rows cover (its offset and length honoured)."""
    return array.flatten() if is_list(array.type) else array


def _elements(values: pa.Array, shape: Sequence[int], what: str) -> np.ndarray:
    """values (scalars, or nested lists of `shape` per element) as an array [n, *shape]."""
    inner = tuple(shape)
    nested = () if inner == (1,) and not is_list(values.type) else inner
    for i, size in enumerate(nested):
        if not is_list(values.type):
            raise ArgumentTypeError(
                f"{what}: element type {values.type} has {i} nested list level(s), expected "
                f"{len(nested)} for elements of shape {list(inner)}"
            )
        if values.null_count:
            raise ArgumentError(f"{what}: {values.null_count} null nested list(s), expected lists")
        lengths = _lengths(values)
        if len(lengths) and (lengths != size).any():
            bad = int(np.flatnonzero(lengths != size)[0])
            raise ArgumentError(
                f"{what}: a nested list holds {int(lengths[bad])} values, expected {size} "
                f"(elements of shape {list(inner)})"
            )
        values = _flat(values)
    if is_list(values.type):
        raise ArgumentTypeError(
            f"{what}: element type nests deeper than elements of shape {list(inner)}"
        )
    if values.null_count:
        raise ArgumentError(f"{what}: {values.null_count} null value(s), expected numbers")
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
        raise ArgumentTypeError(f"{what}: values of type {values.type}, expected numbers")
    return values.to_numpy(zero_copy_only=False).reshape(-1, *inner)


def _lengths(array: pa.Array) -> np.ndarray:
    if pa.types.is_fixed_size_list(array.type):
        return np.full(len(array), array.type.list_size, np.int64)
    return np.diff(array.offsets.to_numpy()).astype(np.int64)


def _one_chunk(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


def read_lists(
    column: pa.ChunkedArray | pa.Array, element: Sequence[int], what: str
) -> tuple[np.ndarray, np.ndarray]:
    """A list column: (the values of all rows [sum of lengths, *element], lengths [rows])."""
    array = _one_chunk(column)
    if not is_list(array.type):
        raise ArgumentTypeError(f"{what}: type {array.type}, expected a list column (a sentence)")
    _no_nulls(array, what)
    return _elements(_flat(array), element, what), _lengths(array)


def read_tensor(column: pa.ChunkedArray | pa.Array, shape: Sequence[int], what: str) -> np.ndarray:
    """A column of one fixed-size tensor a row: an array [rows, *shape]."""
    array = _one_chunk(column)
    _no_nulls(array, what)
    return _elements(array, shape, what)


def _nested(values: np.ndarray) -> pa.Array:
    """values [n, *element] as n Arrow elements: scalars, or nested fixed_size_lists."""
    inner = values.shape[1:]
    if inner in ((), (1,)):
        return pa.array(values.reshape(-1))
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    for size in reversed(inner):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return flat


def list_column(values: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Row r holds values[offsets[r]:offsets[r+1]] (values [n, *element])."""
    # int32 offsets while they fit, as pa.array makes lists; large_list beyond.
    if offsets[-1] < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), _nested(values))
    return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), _nested(values))


def tensor_column(values: np.ndarray) -> pa.Array:
    """Row r holds values[r] (values [rows, *element])."""
    return _nested(values)


def element_type(dtype: np.dtype, element: Sequence[int]) -> pa.DataType:
    """The Arrow type tensor_column gives to elements of this dtype and shape."""
    t = pa.from_numpy_dtype(dtype)
    if tuple(element) in ((), (1,)):
        return t
    for size in reversed(tuple(element)):
        t = pa.list_(t, size)
    return t
