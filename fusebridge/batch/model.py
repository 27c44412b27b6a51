"""BatchModel: a picklable handle on a model that builds its Session where it lands.

The driver loads and optimizes the model once and ships the optimized model as ONNX bytes:
workers never load the original files (which may not be on their disk) nor run the fuse
passes, and every worker runs the very same graph. A process builds one Session per model
(keyed by the bytes' SHA-256), however many copies of the handle it unpickles, and runs every
block of every thread through it.

Every row's outputs equal a Session run on that row alone, whatever the blocks: our kernels'
bits do not depend on the batch, and the Session is built with placement="kernels", so that no
GRU moves to ONNX Runtime for one block shape and stays on our kernel for another
(docs/scale-out.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir
import pyarrow as pa

from fusebridge import kernels, random
from fusebridge.batch import arrow_columns
from fusebridge.batch.columns import ColumnMap, empty_outputs, run_block
from fusebridge.errors import ArgumentError, ArgumentTypeError, UnsupportedOpError
from fusebridge.fuse_passes import optimize
from fusebridge.integrations import load
from fusebridge.lod_tensor import LoDTensor
from fusebridge.runtime import Session

# Per process: model digest -> its Session. Workers unpickle a handle per task or actor; the
# Session (ONNX Runtime sessions, packed weights) is built once. A worker that runs many models
# in turn keeps the last SESSIONS_KEPT.
SESSIONS_KEPT = 4
_SESSIONS: dict[str, Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(digest: str, data: bytes, threads: int | None) -> Session:
    session = _SESSIONS.get(digest)
    if session is not None:
        return session
    with _SESSIONS_LOCK:
        if digest not in _SESSIONS:
            if threads is not None:
                kernels.set_num_threads(threads)
            model = ir.serde.deserialize_model(_proto(data))
            if len(_SESSIONS) >= SESSIONS_KEPT:
                _SESSIONS.pop(next(iter(_SESSIONS)))
            _SESSIONS[digest] = Session(model, placement="kernels")
        return _SESSIONS[digest]


def _proto(data: bytes) -> object:
    import onnx

    return onnx.load_model_from_string(data)


class BatchModel:
    """A model for batch inference: call it on a pyarrow Table (or a pandas DataFrame) of rows,
    one sentence a row; it returns the table with one column per model output added.

    model: a path fusebridge.load reads, or an onnx_ir.Model; optimized here with `pipeline`
    ("inference"; None: run as given). columns: model input -> column, for inputs whose column
    has another name. threads: the kernels' threads in each process that runs it (None: the
    process's setting)."""

    def __init__(
        self,
        model: ir.Model | str | os.PathLike,
        *,
        columns: Mapping[str, str] | None = None,
        pipeline: str | None = "inference",
        threads: int | None = None,
    ) -> None:
        bad = isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        if threads is not None and bad:
            raise ArgumentError(f"BatchModel: threads must be a positive int, got {threads!r}")
        source = str(model) if isinstance(model, (str, os.PathLike)) else "the model"
        if isinstance(model, (str, os.PathLike)):
            model = load(model)
        if not isinstance(model, ir.Model):
            raise ArgumentTypeError(
                f"BatchModel: model must be a path or an onnx_ir.Model, got {type(model).__name__}"
            )
        if pipeline is not None:
            model, _ = optimize(model, pipeline)
        names = {v.name for v in model.graph.inputs}
        if random.SEED_INPUT in names:
            raise UnsupportedOpError(
                f"BatchModel: {source} draws random numbers (input {random.SEED_INPUT!r}: "
                "training dropout); batch inference runs inference graphs, expected a model "
                "without random state"
            )
        self.source = source
        self.columns = ColumnMap.of(model.graph, columns)
        self.signature = _signature(model.graph)
        self.threads = threads
        self._data = ir.serde.serialize_model(model).SerializeToString()
        self.digest = hashlib.sha256(self._data).hexdigest()
        self._types: dict[str, pa.DataType] | None = None
        self._ranks: dict[str, int] | None = None

    # -- pickling: the bytes travel, the Session is built where they land --------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_types"] = state["_ranks"] = None
        return state

    def __dask_tokenize__(self) -> tuple:
        return ("fusebridge.BatchModel", self.digest, self.columns, self.threads)

    @property
    def session(self) -> Session:
        """This process's Session of the model (built on first use)."""
        return _session(self.digest, self._data, self.threads)

    @property
    def input_columns(self) -> list[str]:
        return self.columns.input_columns

    @property
    def output_names(self) -> list[str]:
        return self.columns.output_names

    def check_schema(self, schema: pa.Schema, source: str = "batch") -> None:
        """Raise fusebridge.Error when a table of this schema cannot be run (say which column
        and what was expected), before any work starts."""
        self.columns.check_schema(schema, source)

    def output_types(self) -> dict[str, pa.DataType]:
        """The Arrow type of each output column (from a run of one zero row, made once)."""
        if self._types is None:
            self._probe()
        return self._types

    def output_ranks(self) -> dict[str, int]:
        """Each output's rank as the Session gives it (a LoD output: its values'); Arrow
        drops an element axis of size 1, which answers spelled as tensors keep."""
        if self._ranks is None:
            self._probe()
        return self._ranks

    def _probe(self) -> None:
        ranks = {}

        def run(feeds: dict) -> Mapping[str, object]:
            out = self.session.run(feeds)
            for n, v in out.items():
                ranks[n] = np.ndim(v.data if isinstance(v, LoDTensor) else v)
            return out

        empty = empty_outputs(self.columns, run)
        self._types = {n: a.type for n, a in empty.items()}
        self._ranks = {n: ranks[n] for n in self._types}

    def outputs(self, table: pa.Table) -> dict[str, pa.Array]:
        """The output columns for the rows of `table` (its other columns are not read)."""
        self.check_schema(table.schema)
        if table.num_rows == 0:  # Ray and Dask hand out empty blocks: no run for them
            return {n: pa.array([], t) for n, t in self.output_types().items()}
        return run_block(table, self.columns, self.session.run)

    def __call__(self, batch: object) -> object:
        """batch (a pyarrow Table or a pandas DataFrame) with the output columns added."""
        if isinstance(batch, pa.Table):
            out = self.outputs(batch)
            for name, column in out.items():
                batch = batch.append_column(name, column)
            return batch
        pandas = _pandas_or_none(batch)
        if pandas is not None:
            clash = sorted(set(self.output_names) & set(batch.columns))
            if clash:  # assign() would overwrite them
                raise ArgumentError(
                    f"batch: columns {clash} are also outputs of the model; rename them"
                )
            if len(batch):
                table = pa.Table.from_pandas(batch[self.input_columns], preserve_index=False)
                out = self.outputs(table)
            else:  # an empty object column has no element type to check: Arrow's null
                out = {n: pa.array([], t) for n, t in self.output_types().items()}
            values = {n: _to_pandas(a, batch.index) for n, a in out.items()}
            return batch.assign(**values)
        raise ArgumentTypeError(
            f"BatchModel: a batch must be a pyarrow.Table or a pandas.DataFrame, got "
            f"{type(batch).__name__}"
        )


def _signature(graph: ir.Graph) -> dict[str, tuple[np.dtype | None, list[int] | None]]:
    """Each graph input and output: its dtype and shape (-1 where free), None: undeclared."""
    out = {}
    for v in [*graph.inputs, *graph.outputs]:
        if v.is_initializer():
            continue
        try:
            dtype = None if v.dtype is None else np.dtype(v.dtype.numpy())
        except TypeError:  # a type numpy has no dtype for
            dtype = None
        dims = None if v.shape is None else [d if isinstance(d, int) else -1 for d in v.shape]
        out[v.name] = (dtype, dims)
    return out


def _pandas_or_none(batch: object) -> object:
    try:
        import pandas as pd
    except ImportError:
        return None
    return batch if isinstance(batch, pd.DataFrame) else None


def _to_pandas(column: pa.Array, index: object) -> object:
    """An output column as a pandas Series: a list a row as a numpy array a row."""
    import pandas as pd

    if arrow_columns.is_list(column.type):
        values = np.empty(len(column), object)
        values[:] = column.to_numpy(zero_copy_only=False)
        return pd.Series(values, index=index)
    return pd.Series(column.to_numpy(zero_copy_only=False), index=index)
