"""A request's tensors, spelled as the model's own inputs, as rows (one sentence a row), and the
rows' output columns back as the model's own outputs.

The inputs are the optimized model's: a LoD input is its flat tensor and the companion offsets
(`words` [N, ...] and `words.offsets` [rows + 1]), as the portable export spells it; a padded
input is [batch, time, ...] in the model's axis order, with its lengths input when it has one;
the rest are [batch, ...]. Rows from many requests run as one block (fusebridge.batch), whose
outputs equal each row's alone; they come back in the same spelling: a LoD output as its flat
tensor and offsets, a padded output padded to the request's own time length with zeros past
each row's length.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from fusebridge import conventions
from fusebridge.batch import arrow_columns
from fusebridge.batch.columns import ColumnMap, Cut, Feed
from fusebridge.serve.protocol import ProtocolError


@dataclasses.dataclass(frozen=True)
class Rows:
    """One request's rows: the input columns, and the padded time length it gave (None: no
    padded input), to which padded outputs are padded back."""

    table: pa.Table
    steps: int | None


def input_dtypes(plan: ColumnMap) -> dict[str, np.dtype]:
    """The tensors a request gives, in the model's order, and the dtype of each."""
    dtypes = {}
    for f in plan.feeds:
        dtypes[f.name] = f.dtype
        if f.kind == "lod":
            dtypes[conventions.offsets_name(f.name)] = np.dtype(np.int64)
    return dtypes


def output_names(plan: ColumnMap) -> list[str]:
    names = []
    for c in plan.cuts:
        names.append(c.name)
        if c.lod:
            names.append(conventions.offsets_name(c.name))
    return names


def _offsets(offsets: np.ndarray, total: int, what: str) -> np.ndarray:
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != total:
        raise ProtocolError(
            f"{what}: offsets {offsets.tolist()[:8]} of shape {list(offsets.shape)}, expected "
            f"[rows + 1] from 0 to the {total} values"
        )
    if (np.diff(offsets) < 0).any():
        raise ProtocolError(f"{what}: offsets decrease, expected a running total")
    return offsets


def _element(value: np.ndarray, axes: tuple[int, ...], f: Feed, what: str) -> None:
    rest = tuple(d for i, d in enumerate(value.shape) if i not in axes)
    expected = len(f.element) + len(axes)
    if value.ndim != expected or rest != f.element:
        raise ProtocolError(
            f"{what}: shape {list(value.shape)}, expected {expected} dims with "
            f"{list(f.element)} beside the batch{' and time' if len(axes) > 1 else ''} axes"
        )


def to_rows(tensors: dict[str, np.ndarray], plan: ColumnMap) -> Rows:
    """The request's tensors (checked by protocol.read_tensors for names and datatypes) as a
    table of rows; a ProtocolError when shapes disagree."""
    columns: dict[str, pa.Array] = {}
    rows: dict[str, int] = {}
    steps = None
    lengths_for = {f.lengths_of: tensors[f.name] for f in plan.feeds if f.kind == "lengths"}
    for f in plan.feeds:
        value, what = tensors[f.name], f"input {f.name!r}"
        if f.kind == "lod":
            _element(value, (0,), f, what)
            offsets_of = conventions.offsets_name(f.name)
            offsets = _offsets(tensors[offsets_of], len(value), f"input {offsets_of!r}")
            columns[f.column] = arrow_columns.list_column(value, offsets)
            rows[f.name] = len(offsets) - 1
        elif f.kind == "tensor":
            _element(value, (f.batch_axis,), f, what)
            columns[f.column] = arrow_columns.tensor_column(np.moveaxis(value, f.batch_axis, 0))
            rows[f.name] = value.shape[f.batch_axis]
        elif f.kind in ("padded", "grouped"):
            _element(value, (f.batch_axis, f.time_axis), f, what)
            padded = np.moveaxis(value, [f.batch_axis, f.time_axis], [0, 1])
            count, steps = padded.shape[:2]
            lengths = np.full(count, steps, np.int64)
            if f.kind == "padded":
                lengths = lengths_for[f.name].astype(np.int64)
                if lengths.shape != (count,) or (lengths < 0).any() or (lengths > steps).any():
                    raise ProtocolError(
                        f"input {f.name!r}: lengths {lengths.tolist()[:8]}, expected {count} "
                        f"of them within its {steps} steps"
                    )
            keep = np.arange(steps) < lengths[:, None]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            columns[f.column] = arrow_columns.list_column(padded[keep], offsets)
            rows[f.name] = count
    if len(set(rows.values())) > 1:
        raise ProtocolError(f"inputs give different numbers of rows: {rows}")
    return Rows(pa.table(columns), steps)


def _lists(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A list column (maybe a slice) as (values [n, *element], offsets from 0)."""
    offsets = column.offsets.to_numpy().astype(np.int64)
    return _tensor(column.flatten()), offsets - offsets[0]


def _tensor(column: pa.Array) -> np.ndarray:
    """A column of scalars or nested fixed-size lists as an array [rows, *element]."""
    shape = []
    while pa.types.is_fixed_size_list(column.type):
        shape.append(column.type.list_size)
        column = column.flatten()
    return column.to_numpy(zero_copy_only=False).reshape(-1, *shape)


def _rank(value: np.ndarray, rank: int) -> np.ndarray:
    """An element of shape (1,) is a scalar in Arrow: its axis back, as the Session gives it."""
    return value[..., None] if value.ndim == rank - 1 else value


def _back(value: np.ndarray, c: Cut, rank: int) -> np.ndarray:
    """[rows, (steps,) *rest] back to the model's axis order (columns._cut, reversed)."""
    value = _rank(value, rank)
    if c.time_axes:
        t = c.time_axes[0]
        value = np.moveaxis(value, 1, t + 1 if t < c.batch_axis else t)
    return np.moveaxis(value, 0, c.batch_axis)


def to_tensors(
    columns: dict[str, pa.Array], plan: ColumnMap, ranks: dict[str, int], steps: int | None
) -> dict[str, np.ndarray]:
    """One request's output columns as the model's output tensors (ranks: BatchModel's
    output_ranks)."""
    out = {}
    for c in plan.cuts:
        column = columns[c.name]
        if c.lod:
            values, offsets = _lists(column)
            out[c.name] = _rank(values, ranks[c.name])
            out[conventions.offsets_name(c.name)] = offsets
        elif c.time_axes and steps is not None:
            values, offsets = _lists(column)  # cut to each row's length: pad back
            lengths = np.diff(offsets)
            padded = np.zeros((len(lengths), steps, *values.shape[1:]), values.dtype)
            padded[np.arange(steps) < lengths[:, None]] = values
            out[c.name] = _back(padded, c, ranks[c.name])
        else:
            out[c.name] = _back(_tensor(column), c, ranks[c.name])
    return out
