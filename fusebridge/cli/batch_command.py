"""`fusebridge batch`: a model over a Parquet file or folder on Ray Data, Parquet out.

The driver loads and optimizes the model and checks the input's columns before Ray starts, so
a wrong column name costs no cluster. Rows stream: read, run by an actor pool (one Session an
actor), written under the output folder, with the input's other columns passed through.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyarrow and Ray are imported by the command, where missing is an error
    from fusebridge.batch import BatchModel

from fusebridge.errors import ArgumentError, Error, MissingDependencyError

# A local Ray gets the actors' CPUs plus this many for reading and writing: with none left, the
# read tasks wait for a CPU the actors hold, and the run never starts.
IO_CPUS = 1
# Blocks of at most this many bytes: Ray reads a Parquet file of one row group as one block,
# which only one actor could run; blocks this size give every actor work.
BLOCK_BYTES = 1 << 20
# Ray Data reads Parquet footers with 32 actors by default: ~2 s of a local Ray's start
# (benchmarks/scale_out.py). One does for a local run; a cluster keeps Ray's setting.
FOOTER_ACTORS = ("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", "1")


def parse_columns(items: list[str], model: BatchModel) -> dict[str, str]:
    """--column NAME=COLUMN (model input NAME reads COLUMN) or --column COLUMN (the model's only
    list input reads COLUMN)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, column = item.partition("=")
        if not sep:
            lists = [f.name for f in model.columns.feeds if f.kind in ("lod", "padded", "grouped")]
            if len(lists) != 1:
                raise ArgumentError(
                    f"batch: --column {item!r} names no input, and the model has {len(lists)} "
                    f"list inputs ({lists}); expected --column NAME=COLUMN"
                )
            name, column = lists[0], item
        if not name or not column:
            raise ArgumentError(f"batch: --column {item!r}: expected NAME=COLUMN or COLUMN")
        out[name] = column
    return out


def _filesystem(path: str) -> tuple[object, str]:
    """pyarrow's filesystem for a local path or a URI (s3://, gs://, hdfs://: what the nodes
    of a cluster read), and the path within it."""
    import pyarrow.fs as pafs

    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except Exception as exc:  # pyarrow: ArrowInvalid for an unknown scheme
            raise ArgumentError(f"batch: {path}: not a path pyarrow can open ({exc})") from exc
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _input_schema(path: str) -> object:
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    fs, inner = _filesystem(path)
    if fs.get_file_info(inner).type == pafs.FileType.NotFound:
        raise ArgumentError(f"batch: --input {path}: no such file or folder")
    try:
        return pads.dataset(inner, format="parquet", filesystem=fs).schema
    except Exception as exc:  # pyarrow's errors: ArrowInvalid, OSError
        raise ArgumentError(f"batch: --input {path}: not Parquet ({exc})") from exc


def _empty_output(path: str) -> None:
    import pyarrow.fs as pafs

    fs, inner = _filesystem(path)
    kind = fs.get_file_info(inner).type
    inside = pafs.FileSelector(inner) if kind == pafs.FileType.Directory else None
    if kind == pafs.FileType.File or (inside is not None and fs.get_file_info(inside)):
        raise ArgumentError(
            f"batch: --output {path} exists and is not an empty folder; expected a new or "
            "empty folder (nothing is overwritten)"
        )


def _rows_written(path: str) -> int:
    import pyarrow.dataset as pads

    fs, inner = _filesystem(path)
    return pads.dataset(inner, format="parquet", filesystem=fs).count_rows()


def batch_command(
    model_path: str,
    input_path: str,
    output_path: str,
    columns: list[str],
    address: str | None,
    actors: int,
    threads: int,
    batch_size: int,
) -> int:
    try:
        import ray

        from fusebridge import ray as fb_ray
        from fusebridge.batch import BatchModel
    except ImportError as exc:
        raise MissingDependencyError(
            f'batch needs Ray Data ({exc}): pip install "fusebridge[ray]"'
        ) from exc
    for flag, value in (("--actors", actors), ("--threads", threads), ("--batch-size", batch_size)):
        if value < 1:
            raise ArgumentError(f"batch: {flag} must be >= 1, got {value}")
    model = BatchModel(model_path, threads=threads)
    if columns:
        model = BatchModel(model_path, columns=parse_columns(columns, model), threads=threads)
    model.check_schema(_input_schema(input_path), f"batch: --input {input_path}")
    _empty_output(output_path)
    started = time.perf_counter()
    footer_env = os.environ.get(FOOTER_ACTORS[0])
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        os.environ.setdefault(*FOOTER_ACTORS)
        ray.init(num_cpus=actors * threads + IO_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        context = ray.data.DataContext.get_current()
        context.target_max_block_size = min(context.target_max_block_size, BLOCK_BYTES)
        context.enable_progress_bars = True
        ds = ray.data.read_parquet(input_path)
        out = fb_ray.map_batches(ds, model, actors=actors, threads=threads, batch_size=batch_size)
        try:
            out.write_parquet(output_path)
        except Error:
            raise
        except Exception as exc:  # a worker's error arrives wrapped by Ray
            raise fb_ray.worker_error(exc) from exc
    finally:
        ray.shutdown()
        if footer_env is None:
            os.environ.pop(FOOTER_ACTORS[0], None)
    rows = _rows_written(output_path)
    seconds = time.perf_counter() - started
    print(
        f"wrote {rows} rows to {output_path} in {seconds:.1f} s ({rows / seconds:.0f} rows/s, "
        f"{actors} actor(s) x {threads} thread(s){', cluster ' + address if address else ''})"
    )
    return 0
