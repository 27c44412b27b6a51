"""fusebridge.dask.map_partitions on a Dask LocalCluster of two worker processes, started and
stopped here: every row's outputs equal the row alone (helpers.batch_rows), one Session a
worker however many partitions it runs."""

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


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("dask") / "in.parquet"
    pq.write_table(words_table(ROWS), path, row_group_size=23)  # 9 partitions, the last short
    return dd.read_parquet(path, split_row_groups=True)


def sessions(client) -> dict[str, int]:
    def count() -> int:
        from fusebridge.batch import model

        return len(model._SESSIONS)

    return client.run(count)


def test_every_row_is_the_row_alone_one_session_a_worker(client, corpus):
    assert corpus.npartitions == 9
    out = fb_dask.map_partitions(corpus, BatchModel(TAGGER)).compute()
    assert list(out.columns) == ["id", "note", "words", TAGS]
    assert out["id"].tolist() == list(range(len(ROWS)))
    assert out["note"].tolist() == [f"row {i}" for i in range(len(ROWS))]
    for i, words in enumerate(ROWS):
        assert out[TAGS].iloc[i].tolist() == alone(TAGGER, words)[TAGS].tolist(), i
    assert sorted(sessions(client).values()) == [1, 1]  # both workers ran, each one Session


def test_empty_partitions_keep_the_meta(client, corpus):
    model = BatchModel(TAGGER)
    few = fb_dask.map_partitions(corpus[corpus.id < 30], model)  # partitions 2.. are empty
    assert few.dtypes[TAGS] == np.dtype(object)
    out = few.compute()
    assert out["id"].tolist() == list(range(30))
    for i in range(30):
        assert out[TAGS].iloc[i].tolist() == alone(TAGGER, ROWS[i])[TAGS].tolist()
    none = fb_dask.map_partitions(corpus[corpus.id < 0], model).compute()
    assert len(none) == 0 and none.dtypes[TAGS] == np.dtype(object)


def test_a_tensor_output_from_a_pandas_frame(client):
    rows = sentences(40, seed=32)
    frame = pd.DataFrame({"id": range(40), "words": [np.array(r) for r in rows]})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(frame, npartitions=3)
    model = BatchModel(SENTIMENT)
    (name,) = model.output_names
    out = fb_dask.map_partitions(ddf, model).compute()
    for i, words in enumerate(rows):
        assert np.array_equal(np.stack(out[name].iloc[i]), alone(SENTIMENT, words)[name])


def test_bad_frames_are_refused_before_any_work(client, corpus):
    model = BatchModel(TAGGER)
    with pytest.raises(fusebridge.ArgumentError, match="no column 'words' for model input"):
        fb_dask.map_partitions(corpus.rename(columns={"words": "tokens"}), model)
    with dask.config.set({"dataframe.convert-string": True}):
        strings = dd.from_pandas(pd.DataFrame({"words": [[1, 2], [3]]}), npartitions=1)
    with pytest.raises(fusebridge.ArgumentError, match="convert-string"):
        fb_dask.map_partitions(strings, model)
    with pytest.raises(fusebridge.ArgumentError, match="must be a BatchModel"):
        fb_dask.map_partitions(corpus, TAGGER)
