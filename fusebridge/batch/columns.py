"""Which column feeds which model input, and how a block of rows becomes feeds and back.

A row is a sentence. Each logical model input reads the column named as the input (or the
name the user mapped it to):
- a LoD input (`x` with `x.offsets`): a list column, one list per row;
- a padded input (two symbolic dims, batch and time) with a lengths input (an integer input
  [batch] with no column of its own): a list column, padded to the block's longest row, and
  the lengths made from the lists;
- a padded input without a lengths input: a list column; rows of equal length are run
  together, so that no row sees padding it would not see alone;
- any other input: a column of one fixed-size tensor a row (the input without its batch axis).

Outputs come back one value a row: a LoD output's rows by its offsets; an array output is cut
along its batch axis (the declared batch dim, else axis 0), and an axis declared as the time
dim is cut to the row's own length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import onnx_ir as ir
import pyarrow as pa

from fusebridge import conventions
from fusebridge.batch import arrow_columns
from fusebridge.errors import ArgumentError, Error, ModelFormatError
from fusebridge.lod_tensor import LoDTensor
from fusebridge.runtime.feeds import FeedSpec

# A padded block is at least this many steps long: ONNX Runtime picks other kernels for a
# sequence of one step (the bundled speech model's Conv gives other last bits at time 1), so a
# block of one-word rows and each such row alone both run at two steps, as the same program.
MIN_STEPS = 2
# A padded feed is rows x the longest row: one very long row in a block would make the others'
# padding huge. Past this many bytes the block is refused (a smaller batch size helps).
PADDED_BYTES_MAX = 1 << 31

Feeds = dict[str, object]
Run = Callable[[Feeds], Mapping[str, object]]


@dataclasses.dataclass(frozen=True)
class Feed:
    """One logical input: the column it reads and how."""

    name: str
    column: str | None  # None: made from another input's column (lengths)
    kind: str  # "lod", "padded", "grouped", "lengths", "tensor"
    dtype: np.dtype
    element: tuple[int, ...]  # the shape of one list element, or of one row's tensor
    batch_axis: int = 0
    time_axis: int = 1
    lengths_of: str | None = None  # for "lengths": the padded input it measures


@dataclasses.dataclass(frozen=True)
class Cut:
    """One output: how its value is cut into rows."""

    name: str
    lod: bool
    batch_axis: int = 0
    time_axes: tuple[int, ...] = ()


def _static(spec: FeedSpec, skip: tuple[int, ...], what: str) -> tuple[int, ...]:
    shape = []
    for axis, d in enumerate(spec.dims):
        if axis in skip:
            continue
        if not isinstance(d, int):
            raise ModelFormatError(
                f"{what}: dimension {axis} is {d or '?'}, expected a fixed size: a row's "
                f"value must have the same shape in every row (dims {spec.shape_text()})"
            )
        shape.append(d)
    return tuple(shape)


@dataclasses.dataclass(frozen=True)
class ColumnMap:
    """The model's inputs and outputs as columns, read from the graph once."""

    feeds: tuple[Feed, ...]
    cuts: tuple[Cut, ...]
    batch_symbol: str | None
    time_symbol: str | None

    @property
    def input_columns(self) -> list[str]:
        return [f.column for f in self.feeds if f.column is not None]

    @property
    def output_names(self) -> list[str]:
        return [c.name for c in self.cuts]

    @classmethod
    def of(cls, graph: ir.Graph, columns: Mapping[str, str] | None = None) -> ColumnMap:
        columns = dict(columns or {})
        names = [v.name for v in graph.inputs if not v.is_initializer()]
        specs = {v.name: FeedSpec.of(v) for v in graph.inputs if v.name in names}
        lod = {n for n in names if conventions.offsets_name(n) in specs}
        logical = [n for n in names if not any(n == conventions.offsets_name(x) for x in lod)]
        unknown = sorted(set(columns) - set(logical))
        if unknown:
            raise ArgumentError(
                f"batch: --column renames {unknown}, but the model's inputs are {logical}"
            )

        def symbols(n: str) -> list[str]:
            return [d for d in specs[n].dims or () if isinstance(d, str)]

        # A lengths input: integer, [batch], and batch is a dim of a padded (rank >= 2) input.
        padded = [n for n in logical if n not in lod and len(symbols(n)) >= 2]
        lengths = {}
        for n in logical:
            dims = specs[n].dims
            if n in lod or specs[n].dtype is None or specs[n].dtype.kind not in "iu":
                continue
            if dims is None or len(dims) != 1 or not isinstance(dims[0], str) or n in columns:
                continue
            for p in padded:
                if dims[0] in symbols(p):
                    lengths[n] = p
                    break
        measured = set(lengths.values())
        if len(measured) < len(lengths):
            raise ModelFormatError(
                f"batch: inputs {sorted(lengths)} each look like the lengths of the same input"
            )
        batch = time = None
        if lengths:
            n, p = next(iter(lengths.items()))
            batch = specs[n].dims[0]
            time = next(d for d in symbols(p) if d != batch)
        elif padded:
            batch, time = _batch_and_time(padded[0], symbols(padded[0]))
        feeds = []
        for n in logical:
            spec = specs[n]
            column = columns.get(n, n)
            what = f"batch: input {n!r}"
            if spec.dtype is None or spec.dims is None:
                raise ModelFormatError(f"{what}: needs a declared element type and rank")
            if n in lod:
                feeds.append(Feed(n, column, "lod", spec.dtype, _static(spec, (0,), what)))
            elif n in lengths:
                feeds.append(Feed(n, None, "lengths", spec.dtype, (), lengths_of=lengths[n]))
            elif n in padded:
                dims = list(spec.dims)
                if batch not in dims or time not in dims:
                    raise ModelFormatError(
                        f"{what}: dims {spec.shape_text()}, expected the batch dim {batch!r} "
                        f"and the time dim {time!r}"
                    )
                b, t = dims.index(batch), dims.index(time)
                kind = "padded" if n in measured else "grouped"
                element = _static(spec, (b, t), what)
                feeds.append(Feed(n, column, kind, spec.dtype, element, b, t))
            else:
                dims = list(spec.dims)
                b = dims.index(batch) if batch in dims else 0
                if not dims:
                    raise ModelFormatError(f"{what}: a scalar input, expected one value a row")
                feeds.append(Feed(n, column, "tensor", spec.dtype, _static(spec, (b,), what), b))
        taken = [f.column for f in feeds if f.column is not None]
        if len(set(taken)) < len(taken):
            raise ArgumentError(f"batch: two inputs read the same column ({taken})")
        outs = [v.name for v in graph.outputs]
        cuts = []
        for v in graph.outputs:
            if any(v.name == conventions.offsets_name(o) for o in outs):
                continue
            if conventions.offsets_name(v.name) in outs:
                cuts.append(Cut(v.name, lod=True))
                continue
            dims = [] if v.shape is None else [getattr(d, "value", d) for d in v.shape]
            b = dims.index(batch) if batch is not None and batch in dims else 0
            t = tuple(i for i, d in enumerate(dims) if time is not None and d == time)
            if len(t) > 1:
                raise ModelFormatError(
                    f"batch: output {v.name!r} has the time dim {time!r} on axes {list(t)}, "
                    "expected one: a row's steps are cut along one axis"
                )
            cuts.append(Cut(v.name, lod=False, batch_axis=b, time_axes=t))
        return cls(tuple(feeds), tuple(cuts), batch, time)

    # -- the schema ------------------------------------------------------------------------
    def check_schema(self, schema: pa.Schema, source: str) -> None:
        """Every input column present and of a kind its input can read; no output name taken
        by an input column (it would be overwritten)."""
        for f in self.feeds:
            if f.column is None:
                continue
            if f.column not in schema.names:
                hint = (
                    f" (BatchModel(columns={{{f.name!r}: COLUMN}}) or --column {f.name}=COLUMN "
                    "maps it)"
                    if f.column == f.name
                    else ""
                )
                raise ArgumentError(
                    f"{source}: no column {f.column!r} for model input {f.name!r}{hint}; the "
                    f"columns are {schema.names}"
                )
            t = schema.field(f.column).type
            if f.kind != "tensor" and not arrow_columns.is_list(t):
                raise ArgumentError(
                    f"{source}: column {f.column!r} is {t}, expected a list column (one "
                    f"sentence a row) for input {f.name!r}"
                )
        clash = sorted(set(self.output_names) & set(schema.names))
        if clash:
            raise ArgumentError(
                f"{source}: columns {clash} are also outputs of the model; rename them (the "
                "outputs are added as columns of those names)"
            )


