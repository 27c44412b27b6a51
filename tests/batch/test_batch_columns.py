"""BatchModel in one process: columns in, columns out, every row as the row alone gives it,
whatever the blocks (the oracle: helpers.batch_rows, a Session on one row alone)."""

import itertools
import pickle

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from helpers.batch_rows import (  # noqa: E402
    BIGRU,
    SENTIMENT,
    SPEECH,
    TAGGER,
    alone,
    bigru_alone,
    frames,
    frames_column,
    sentences,
    speech_alone,
    words_table,
)
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fusebridge  # noqa: E402
from fusebridge.batch import BatchModel, arrow_columns  # noqa: E402
from fusebridge.batch.columns import MIN_STEPS, empty_inputs, run_block  # noqa: E402
from fusebridge.fuse_passes import explicit_rng  # noqa: E402

TAGS = "crf_decoding_0.tmp_0"
ROWS = sentences(60, seed=1)


@pytest.fixture(scope="module")
def tagger():
    return BatchModel(TAGGER)


@pytest.fixture(scope="module")
def tagged(tagger):
    return tagger(words_table(ROWS))


def test_every_row_is_the_row_alone(tagged):
    assert tagged.column_names == ["id", "note", "words", TAGS]
    for i, words in enumerate(ROWS):
        assert tagged.column(TAGS)[i].as_py() == alone(TAGGER, words)[TAGS].tolist()


@given(st.lists(st.integers(0, len(ROWS)), max_size=6), st.randoms(use_true_random=False))
def test_blocks_and_order_change_no_row(tagger, tagged, cuts, random):
    """Any cut of the rows into blocks, in any order of rows, gives each row the same tags."""
    order = list(range(len(ROWS)))
    random.shuffle(order)
    table = words_table(ROWS).take(pa.array(order))
    bounds = [0, *sorted(cuts), len(ROWS)]
    blocks = [tagger(table.slice(a, b - a)) for a, b in itertools.pairwise(bounds)]
    got = pa.concat_tables(blocks)
    assert got.column("id").to_pylist() == order
    expected = tagged.column(TAGS).take(pa.array(order))
    assert got.column(TAGS).combine_chunks().equals(expected.combine_chunks())


def test_other_columns_pass_through_unchanged(tagged):
    table = words_table(ROWS)
    for name in table.column_names:
        assert tagged.column(name).equals(table.column(name))


def test_a_tensor_output_is_a_row_each():
    model = BatchModel(SENTIMENT)
    rows = sentences(20, seed=2)
    out = model(words_table(rows))
    (name,) = model.output_names
    assert out.schema.field(name).type == pa.list_(pa.float32(), 2)
    for i, words in enumerate(rows):
        assert np.array_equal(
            np.array(out.column(name)[i].as_py(), np.float32), alone(SENTIMENT, words)[name]
        )


def test_padded_input_with_lengths_is_cut_to_each_row():
    model = BatchModel(SPEECH)
    rows = frames(30, seed=3, width=16)
    rows[0] = rows[0][:1]  # a one-step row, padded to MIN_STEPS in its block and alone
    out = model(pa.table({"x": frames_column(rows)}))
    assert out.schema.field("mask").type == pa.list_(pa.list_(pa.float32(), 16))
    for i, r in enumerate(rows):
        got = np.array(out.column("mask")[i].as_py(), np.float32)
        assert np.array_equal(got, speech_alone(r)), i
    assert MIN_STEPS == 2


def test_padded_input_without_lengths_runs_rows_of_equal_length_together():
    model = BatchModel(BIGRU)
    rows = frames(30, seed=4, width=12, longest=5)
    out = model(pa.table({"x": frames_column(rows)}))
    assert out.schema.field("hn").type == pa.list_(pa.list_(pa.float32(), 16), 4)
    for i, r in enumerate(rows):
        want = bigru_alone(r)
        for name in ("y", "hn"):
            assert np.array_equal(np.array(out.column(name)[i].as_py(), np.float32), want[name])


@pytest.mark.parametrize("path", [TAGGER, SENTIMENT, SPEECH, BIGRU], ids=lambda p: p.stem)
def test_an_empty_block_gives_typed_empty_columns(path):
    model = BatchModel(path)
    whole = empty_inputs(model.columns)
    assert [a.type for a in run_block(whole, model.columns, model.session.run).values()] == list(
        model.output_types().values()
    )
    out = model(whole)
    assert out.num_rows == 0
    assert [out.schema.field(n).type for n in model.output_names] == list(
        model.output_types().values()
    )


def test_the_handle_pickles_and_builds_one_session_a_process(tagger, tagged):
    copy = pickle.loads(pickle.dumps(tagger))
    again = pickle.loads(pickle.dumps(tagger))
    assert copy.session is again.session is tagger.session
    assert copy(words_table(ROWS)).equals(tagged)
    assert len(pickle.dumps(tagger)) < 2 * len(tagger._data) + 10_000


