"""MXNet itself as the oracle: the committed fixtures load and are faithful to the gluon blocks
they were exported from, and the framework behaviours fusebridge must reproduce (or refuse to
reproduce) are checked live: the CPU GRU ignoring use_sequence_length, Dropout's shared axes."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.error_bounds import MXNET, U, assert_within
from helpers.graph_bounds import output_bounds

import fusebridge as fb

mx = pytest.importorskip("mxnet")

from helpers.mxnet_oracle import (  # noqa: E402
    input_names,
    run_mxnet,
    run_mxnet_per_sentence,
)

from fusebridge.models import mxnet_models  # noqa: E402

pytestmark = pytest.mark.mxnet

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mxnet"
NAMES = list(mxnet_models.BUILDERS)


def feeds_for(name: str) -> dict[str, np.ndarray]:
    prefix = FIXTURES / name
    return dict(zip(input_names(prefix), mxnet_models.sample_inputs(name)))


@pytest.mark.parametrize("name", NAMES)
def test_fixture_is_committed_and_runs(name):
    prefix = FIXTURES / name
    for path in (Path(f"{prefix}-symbol.json"), Path(f"{prefix}-0000.params")):
        assert path.is_file(), f"{path} missing: python -m fusebridge.models.mxnet_models"
        assert path.stat().st_size < 300_000
    (out,) = run_mxnet(prefix, feeds_for(name))
    assert out.dtype == np.float32
    assert np.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_fixture_equals_gluon_block(name):
    # The block runs imperatively (not hybridized): the export, reloaded, must give the same
    # numbers and hold the same weights, or the fixture drifted from its builder.
    block = mxnet_models.BUILDERS[name]()
    inputs = mxnet_models.sample_inputs(name)
    expected = block(*[mx.nd.array(a) for a in inputs]).asnumpy()
    (got,) = run_mxnet(FIXTURES / name, feeds_for(name))
    # MXNet imperative and MXNet's executor: two MXNet computations of the model
    model = fb.load(FIXTURES / f"{name}-symbol.json")
    (bound,) = output_bounds(model, feeds_for(name), (MXNET, MXNET)).values()
    assert_within(got, expected, bound, name)

    stored = {
        k.split(":", 1)[1]: v.asnumpy()
        for k, v in mx.nd.load(f"{FIXTURES / name}-0000.params").items()
    }
    params = block.collect_params()
    assert set(stored) == set(params.keys())
    for key, value in stored.items():
        np.testing.assert_array_equal(value, params[key].data().asnumpy(), err_msg=key)


def test_tagger_export_structure():
    # What an importer meets: gluon's NTC GRU is SwapAxis -> RNN(TNC) -> SwapAxis, the packed
    # parameters one _rnn_param_concat of 16 Reshape(-1)'d variables, h0 a _zeros of batch 0.
    with open(f"{FIXTURES / 'gru_tagger'}-symbol.json") as f:
        nodes = json.load(f)["nodes"]
    (rnn,) = [n for n in nodes if n["op"] == "RNN"]
    assert rnn["attrs"]["mode"] == "gru"
    assert rnn["attrs"]["use_sequence_length"] == "True"
    assert rnn["attrs"]["bidirectional"] == "True"
    data, params, state, lengths = (nodes[i[0]] for i in rnn["inputs"])
    assert data["op"] == "SwapAxis"
    assert params["op"] == "_rnn_param_concat" and params["attrs"]["num_args"] == "16"
    concat_inputs = [nodes[nodes[i[0]]["inputs"][0][0]]["name"] for i in params["inputs"]]
    # All weights, then all biases; per layer, per direction (l, r), i2h then h2h.
    assert concat_inputs[:4] == [
        "gru_tagger_gru0_l0_i2h_weight",
        "gru_tagger_gru0_l0_h2h_weight",
        "gru_tagger_gru0_r0_i2h_weight",
        "gru_tagger_gru0_r0_h2h_weight",
    ]
    assert concat_inputs[8] == "gru_tagger_gru0_l0_i2h_bias"
    assert state["op"] == "_zeros" and state["attrs"]["shape"] == "(4, 0, 16)"
    assert lengths["op"] == "null" and lengths["name"] == "data1"


def padded_batch() -> tuple[np.ndarray, np.ndarray]:
    # Nonzero padding ids on purpose: padded steps then change the states a GRU carries.
    rng = np.random.default_rng(7)
    ids = rng.integers(1, mxnet_models.VOCAB, size=(3, 9)).astype(np.float32)
    return ids, np.array([9, 4, 6], np.float32)


def test_cpu_gru_ignores_sequence_length():
    # The documented silent bug: on CPU (oneDNN) the RNN op's use_sequence_length changes
    # nothing. A short sentence in a padded batch gets the padding computed, and its reverse
    # direction starts at the last padded step, so its tags differ from the sentence alone.
    ids, lengths = padded_batch()
    (batched,) = run_mxnet(FIXTURES / "gru_tagger", {"data0": ids, "data1": lengths})
    alone = run_mxnet_per_sentence(FIXTURES / "gru_tagger", ids, lengths)

    model = fb.load(FIXTURES / "gru_tagger-symbol.json")
    feeds = {"data0": ids[:1], "data1": lengths[:1]}
    (bound,) = output_bounds(model, feeds, (MXNET, MXNET)).values()
    assert_within(batched[0], alone[0], bound[0], "full length")
    for i in (1, 2):
        n = int(lengths[i])
        assert alone[i].shape == (n, mxnet_models.TAGS)
        assert np.abs(batched[i, :n] - alone[i]).max() > 1e-3

    # Ignored entirely: the same weights without sequence lengths give the same numbers.
    (fixed,) = run_mxnet(FIXTURES / "gru_tagger_fixed", {"data": ids})
    np.testing.assert_array_equal(batched, fixed)


def test_per_sentence_matches_fixed_model_on_the_cut_sentence():
    # Running the sentence alone is right: it is what the fixed-length model says when given
    # only the sentence's own words.
    ids, lengths = padded_batch()
    alone = run_mxnet_per_sentence(FIXTURES / "gru_tagger", ids, lengths)
    model = fb.load(FIXTURES / "gru_tagger_fixed-symbol.json")
    for i, n in enumerate(lengths.astype(int)):
        (fixed,) = run_mxnet(FIXTURES / "gru_tagger_fixed", {"data": ids[i : i + 1, :n]})
        (bound,) = output_bounds(model, {"data": ids[i : i + 1, :n]}, (MXNET, MXNET)).values()
        assert_within(alone[i], fixed[0], bound[0], f"sentence {i}")


def check_shared_mask(x: np.ndarray, y: np.ndarray, p: float) -> None:
    dropped = y == 0
    assert dropped.any() and not dropped.all()
    # axes=(1,): the mask has size 1 on axis 1, so each (n, c) is kept or dropped at every t.
    assert (dropped == dropped[:, :1, :]).all()
    scale = np.float32(1) / np.float32(1 - p)
    # one rounding of the product on each side, and MXNet's scale may be 1 / (1 - p) in float64
    assert_within(y[~dropped], x[~dropped] * scale, 3 * U * np.abs(x[~dropped] * scale))


def test_dropout_axes_always_shares_mask_and_scales():
    mx.random.seed(3)
    p = 0.4
    x = np.random.default_rng(0).uniform(1, 2, size=(6, 11, 32)).astype(np.float32)
    y = mx.nd.Dropout(mx.nd.array(x), p=p, axes=(1,), mode="always").asnumpy()
    check_shared_mask(x, y, p)


def test_gluon_dropout_axes_in_training_shares_mask():
    # The layer the tagger uses, in train mode (mode='training' drops only there).
    mx.random.seed(4)
    p = 0.2
    x = np.random.default_rng(1).uniform(1, 2, size=(6, 11, 32)).astype(np.float32)
    layer = mx.gluon.nn.Dropout(p, axes=(1,))
    np.testing.assert_array_equal(layer(mx.nd.array(x)).asnumpy(), x)  # inference: identity
    with mx.autograd.train_mode():
        y = layer(mx.nd.array(x)).asnumpy()
    check_shared_mask(x, y, p)
