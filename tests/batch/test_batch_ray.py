"""Ray Data's map_batches with an actor pool: a local Ray of 2 CPUs, started and stopped here.
Every row's outputs equal the row alone (helpers.batch_rows), whatever the blocks and actors."""

import itertools

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from helpers.batch_rows import (  # noqa: E402
    SPEECH,
    TAGGER,
    alone,
    frames,
    frames_column,
    sentences,
    speech_alone,
    words_table,
)
from helpers.local_ray import start_local_ray  # noqa: E402

import fusebridge  # noqa: E402
import fusebridge.ray as fb_ray  # noqa: E402
from fusebridge.batch import BatchModel  # noqa: E402

TAGS = "crf_decoding_0.tmp_0"
ROWS = sentences(300, seed=11)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    start_local_ray(tmp_path_factory.mktemp("driver"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tagger():
    return BatchModel(TAGGER)


def collected(ds) -> pa.Table:
    return pa.concat_tables(ray.get(ds.to_arrow_refs())).sort_by("id")


def check_tags(table: pa.Table) -> None:
    assert table.column("id").to_pylist() == list(range(len(ROWS)))
    assert table.column("note").to_pylist() == [f"row {i}" for i in range(len(ROWS))]
    for i, words in enumerate(ROWS):
        assert table.column(TAGS)[i].as_py() == alone(TAGGER, words)[TAGS].tolist(), i


def test_parquet_in_and_out_through_an_actor(local_ray, tagger, tmp_path):
    """Three files (one of them empty), streamed through one actor, written as Parquet."""
    table = words_table(ROWS)
    for i, (a, b) in enumerate([(0, 100), (100, 100), (100, 300)]):
        pq.write_table(table.slice(a, b - a), tmp_path / f"part{i}.parquet")
    ds = ray.data.read_parquet(str(tmp_path))
    fb_ray.map_batches(ds, tagger, actors=1, threads=1, batch_size=37).write_parquet(
        str(tmp_path / "out")
    )
    check_tags(pq.read_table(tmp_path / "out").sort_by("id"))


def test_two_actors_and_any_blocks_give_the_row_alone(local_ray, tagger):
    """Ray's own spelling, two actors of half a CPU each (2 CPUs: one is left for the reads),
    blocks of every size, an empty block among them: the worker survives it."""
    table = words_table(ROWS)
    cuts = [0, 1, 1, 50, 51, 170, 300]
    ds = ray.data.from_arrow([table.slice(a, b - a) for a, b in itertools.pairwise(cuts)])
    for batch_size in (1, 64, 300):
        out = ds.map_batches(
            fb_ray.Predictor,
            fn_constructor_args=(tagger,),
            compute=ray.data.ActorPoolStrategy(size=2),
            num_cpus=0.5,
            batch_size=batch_size,
            batch_format="pyarrow",
        )
        check_tags(collected(out))


def test_padded_rows_on_actors(local_ray):
    rows = frames(40, seed=12, width=16)
    table = pa.table({"id": np.arange(len(rows)), "x": frames_column(rows)})
    ds = ray.data.from_arrow([table.slice(0, 13), table.slice(13)])
    out = collected(fb_ray.map_batches(ds, BatchModel(SPEECH), batch_size=8))
    for i, r in enumerate(rows):
        assert np.array_equal(np.array(out.column("mask")[i].as_py(), np.float32), speech_alone(r))


def test_a_missing_column_fails_before_any_actor(local_ray, tagger):
    ds = ray.data.from_arrow(words_table(ROWS).rename_columns(["id", "note", "tokens"]))
    with pytest.raises(fusebridge.ArgumentError, match="no column 'words'"):
        fb_ray.map_batches(ds, tagger)


def test_a_bad_row_is_the_workers_typed_error(local_ray, tagger):
    table = pa.table({"id": [0, 1], "words": pa.array([[1, 2], None], pa.list_(pa.int64()))})
    out = fb_ray.map_batches(ray.data.from_arrow(table), tagger)
    with pytest.raises(Exception, match="row 1 is null") as caught:
        collected(out)
    error = fb_ray.worker_error(caught.value)  # Ray keeps the text, not the type
    assert type(error) is fusebridge.ArgumentError
    assert str(error) == (
        "column 'words' (input 'words'): row 1 is null, expected a value in every row"
    )
    assert isinstance(fb_ray.worker_error(RuntimeError("lost\nnode")), fusebridge.ExecutionError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"actors": 0}, "actors must be >= 1"), ({"threads": True}, "threads must be >= 1")],
)
def test_bad_arguments(local_ray, tagger, kwargs, message):
    with pytest.raises(fusebridge.ArgumentError, match=message):
        fb_ray.map_batches(ray.data.from_arrow(words_table(ROWS[:2])), tagger, **kwargs)