def _batch_and_time(name: str, symbols: list[str]) -> tuple[str, str]:
    """A padded input without lengths: the batch dim is the one named like it."""
    batchy = [s for s in symbols if "batch" in s.lower() or s in ("N", "n")]
    if len(symbols) != 2 or len(batchy) != 1:
        raise ModelFormatError(
            f"batch: input {name!r} has symbolic dims {symbols}, expected two of which one is "
            "the batch dim (named like 'batch'); no lengths input tells which"
        )
    return batchy[0], next(s for s in symbols if s != batchy[0])


# -- running a block -------------------------------------------------------------------------
def _padded(values: np.ndarray, lengths: np.ndarray, steps: int, f: Feed) -> np.ndarray:
    """Rows' lists as [rows, steps, *element] zero-padded, batch and time moved to the
    input's axes."""
    size = len(lengths) * steps * int(np.prod(f.element)) * f.dtype.itemsize
    if size > PADDED_BYTES_MAX:
        raise ArgumentError(
            f"column {f.column!r} (input {f.name!r}): {len(lengths)} rows padded to the longest "
            f"row's {steps} steps take {size} bytes, expected at most {PADDED_BYTES_MAX}; use "
            "a smaller batch size"
        )
    out = np.zeros((len(lengths), steps, *f.element), f.dtype)
    out[np.arange(steps) < lengths[:, None]] = values
    return np.moveaxis(out, [0, 1], [f.batch_axis, f.time_axis])


