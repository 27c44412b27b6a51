"""fusebridge.dask.map_partitions on a Dask LocalCluster of two worker processes, started and
stopped here: every row's outputs equal a Session run on the row alone (helpers.batch_rows:
fusebridge.Session(optimize(load(path))[0], placement="kernels")), the other columns come back
unchanged, and each worker process builds one Session however many partitions it runs."""

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import dask  # noqa: E402
import pandas as pd  # noqa: E402
from helpers.batch_rows import SENTIMENT, TAGGER, alone, sentences, words_table  # noqa: E402

import fusebridge  # noqa: E402
import fusebridge.dask as fb_dask  # noqa: E402
from fusebridge.batch import BatchModel  # noqa: E402

TAGS = "crf_decoding_0.tmp_0"
ROWS = sentences(200, seed=31)
SIZES = [97, 53, 31, 19]  # the partitions' rows: unequal, in order
WORDS = pd.ArrowDtype(pa.list_(pa.int64()))


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        # No dashboard, but the scheduler still serves /health on 0.0.0.0:8787 by default:
        # a free port on loopback instead, so that parallel CI jobs do not collide.
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def tagger():
    return BatchModel(TAGGER)


@pytest.fixture(scope="module")
def expected():
    return [alone(TAGGER, words)[TAGS] for words in ROWS]


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    """ROWS as Parquet, one row group a partition (read_parquet: the words as objects, a numpy
    array a row)."""
    path = tmp_path_factory.mktemp("dask") / "in.parquet"
    table = words_table(ROWS)
    with pq.ParquetWriter(path, table.schema) as writer:
        for start, rows in zip(np.cumsum([0, *SIZES]), SIZES):
            writer.write_table(table.slice(start, rows))
    return dd.read_parquet(path, split_row_groups=True)


def arrow_lists(rows: list[list[int]], divisions: list[int]) -> dd.DataFrame:
    """rows from pandas, the words as an Arrow list dtype (which dask's convert-string leaves
    be), cut at the index values `divisions` (the last one the last row's)."""
    frame = pd.DataFrame(
        {
            "id": np.arange(len(rows)),
            "note": [f"row {i}" for i in range(len(rows))],
            "words": pd.array(rows, dtype=WORDS),
        }
    )
    return dd.from_pandas(frame, npartitions=1).repartition(divisions=divisions)


def check_tags(out: pd.DataFrame, ids: list[int], expected: list[np.ndarray]) -> None:
    assert out["id"].tolist() == ids
    assert out["note"].tolist() == [f"row {i}" for i in ids]
    assert [list(w) for w in out["words"]] == [ROWS[i] for i in ids]
    for i, tags in zip(ids, out[TAGS]):
        assert isinstance(tags, np.ndarray) and tags.dtype == np.int64, i
        assert tags.tolist() == expected[i].tolist(), i


@pytest.mark.parametrize("source", ["parquet", "arrow lists"])
def test_every_row_is_the_row_alone(client, tagger, expected, parquet, source):
    starts = np.cumsum([0, *SIZES[:-1]]).tolist()
    ddf = parquet if source == "parquet" else arrow_lists(ROWS, [*starts, len(ROWS) - 1])
    assert ddf.map_partitions(len).compute().tolist() == SIZES
    result = fb_dask.map_partitions(ddf, tagger)
    assert list(result.columns) == ["id", "note", "words", TAGS]
    assert result.dtypes[TAGS] == np.dtype(object)
    out = result.compute()
    assert out.dtypes.to_dict() == result.dtypes.to_dict()
    check_tags(out, list(range(len(ROWS))), expected)


def test_empty_partitions_keep_the_meta(client, tagger, expected, parquet):
    late = fb_dask.map_partitions(parquet[parquet.id >= 120], tagger)  # partition 0 is empty
    assert late.map_partitions(len).compute().tolist() == [0, 30, 31, 19]
    out = late.compute()
    assert out.dtypes.to_dict() == late.dtypes.to_dict()
    check_tags(out, list(range(120, len(ROWS))), expected)
    none = fb_dask.map_partitions(parquet[parquet.id < 0], tagger)
    out = none.compute()
    assert len(out) == 0 and list(out.columns) == ["id", "note", "words", TAGS]
    assert out.dtypes.to_dict() == none.dtypes.to_dict()
    assert out.dtypes[TAGS] == np.dtype(object)


