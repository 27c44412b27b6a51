"""Dask: run a BatchModel over a dask DataFrame's partitions, one Session a worker process.

    model = BatchModel("tagger/")
    ddf = dask.dataframe.read_parquet("in/")
    out = fusebridge.dask.map_partitions(ddf, model)
    schema = pa.schema([("id", pa.int64()), ("words", pa.list_(pa.int64())),
                        *model.output_types().items()])
    out.to_parquet("out/", schema=schema)  # see "Writing Parquet" below

The model travels to each worker once, as one task every partition depends on (not inside
every partition's task); BatchModel builds the worker's Session on first use, and a threaded
worker's threads share it (Session.run is thread-safe; give the BatchModel threads=1 when a
worker runs many threads, or the kernels' pools oversubscribe the CPUs). Only the model's input
columns go through Arrow; the other columns pass through untouched, in their order.

List columns (dask 2026.8, pandas 3):
- `dd.read_parquet` gives a list column as objects, a numpy array a row, whatever the
  "dataframe.convert-string" option; with dtype_backend="pyarrow" as an Arrow list dtype. Both
  are read as they are.
- A frame made from pandas frames (`dd.from_pandas`, `from_dict`, `from_map`, `from_delayed`)
  with an object column of Python lists or numpy arrays, under the default
  "dataframe.convert-string" (on with pandas >= 2 and pyarrow), has every row turned into its
  text: "[1, 2]", or numpy's "[1 2]", which elides long arrays: the values are lost. Such a
  column (a string dtype in the meta) is refused before any work. Either build the frame
  inside `dask.config.set({"dataframe.convert-string": False})`, or give the column an Arrow
  list dtype first (`pd.ArrowDtype(pa.list_(pa.int64()))`), which the option leaves be.

The outputs come back as the meta says: a list or tensor output as objects (a numpy array a
row), a scalar output as its numpy dtype.

Writing Parquet: dask's `to_parquet` infers the schema from a made-up row of the meta, which it
cannot do for an object column of arrays (the input list column as read_parquet gives it, or
an output), and a dict of types does not help (dask infers the other columns first): pass the
whole schema, the outputs' types being `model.output_types()`. `schema=None` takes each file's
schema from its rows: an empty partition's file then has null columns, and pyarrow refuses to
read the files as one dataset.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fusebridge.batch import BatchModel
from fusebridge.batch.arrow_columns import is_list
from fusebridge.errors import ArgumentError, ArgumentTypeError, MissingDependencyError

try:
    import dask
    import dask.dataframe as dd
    import pandas as pd
except ImportError as exc:  # pragma: no cover - the extra is what brings it
    raise MissingDependencyError(
        'fusebridge.dask needs dask[dataframe]: pip install "fusebridge[dask]"'
    ) from exc

SOURCE = "dask dataframe"
# An object column's element type is in its rows, not in the meta: for the check up front it
# stands as a list (what the model reads). Each partition's Arrow table is checked again.
_IN_THE_ROWS = pa.list_(pa.null())


def map_partitions(ddf: dd.DataFrame, model: BatchModel) -> dd.DataFrame:
    """ddf with one column per model output added after its own columns, every row's outputs
    those of the row run alone. The columns are checked against the model from ddf's meta,
    before any work: a missing input column, a column of strings or of another non-list type
    for a sentence input, or a column named as an output raise fusebridge.ArgumentError."""
    if not isinstance(ddf, dd.DataFrame):
        raise ArgumentTypeError(
            f"fusebridge.dask.map_partitions: ddf must be a dask.dataframe.DataFrame, got "
            f"{type(ddf).__name__}"
        )
    if not isinstance(model, BatchModel):
        raise ArgumentTypeError(
            f"fusebridge.dask.map_partitions: model must be a BatchModel, got "
            f"{type(model).__name__}"
        )
    meta = ddf._meta  # the empty pandas frame dask keeps: no partition is computed
    _check(model, meta)
    # As a task of its own, the model (megabytes of ONNX) is sent to a worker once and fetched
    # by the others; as a plain argument it would be pickled into every partition's task.
    shipped = dask.delayed(model, pure=True)
    return ddf.map_partitions(_run, shipped, meta=_meta(model, meta), align_dataframes=False)


def _run(partition: pd.DataFrame, model: BatchModel) -> pd.DataFrame:
    return model(partition)


def _check(model: BatchModel, meta: pd.DataFrame) -> None:
    schema = pa.schema([(str(name), _arrow_type(dtype)) for name, dtype in meta.dtypes.items()])
    for feed in model.columns.feeds:
        if feed.column is None or feed.column not in schema.names or feed.kind == "tensor":
            continue  # a missing column: check_schema says so
        t = schema.field(feed.column).type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            raise ArgumentError(
                f"{SOURCE}: column {feed.column!r} holds strings, expected a list a row for "
                f"input {feed.name!r}; dask's 'dataframe.convert-string' option turns an "
                "object column of lists into their text in dd.from_pandas (from_map, "
                "from_delayed): build the frame inside "
                'dask.config.set({"dataframe.convert-string": False}), or give the column an '
                "Arrow list dtype (pd.ArrowDtype(pa.list_(...)))"
            )
    model.check_schema(schema, SOURCE)


def _arrow_type(dtype: object) -> pa.DataType:
    """The Arrow type a column of this pandas dtype becomes, or _IN_THE_ROWS where the meta
    does not tell (objects, and dtypes no model input reads: categoricals, nullable ints)."""
    if isinstance(dtype, pd.ArrowDtype):
        return dtype.pyarrow_dtype
    if isinstance(dtype, pd.StringDtype):  # "string" and pandas 3's "str", either storage
        return pa.string()
    try:
        return pa.from_numpy_dtype(dtype)
    except (TypeError, pa.ArrowNotImplementedError):
        return _IN_THE_ROWS


def _meta(model: BatchModel, meta: pd.DataFrame) -> pd.DataFrame:
    """The frame's meta with the output columns as BatchModel's pandas output has them: lists
    and fixed-size lists (tensors) as objects, scalars as their numpy dtype."""
    outputs = {}
    for name, t in model.output_types().items():
        dtype = np.dtype(object) if is_list(t) else np.dtype(t.to_pandas_dtype())
        outputs[name] = pd.Series([], dtype=dtype, index=meta.index)
    return meta.assign(**outputs)