def _cast(a: np.ndarray, f: Feed, what: str) -> np.ndarray:
    if a.dtype == f.dtype:
        return a
    if not np.can_cast(a.dtype, f.dtype, "same_kind"):
        raise ArgumentError(f"{what}: values of type {a.dtype}, expected {f.dtype}")
    cast = a.astype(f.dtype)
    if a.dtype.kind in "iu" and not np.array_equal(cast, a):
        bad = a.reshape(-1)[np.flatnonzero(cast.reshape(-1) != a.reshape(-1))[0]]
        raise ArgumentError(f"{what}: value {bad} does not fit {f.dtype}")
    return cast


def _read(table: pa.Table, f: Feed) -> tuple[np.ndarray, np.ndarray | None]:
    what = f"column {f.column!r} (input {f.name!r})"
    if f.kind == "tensor":
        return _cast(
            arrow_columns.read_tensor(table.column(f.column), f.element, what), f, what
        ), None
    values, lengths = arrow_columns.read_lists(table.column(f.column), f.element, what)
    return _cast(values, f, what), lengths


def run_block(table: pa.Table, plan: ColumnMap, run: Run) -> dict[str, pa.Array]:
    """The output columns of one block of rows, each row's value as the row alone gives it."""
    rows = table.num_rows
    if rows == 0:
        return empty_outputs(plan, run)
    read = {f.name: _read(table, f) for f in plan.feeds if f.column is not None}
    grouped = [f for f in plan.feeds if f.kind == "grouped"]
    if not grouped:
        return _run_rows(read, plan, run, rows)
    first = read[grouped[0].name][1]
    for f in grouped[1:]:
        if not np.array_equal(read[f.name][1], first):
            raise ArgumentError(
                f"columns {grouped[0].column!r} and {f.column!r}: rows of other lengths"
            )
    parts, order = [], []
    for steps in np.unique(first):
        rows_of = np.flatnonzero(first == steps)
        parts.append(_run_rows(_take(read, rows_of), plan, run, len(rows_of)))
        order.append(rows_of)
    back = np.argsort(np.concatenate(order), kind="stable")
    return {
        c.name: pa.concat_arrays([p[c.name] for p in parts]).take(pa.array(back)) for c in plan.cuts
    }


