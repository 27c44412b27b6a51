"""Dask: run a BatchModel over a dask DataFrame's partitions, one Session a worker process.

    ddf = dask.dataframe.read_parquet("in/")
    out = fusebridge.dask.map_partitions(ddf, BatchModel("tagger/"))
    out.to_parquet("out/")

The model travels to each worker once, as one task every partition depends on (not inside
every partition's task); BatchModel builds the worker's Session on first use and its threads
share it. Only the model's input columns go through Arrow; the others pass through untouched.

List columns: dask.dataframe.read_parquet gives a list column as objects (a numpy array a
row), which is what the model reads. `dd.from_pandas` on a column of Python lists, with the
default "dataframe.convert-string" option, turns the lists into strings ("[1, 2]"): such a
column is refused up front; set `dask.config.set({"dataframe.convert-string": False})` before
building the frame.
"""

from __future__ import annotations

import numpy as np

from fusebridge.batch import BatchModel
from fusebridge.errors import ArgumentError, MissingDependencyError

try:
    import dask
    import dask.dataframe as dd
    import pandas as pd
except ImportError as exc:  # pragma: no cover - the extra is what brings it
    raise MissingDependencyError(
        'fusebridge.dask needs dask[dataframe]: pip install "fusebridge[dask]"'
    ) from exc


def _meta(model: BatchModel, meta: pd.DataFrame) -> pd.DataFrame:
    """The frame's meta with the output columns: lists and tensors as objects (a numpy array a
    row), scalars as their numpy type."""
    columns = {}
    for name, t in model.output_types().items():
        dtype = t.to_pandas_dtype() if not hasattr(t, "value_type") else np.dtype(object)
        columns[name] = pd.Series([], dtype=dtype, index=meta.index[:0])
    return meta.assign(**columns)


def _check(model: BatchModel, meta: pd.DataFrame) -> None:
    names = list(meta.columns)
    for f in model.columns.feeds:
        if f.column is None:
            continue
        if f.column not in names:
            raise ArgumentError(
                f"dask: no column {f.column!r} for model input {f.name!r}; the columns are {names}"
            )
        dtype = meta[f.column].dtype
        if f.kind != "tensor" and dtype != np.dtype(object):
            raise ArgumentError(
                f"dask: column {f.column!r} is {dtype}, expected objects (a list or array a "
                f"row) for input {f.name!r}; lists made strings by dask's convert-string "
                'option need dask.config.set({"dataframe.convert-string": False})'
            )
    clash = sorted(set(model.output_names) & set(names))
    if clash:
        raise ArgumentError(f"dask: columns {clash} are also outputs of the model; rename them")


def _run(partition: pd.DataFrame, model: BatchModel) -> pd.DataFrame:
    return model(partition)


def map_partitions(ddf: dd.DataFrame, model: BatchModel) -> dd.DataFrame:
    """ddf with one column per model output added, beside its other columns."""
    if not isinstance(model, BatchModel):
        raise ArgumentError(
            f"fusebridge.dask.map_partitions: model must be a BatchModel, got "
            f"{type(model).__name__}"
        )
    meta = ddf._meta
    _check(model, meta)
    shipped = dask.delayed(model, pure=True)  # one task holds it; partitions depend on it
    return ddf.map_partitions(_run, shipped, meta=_meta(model, meta), align_dataframes=False)