def test_written_to_parquet_with_the_whole_schema(client, tagger, expected, parquet, tmp_path):
    """As the module's docstring says: dask cannot infer an object column's type, the schema
    is given whole; an empty partition then writes a file of the same schema."""
    late = fb_dask.map_partitions(parquet[parquet.id >= 120], tagger)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("note", pa.large_string()),
            ("words", pa.list_(pa.int64())),
            *tagger.output_types().items(),
        ]
    )
    late.to_parquet(tmp_path / "out", schema=schema)
    table = pq.read_table(tmp_path / "out").sort_by("id")
    assert table.schema.field(TAGS).type == pa.list_(pa.int64())
    assert table.column("id").to_pylist() == list(range(120, len(ROWS)))
    for i, tags in zip(range(120, len(ROWS)), table.column(TAGS).to_pylist()):
        assert tags == expected[i].tolist(), i


def test_python_lists_without_convert_string_and_a_tensor_output(client):
    rows = sentences(40, seed=32)
    frame = pd.DataFrame({"id": range(40), "words": rows})  # Python lists, objects
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(frame, npartitions=3)
    model = BatchModel(SENTIMENT)
    (name,) = model.output_names  # fixed_size_list<float>[2]: objects
    out = fb_dask.map_partitions(ddf, model).compute()
    assert out["id"].tolist() == list(range(40))
    for i, words in enumerate(rows):
        assert np.array_equal(out[name].iloc[i], alone(SENTIMENT, words)[name]), i


def never(i: int) -> pd.DataFrame:
    raise AssertionError("a partition was computed")


def test_bad_frames_are_refused_before_any_work(client, tagger):
    meta = pd.DataFrame({"id": pd.Series([], dtype="int64"), "tokens": pd.Series([], dtype=WORDS)})
    unread = dd.from_map(never, range(3), meta=meta)  # computing any partition fails
    with pytest.raises(fusebridge.ArgumentError, match="no column 'words' for model input"):
        fb_dask.map_partitions(unread, tagger)
    taken = unread.rename(columns={"tokens": "words"}).assign(**{TAGS: unread["id"]})
    with pytest.raises(fusebridge.ArgumentError, match=r"also outputs of the model"):
        fb_dask.map_partitions(taken, tagger)
    numbers = unread.rename(columns={"id": "words"})[["words"]]
    with pytest.raises(fusebridge.ArgumentError, match="column 'words' is int64, expected a list"):
        fb_dask.map_partitions(numbers, tagger)
    with dask.config.set({"dataframe.convert-string": True}):
        strings = dd.from_pandas(pd.DataFrame({"words": [[1, 2], [3]]}), npartitions=1)
    with pytest.raises(fusebridge.ArgumentError, match=r"'words' holds strings.*convert-string"):
        fb_dask.map_partitions(strings, tagger)
    with pytest.raises(fusebridge.ArgumentTypeError, match="model must be a BatchModel"):
        fb_dask.map_partitions(strings, TAGGER)
    with pytest.raises(fusebridge.ArgumentTypeError, match="ddf must be a dask"):
        fb_dask.map_partitions(pd.DataFrame({"words": [[1]]}), tagger)


def counting_sessions(client) -> None:
    """In each worker: forget its Sessions, and count the Sessions it builds and their runs."""

    def install() -> None:
        from fusebridge.batch import model

        class Counted(model.Session):
            original = model.Session
            built = 0
            runs = 0

            def __init__(self, *args, **kwargs) -> None:
                Counted.built += 1
                super().__init__(*args, **kwargs)

            def run(self, *args, **kwargs):
                Counted.runs += 1
                return super().run(*args, **kwargs)

        model._SESSIONS.clear()
        model.Session = Counted

    client.run(install)


def counted(client) -> dict[str, tuple[int, int, int, int]]:
    """Each worker's (pid, Sessions built, runs, Sessions cached); the counting undone."""

    def read() -> tuple[int, int, int, int]:
        import os

        from fusebridge.batch import model

        counter = model.Session
        model.Session = counter.original
        found = (os.getpid(), counter.built, counter.runs, len(model._SESSIONS))
        model._SESSIONS.clear()
        return found

    return client.run(read)


def test_one_session_a_worker_process_however_many_partitions(client, tagger, expected):
    ddf = arrow_lists(ROWS, list(range(0, 200, 25)) + [199])
    assert ddf.npartitions == 8
    counting_sessions(client)
    try:
        out = fb_dask.map_partitions(ddf, tagger).compute()
    finally:
        workers = counted(client)
    check_tags(out, list(range(len(ROWS))), expected)
    assert len(workers) == 2 and len({pid for pid, *_ in workers.values()}) == 2
    for _, built, runs, cached in workers.values():
        assert (built, cached) == (1, 1), workers  # this worker ran, and built one Session
        assert runs >= 1, workers
    assert sum(runs for _, _, runs, _ in workers.values()) >= ddf.npartitions
