"""The whole journey on both example models, against Paddle's own Executor (the oracle): load
without paddle, optimize, run; batches of 1-64 sentences of unequal length; every saved form
(combined or one file per parameter, clip_extra True or False)."""

from __future__ import annotations

import functools
import subprocess
import sys

import numpy as np
import pytest
from helpers.error_bounds import PADDLE, assert_within
from helpers.graph_bounds import SESSION, output_bounds

import fusebridge as fb
from fusebridge.models import assets

pytestmark = pytest.mark.paddle


@functools.cache
def _saved(tmp_root, name: str, combined: bool, clip_extra: bool):
    pytest.importorskip("paddle")
    from fusebridge.models import paddle_models

    build = paddle_models.build_tagger if name == "tagger" else paddle_models.build_sentiment
    path = tmp_root / f"{name}-{combined}-{clip_extra}"
    paddle_models.save_model(build(seed=3), path, combined=combined, clip_extra=clip_extra)
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("paddle_models")
    return functools.partial(_saved, root)


def _batch(n: int, seed: int):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 41, n).tolist()
    return rng.integers(0, 1000, (sum(lengths), 1)).astype(np.int64), lengths


def _assert_matches_paddle(model, feeds: dict, ours: dict, theirs: dict, bounds=None):
    """Tags equal; probabilities within ours and Paddle's error bounds of the model on the
    feeds (tests/helpers/graph_bounds.py), computed into `bounds` (a dict to keep them in) if
    empty."""
    assert set(ours) == set(theirs)
    bounds = {} if bounds is None else bounds
    for name, value in ours.items():
        data = value.data if isinstance(value, fb.LoDTensor) else value
        if data.dtype.kind in "iu":
            np.testing.assert_array_equal(data, theirs[name])
        else:
            if not bounds:  # kept in the caller's dict for its next call on the same feeds
                bounds.update(output_bounds(model, feeds, (SESSION, PADDLE)))
            assert_within(data, theirs[name], bounds[name], name)


@pytest.mark.parametrize("name", ["tagger", "sentiment"])
def test_models_match_paddle_executor(saved, name):
    from fusebridge.bench.paddle_runtime import ExecutorRunner

    path = saved(name, True, False)
    paddle_runner = ExecutorRunner(path)
    model = fb.load(path)
    optimized, report = fb.optimize(model)
    assert report.fired("fc_gru") == (4 if name == "tagger" else 1)
    assert report.fired("bigru") == (2 if name == "tagger" else 0)
    sessions = [fb.Session(optimized), fb.Session(model)]
    for n in (1, 5, 16, 64):
        ids, lengths = _batch(n, seed=n)
        theirs = paddle_runner.run({"words": (ids, lengths)})
        feeds = {"words": fb.LoDTensor(ids, lengths=lengths)}
        bounds = {}  # the model's on these feeds, for both sessions
        for session in sessions:
            ours = session.run(feeds)
            _assert_matches_paddle(model, feeds, ours, theirs, bounds)
            if name == "tagger":
                assert ours["crf_decoding_0.tmp_0"].lengths.tolist() == lengths


@pytest.mark.parametrize("name", ["tagger", "sentiment"])
@pytest.mark.parametrize("combined", [True, False])
@pytest.mark.parametrize("clip_extra", [True, False])
def test_every_saved_form_loads_to_the_same_model(saved, name, combined, clip_extra):
    """Paddle itself segfaults on clip_extra=True gru models: their reference is the
    clip_extra=False run of the same weights."""
    from helpers.paddle_oracle import run_executor

    ids, lengths = _batch(7, seed=11)
    theirs = run_executor(saved(name, True, False), {"words": (ids, lengths)})
    model = fb.load(saved(name, combined, clip_extra))
    feeds = {"words": fb.LoDTensor(ids, lengths=lengths)}
    ours = fb.Session(fb.optimize(model)[0]).run(feeds)
    _assert_matches_paddle(model, feeds, ours, theirs)


def test_bundled_demo_runs_without_paddle(tmp_path):
    """The demo's whole path (load, optimize, run) in a process where importing paddle fails."""
    code = (
        "import sys; sys.modules['paddle'] = None\n"
        "from fusebridge.cli.command import main\n"
        "sys.exit(main(['demo']))\n"
    )
    # Run from elsewhere: the installed fusebridge (with its compiled core), not the source tree.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "optimized tags == unfused tags: True" in out.stdout
    assert "fc_gru                 fired 4" in out.stdout


def test_bundled_tagger_matches_paddle():
    from helpers.paddle_oracle import run_executor

    path = assets.path("tagger")
    ids = np.load(path / "example_words.npy")
    lengths = [int(n) for n in (path / "example_lengths.txt").read_text().split()]
    theirs = run_executor(path, {"words": (ids, lengths)})
    model = fb.load(path)
    feeds = {"words": fb.LoDTensor(ids, lengths=lengths)}
    ours = fb.Session(fb.optimize(model)[0]).run(feeds)
    _assert_matches_paddle(model, feeds, ours, theirs)


@pytest.mark.parametrize("name", ["tagger", "sentiment"])
@pytest.mark.parametrize("combined", [True, False])
@pytest.mark.parametrize("clip_extra", [True, False])
def test_parameters_equal_paddles_own_loading(saved, name, combined, clip_extra):
    from fusebridge.bench.paddle_runtime import ExecutorRunner
    from fusebridge.integrations.paddle.params import read_paddle_model

    _, ours = read_paddle_model(saved(name, combined, clip_extra))
    runner = ExecutorRunner(saved(name, combined, clip_extra))  # loading runs no gru op
    theirs = {n: np.array(runner.scope.find_var(n).get_tensor()) for n in ours}
    persistable = [v.name for v in runner.program.list_vars() if v.persistable]
    assert sorted(ours) == sorted(set(persistable) - {"feed", "fetch"})
    for n, array in ours.items():
        assert array.dtype == theirs[n].dtype and array.shape == theirs[n].shape, n
        np.testing.assert_array_equal(array, theirs[n])
