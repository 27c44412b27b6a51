"""Ray Data: run a BatchModel over a Dataset with an actor pool, one Session an actor.

    ds = ray.data.read_parquet("in/")
    out = fusebridge.ray.map_batches(ds, BatchModel("tagger/"), actors=4, threads=2)
    out.write_parquet("out/")

The same by hand: `ds.map_batches(fusebridge.ray.Predictor, fn_constructor_args=(model,),
compute=ray.data.ActorPoolStrategy(size=4), num_cpus=2, batch_format="pyarrow")`.
"""

from __future__ import annotations

import re

import pyarrow as pa

from fusebridge import errors
from fusebridge.batch import BatchModel
from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    Error,
    ExecutionError,
    MissingDependencyError,
)

try:
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - the extra is what brings it
    raise MissingDependencyError(
        'fusebridge.ray needs Ray Data: pip install "fusebridge[ray]"'
    ) from exc

BATCH_SIZE = 256  # rows a block: ~0.2-0.4 ms of engine work a block against ~60 ms of rows


class Predictor:
    """The actor's callable: builds the Session where the actor lives (Ray Data calls
    __call__ on another thread than __init__; the Session is shared by both)."""

    def __init__(self, model: BatchModel) -> None:
        self.model = model
        model.session  # noqa: B018 - built now, not inside the first block's time

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.model(batch)


def map_batches(
    ds: ray.data.Dataset,
    model: BatchModel,
    *,
    actors: int = 1,
    threads: int = 1,
    batch_size: int = BATCH_SIZE,
) -> ray.data.Dataset:
    """ds with the model's outputs added as columns, run by `actors` actors of `threads`
    kernel threads each (each actor asks Ray for that many CPUs)."""
    for name, value in (("actors", actors), ("threads", threads), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ArgumentError(f"fusebridge.ray.map_batches: {name} must be >= 1, got {value!r}")
    if not isinstance(model, BatchModel):
        raise ArgumentTypeError(
            f"fusebridge.ray.map_batches: model must be a BatchModel, got {type(model).__name__}"
        )
    if model.threads is None:
        model = _with_threads(model, threads)
    model.check_schema(ds.schema(fetch_if_missing=True).base_schema, "ray dataset")
    return ds.map_batches(
        Predictor,
        fn_constructor_args=(model,),
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads,
        batch_size=batch_size,
        batch_format="pyarrow",
        udf_modifying_row_count=False,
    )


def _with_threads(model: BatchModel, threads: int) -> BatchModel:
    copy = object.__new__(BatchModel)
    copy.__dict__.update(model.__getstate__(), threads=threads)
    return copy


# Ray hands the driver a worker's exception as text inside its own (UserCodeException): the
# type is lost, the traceback's last line keeps "fusebridge.errors.Kind: message".
_RAISED = re.compile(r"^fusebridge\.errors\.(\w+): (.*)$", re.MULTILINE)


def worker_error(exc: BaseException) -> Error:
    """The fusebridge error a worker raised, rebuilt from Ray's error about it (its type and
    message); any other failure as an ExecutionError with Ray's first line."""
    found = _RAISED.findall(str(exc))
    if found:
        kind, message = found[-1]
        cls = getattr(errors, kind, None)
        if isinstance(cls, type) and issubclass(cls, Error):
            return cls(message)
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return ExecutionError(f"Ray Data failed: {first}")