def test_a_pandas_frame_gets_columns_too(tagger, tagged):
    frame = words_table(ROWS).to_pandas()
    out = tagger(frame)
    assert list(out.columns) == ["id", "note", "words", TAGS]
    assert [v.tolist() for v in out[TAGS]] == tagged.column(TAGS).to_pylist()


def test_lists_read_from_slices_chunks_and_large_lists():
    for kind in (pa.list_(pa.int64()), pa.large_list(pa.int64())):
        array = pa.array(ROWS, kind)
        chunked = pa.chunked_array([array.slice(0, 7), array.slice(7, 20)])
        values, lengths = arrow_columns.read_lists(chunked, (1,), "c")
        assert lengths.tolist() == [len(r) for r in ROWS[:27]]
        assert values.reshape(-1).tolist() == [w for r in ROWS[:27] for w in r]
        values, lengths = arrow_columns.read_lists(array.slice(5, 3), (1,), "c")
        assert values.reshape(-1).tolist() == [w for r in ROWS[5:8] for w in r]


def test_equal_lists_read_as_fixed_size_elements():
    """Parquet gives a fixed_size_list column back as lists: equal lengths are accepted."""
    rows = frames(5, seed=5, width=16)
    plain = pa.array([r.tolist() for r in rows], pa.list_(pa.list_(pa.float32())))
    out = BatchModel(SPEECH)(pa.table({"x": plain}))
    for i, r in enumerate(rows):
        assert np.array_equal(np.array(out.column("mask")[i].as_py(), np.float32), speech_alone(r))


def test_a_renamed_column(tagged):
    model = BatchModel(TAGGER, columns={"words": "tokens"})
    out = model(words_table(ROWS).rename_columns(["id", "note", "tokens"]))
    assert out.column(TAGS).equals(tagged.column(TAGS))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pa.table({"tokens": pa.array([[1]])}), "no column 'words' for model input 'words'"),
        (pa.table({"words": pa.array([1, 2])}), "expected a list column"),
        (pa.table({"words": pa.array([[1], None])}), "row 1 is null"),
        (pa.table({"words": pa.array([[1], [None]])}), "1 null value"),
        (pa.table({"words": pa.array([["a"]])}), "expected numbers"),
        (pa.table({"words": pa.array([[1.5]])}), "expected int64"),
        (
            pa.table({"words": pa.array([[1]]), TAGS: pa.array([0])}),
            "are also outputs of the model",
        ),
    ],
    ids=["missing", "not-a-list", "null-row", "null-word", "strings", "floats", "clash"],
)
def test_bad_columns_are_typed_errors(tagger, table, message):
    with pytest.raises(fusebridge.Error, match=message):
        tagger(table)


def test_bad_elements_are_typed_errors():
    model = BatchModel(SPEECH)
    narrow = pa.array([[[0.0] * 15]], pa.list_(pa.list_(pa.float32())))
    with pytest.raises(fusebridge.ArgumentError, match="holds 15 values, expected 16"):
        model(pa.table({"x": narrow}))
    flat = pa.array([[0.0]], pa.list_(pa.float32()))
    with pytest.raises(fusebridge.ArgumentTypeError, match="expected 1 for elements of shape"):
        model(pa.table({"x": flat}))


def test_bad_handles_are_typed_errors():
    with pytest.raises(fusebridge.ArgumentError, match="renames \\['word'\\]"):
        BatchModel(TAGGER, columns={"word": "tokens"})
    with pytest.raises(fusebridge.ArgumentError, match="threads must be a positive int"):
        BatchModel(TAGGER, threads=0)
    with pytest.raises(
        fusebridge.ArgumentTypeError, match=r"a pyarrow.Table or a pandas.DataFrame"
    ):
        BatchModel(TAGGER)({"words": [[1]]})


def test_a_model_that_draws_random_numbers_is_refused():
    from helpers.session_models import training_step_model

    model = training_step_model()
    explicit_rng(model)
    with pytest.raises(fusebridge.UnsupportedOpError, match="draws random numbers"):
        BatchModel(model, pipeline=None)


def test_padding_past_the_bound_is_refused(monkeypatch):
    from fusebridge.batch import columns

    rows = frames(4, seed=6, width=16, longest=9)
    monkeypatch.setattr(columns, "PADDED_BYTES_MAX", 4 * 8 * 16 * 4 - 1)
    long_row = [*rows[:3], np.zeros((8, 16), np.float32)]
    with pytest.raises(fusebridge.ArgumentError, match="4 rows padded to the longest row's 8"):
        BatchModel(SPEECH)(pa.table({"x": frames_column(long_row)}))
