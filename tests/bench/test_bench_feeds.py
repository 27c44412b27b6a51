"""The benchmark's random sentences as each model takes them (fusebridge.bench.
paddle_comparison): one LoD input, or padded ids [N, T] with lengths [N] or alone; and the .npz
they travel in to a Paddle peer."""

from pathlib import Path

import numpy as np
import pytest

import fusebridge as fb
from fusebridge.bench import paddle_comparison as pc
from fusebridge.errors import UnsupportedOpError
from fusebridge.models import assets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PADDLE3_TAGGER = FIXTURES / "paddle3" / "gru_tagger_lengths" / "jit"
PADDLE3_NO_LENGTHS = FIXTURES / "paddle3" / "gru_tagger" / "jit"


def _inputs(model_dir):
    model = fb.load(model_dir)
    return pc._word_inputs(model, fb.Session(fb.optimize(model)[0]), model_dir)


def _vocab(model_dir) -> int:
    model = fb.load(model_dir)
    return next(n for n in model.graph if n.op_type == "Gather").inputs[0].const_value.shape[0]


@pytest.mark.parametrize(
    ("model_dir", "inputs", "padded"),
    [
        (assets.path("tagger"), ("words", None), False),
        (PADDLE3_TAGGER, ("ids", "lens"), True),
        (PADDLE3_NO_LENGTHS, ("ids", None), True),
    ],
)
def test_word_inputs_of_a_lod_and_of_padded_models(model_dir, inputs, padded):
    assert _inputs(model_dir) == (*inputs, _vocab(model_dir), padded)


def test_a_model_without_word_inputs_is_refused():
    with pytest.raises(UnsupportedOpError, match=r"int64 ids \[N, T\] \(and lengths \[N\]\)"):
        _inputs(FIXTURES / "onnx" / "torch_gru.onnx")  # float input, no embedding lookup


def test_padded_feeds_hold_each_sentence_then_zeros():
    lengths = [3, 1, 4]
    ids = np.arange(1, 9, dtype=np.int64)[:, None]  # the LoD form: [words, 1]
    feeds = pc._feeds("ids", "lens", ids, lengths, 4)
    padded, no_lod = feeds["ids"]
    assert no_lod is None and padded.dtype == np.int64
    np.testing.assert_array_equal(padded, [[1, 2, 3, 0], [4, 0, 0, 0], [5, 6, 7, 8]])
    np.testing.assert_array_equal(feeds["lens"][0], lengths)
    assert pc._feeds("w", None, ids, lengths, None) == {"w": (ids, lengths)}
    # No lengths input: padded to the steps asked for, the ids alone
    alone = pc._feeds("ids", None, ids, lengths, 6)
    assert alone.keys() == {"ids"}
    np.testing.assert_array_equal(alone["ids"][0][1], [4, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("lens", [None, "lens"])
def test_feeds_survive_the_npz(tmp_path, lens):
    ids = np.arange(1, 9, dtype=np.int64)[:, None]
    feeds = pc._feeds("ids", lens, ids, [3, 1, 4], None if lens is None else 4)
    pc.save_feeds(tmp_path / "feed.npz", feeds)
    back = pc.load_feeds(tmp_path / "feed.npz")
    assert back.keys() == feeds.keys()
    for name, (array, lod) in feeds.items():
        np.testing.assert_array_equal(back[name][0], array)
        assert back[name][0].dtype == array.dtype and back[name][1] == lod