def _take(read: dict, rows: np.ndarray) -> dict:
    out = {}
    for name, (values, lengths) in read.items():
        if lengths is None:
            out[name] = (values[rows], None)
            continue
        starts = (np.cumsum(lengths) - lengths)[rows]
        taken = lengths[rows]
        index = np.repeat(starts - (np.cumsum(taken) - taken), taken) + np.arange(taken.sum())
        out[name] = (values[index], taken)
    return out


def _run_rows(read: dict, plan: ColumnMap, run: Run, rows: int) -> dict[str, pa.Array]:
    feeds: Feeds = {}
    lengths_of: dict[str, np.ndarray] = {}
    for f in plan.feeds:
        if f.kind == "lengths":
            continue
        values, lengths = read[f.name]
        if f.kind == "lod":
            feeds[f.name] = LoDTensor(values, lengths=lengths)
        elif f.kind == "tensor":
            feeds[f.name] = np.moveaxis(values, 0, f.batch_axis) if f.batch_axis else values
        else:
            # Grouped rows are all as long as the block: no padding at all, as alone.
            longest = int(lengths.max())
            steps = max(longest, MIN_STEPS) if f.kind == "padded" else longest
            feeds[f.name] = _padded(values, lengths, steps, f)
            lengths_of[f.name] = lengths
    for f in plan.feeds:
        if f.kind == "lengths":
            feeds[f.name] = lengths_of[f.lengths_of].astype(f.dtype)
    try:
        outputs = run(feeds)
    except Error as exc:
        raise type(exc)(f"a batch of {rows} row(s): {exc}") from exc
    row_lengths = next(iter(lengths_of.values()), None)
    return {c.name: _cut(outputs[c.name], c, rows, row_lengths) for c in plan.cuts}


def _cut(value: object, c: Cut, rows: int, lengths: np.ndarray | None) -> pa.Array:
    what = f"output {c.name!r}"
    if c.lod:
        if len(value.offsets) != rows + 1:
            raise ModelFormatError(f"{what}: {len(value.offsets) - 1} sentences for {rows} rows")
        return arrow_columns.list_column(value.data, value.offsets)
    a = np.asarray(value)
    if a.ndim <= c.batch_axis or a.shape[c.batch_axis] != rows:
        raise ModelFormatError(
            f"{what}: shape {list(a.shape)} has no axis {c.batch_axis} of {rows} rows to cut"
        )
    a = np.moveaxis(a, c.batch_axis, 0)
    time = [t + 1 if t < c.batch_axis else t for t in c.time_axes]
    if not time or lengths is None:
        return arrow_columns.tensor_column(a)
    # One time axis is cut: [rows, steps, *rest] -> each row's first length steps.
    a = np.moveaxis(a, time[0], 1)
    keep = np.arange(a.shape[1]) < lengths[:, None]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return arrow_columns.list_column(a[keep], offsets)


def empty_outputs(plan: ColumnMap, run: Run) -> dict[str, pa.Array]:
    """An empty block: the output columns' types from one zero row, then no rows."""
    table = pa.table({f.column: _zero_row(f) for f in plan.feeds if f.column is not None})
    return {n: a.slice(0, 0) for n, a in run_block(table, plan, run).items()}


def _zero_row(f: Feed) -> pa.Array:
    if f.kind == "tensor":
        return arrow_columns.tensor_column(np.zeros((1, *f.element), f.dtype))
    values = np.zeros((MIN_STEPS, *f.element), f.dtype)
    return arrow_columns.list_column(values, np.array([0, MIN_STEPS], np.int64))


def empty_inputs(plan: ColumnMap) -> pa.Table:
    """A table of the input columns, of the types the model reads, without rows."""
    types = {}
    for f in plan.feeds:
        if f.column is not None:
            element = arrow_columns.element_type(f.dtype, f.element)
            types[f.column] = element if f.kind == "tensor" else pa.list_(element)
    return pa.table({name: pa.array([], t) for name, t in types.items()})
