"""Batch inference over tables of rows, one sentence a row: the handle Ray Data and Dask run
(docs/scale-out.md). Needs pyarrow (`pip install "fusebridge[ray]"` or `"[dask]"`)."""

from fusebridge.batch.model import BatchModel

__all__ = ["BatchModel"]
