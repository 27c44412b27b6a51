"""Batch inference over tables of rows, one sentence a row: the handle Ray Data and Dask run
(docs/scale-out.md). Needs pyarrow (`pip install "fusebridge[ray]"` or `"[dask]"`)."""

from fusebridge.errors import MissingDependencyError

try:
    import pyarrow  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extras bring it
    raise MissingDependencyError(
        'fusebridge.batch needs pyarrow: pip install "fusebridge[ray]" or "fusebridge[dask]"'
    ) from exc

from fusebridge.batch.model import BatchModel

__all__ = ["BatchModel"]
