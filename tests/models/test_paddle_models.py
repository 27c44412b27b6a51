"""The example Paddle models (fusebridge.models.paddle_models), their saved assets, and the
Paddle runtimes that run them (fusebridge.bench.paddle_runtime)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers.error_bounds import PADDLE, assert_within, softmax_sum_bound
from helpers.graph_bounds import output_bounds
from helpers.paddle_oracle import run_executor

import fusebridge as fb
from fusebridge.models import build_assets, paddle_models

GRU_LAYER = ["mul", "elementwise_add", "gru"]
TAGGER_OPS = [
    "feed",
    "lookup_table",
    *(GRU_LAYER + GRU_LAYER + ["concat"]) * 2,
    "mul",
    "elementwise_add",
    "crf_decoding",
    "fetch",
]
SENTIMENT_OPS = [
    "feed",
    "lookup_table_v2",
    *GRU_LAYER,
    "sequence_pool",
    "dropout",
    "mul",
    "elementwise_add",
    "softmax",
    "fetch",
]
GRU_WORK_OUTPUTS = {"BatchGate", "BatchResetHiddenPrev", "BatchHidden"}


@pytest.fixture(scope="module")
def runtime():
    # Legacy programs: the flag must be set before the first import of paddle.
    if "paddle" not in sys.modules:
        os.environ["FLAGS_enable_pir_api"] = "0"
    pytest.importorskip("paddle")
    from fusebridge.bench import paddle_runtime

    return paddle_runtime


@pytest.fixture(scope="module")
def rebuilt(runtime, tmp_path_factory):
    """The assets as build_assets writes them now, in a temporary directory."""
    root = tmp_path_factory.mktemp("assets")
    return root, build_assets.build_assets(root)


def _feeds(model_dir):
    """The example input build_assets wrote: words int64 [words, 1] and sentence lengths."""
    lengths = [int(n) for n in (model_dir / "example_lengths.txt").read_text().split()]
    return {"words": (np.load(model_dir / "example_words.npy"), lengths)}


def test_example_feed():
    words, lengths = paddle_models.example_feed(50, [3, 1, 4], seed=5)
    assert words.dtype == np.int64 and words.shape == (8, 1) and lengths == [3, 1, 4]
    assert words.min() >= 0 and words.max() < 50
    np.testing.assert_array_equal(words, paddle_models.example_feed(50, [3, 1, 4], seed=5)[0])


@pytest.mark.paddle
@pytest.mark.parametrize(
    ("name", "ops", "reverse"),
    [("tagger", TAGGER_OPS, [False, True] * 2), ("sentiment", SENTIMENT_OPS, [False])],
)
def test_saved_program_ops(runtime, name, ops, reverse):
    runner = runtime.ExecutorRunner(build_assets.ASSETS_DIR / name)
    block_ops = runner.program.global_block().ops
    assert [op.type for op in block_ops] == ops
    assert runner.feed_names == ["words"]
    grus = [op for op in block_ops if op.type == "gru"]
    assert [op.attr("is_reverse") for op in grus] == reverse
    for op in grus:
        assert op.attr("origin_mode") is False
        assert (op.attr("gate_activation"), op.attr("activation")) == ("sigmoid", "tanh")
        assert len(op.input("Bias")) == 1
        # clip_extra=False: the work outputs Paddle's runtimes need are kept.
        assert GRU_WORK_OUTPUTS <= set(op.output_names)


@pytest.mark.paddle
def test_sentiment_keeps_inference_dropout(runtime):
    runner = runtime.ExecutorRunner(build_assets.ASSETS_DIR / "sentiment")
    (dropout,) = [op for op in runner.program.global_block().ops if op.type == "dropout"]
    assert dropout.attr("dropout_implementation") == "downgrade_in_infer"
    assert dropout.attr("is_test") is True
    (lookup,) = [op for op in runner.program.global_block().ops if op.type == "lookup_table_v2"]
    assert lookup.attr("padding_idx") == 0


@pytest.mark.paddle
def test_assets_reproducible(rebuilt):
    root, written = rebuilt
    assets = build_assets.ASSETS_DIR
    on_disk = sorted(p.relative_to(assets) for p in assets.rglob("*") if p.is_file())
    assert sorted(p.relative_to(root) for p in written) == on_disk
    for path in written:
        rel = path.relative_to(root)
        assert path.read_bytes() == (build_assets.ASSETS_DIR / rel).read_bytes(), rel


@pytest.mark.paddle
def test_run_executor_tagger(runtime):
    model_dir = build_assets.ASSETS_DIR / "tagger"
    feeds = _feeds(model_dir)
    (tags,) = run_executor(model_dir, feeds).values()
    assert tags.dtype == np.int64 and tags.shape == (sum(feeds["words"][1]), 1)
    assert tags.min() >= 0 and tags.max() < 24
    # Random weights still give varied tags, not one constant.
    assert len(np.unique(tags)) > 5


@pytest.mark.paddle
def test_run_executor_sentiment(runtime):
    model_dir = build_assets.ASSETS_DIR / "sentiment"
    feeds = _feeds(model_dir)
    (probs,) = run_executor(model_dir, feeds).values()
    assert probs.dtype == np.float32 and probs.shape == (len(feeds["words"][1]), 2)
    assert_within(probs.sum(axis=1), 1.0, softmax_sum_bound(2, PADDLE))
    assert np.ptp(probs[:, 0]) > 0.1


@pytest.mark.paddle
def test_separate_parameter_files(runtime, tmp_path):
    model = paddle_models.build_sentiment(pool_type="max")
    paddle_models.save_model(model, tmp_path / "sep", combined=False)
    paddle_models.save_model(model, tmp_path / "comb", combined=True)
    assert sorted(os.listdir(tmp_path / "sep")) == sorted(["__model__", *model.weights])
    feeds = {"words": paddle_models.example_feed(1000, [4, 9, 2], seed=1)}
    sep = run_executor(tmp_path / "sep", feeds)
    comb = run_executor(tmp_path / "comb", feeds)
    assert sep.keys() == comb.keys()
    for key in sep:
        np.testing.assert_array_equal(sep[key], comb[key])


@pytest.mark.paddle
def test_clip_extra_strips_gru_work_outputs(runtime, tmp_path):
    model = paddle_models.build_sentiment()
    paddle_models.save_model(model, tmp_path, clip_extra=True)
    # Loaded, never run: running it segfaults in GruInferMeta, on the Executor too.
    program = runtime.ExecutorRunner(tmp_path).program
    (gru,) = [op for op in program.global_block().ops if op.type == "gru"]
    assert set(gru.output_names) == {"Hidden"}


@pytest.mark.paddle
@pytest.mark.parametrize("pool_type", paddle_models.POOL_TYPES)
def test_sentiment_pool_types(runtime, tmp_path, pool_type):
    model = paddle_models.build_sentiment(hidden=16, emb_size=8, vocab_size=30, pool_type=pool_type)
    paddle_models.save_model(model, tmp_path)
    (probs,) = run_executor(
        tmp_path, {"words": paddle_models.example_feed(30, [5, 1, 7], seed=2)}
    ).values()
    assert probs.shape == (3, 2)
    assert_within(probs.sum(axis=1), 1.0, softmax_sum_bound(2, PADDLE))


@pytest.mark.paddle
def test_tagger_softmax_head(runtime, tmp_path):
    model = paddle_models.build_tagger(
        vocab_size=30, emb_size=8, hidden=8, num_layers=1, num_tags=5, head="softmax"
    )
    paddle_models.save_model(model, tmp_path)
    ops = [op.type for op in runtime.ExecutorRunner(tmp_path).program.global_block().ops]
    assert ops == ["feed", "lookup_table", *GRU_LAYER, *GRU_LAYER, "concat"] + [
        "mul",
        "elementwise_add",
        "softmax",
        "fetch",
    ]
    (probs,) = run_executor(
        tmp_path, {"words": paddle_models.example_feed(30, [5, 1, 7], seed=2)}
    ).values()
    assert probs.shape == (13, 5)
    assert_within(probs.sum(axis=1), 1.0, softmax_sum_bound(5, PADDLE))


@pytest.mark.paddle
def test_builders_restore_mode(runtime):
    import paddle

    before = paddle.in_dynamic_mode()
    paddle_models.build_sentiment(hidden=4, emb_size=4, vocab_size=10)
    run_executor(
        build_assets.ASSETS_DIR / "sentiment", _feeds(build_assets.ASSETS_DIR / "sentiment")
    )
    assert paddle.in_dynamic_mode() == before


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["tagger", "sentiment"])
@pytest.mark.parametrize("ir_optim", [False, True])
def test_inference_matches_executor(runtime, name, ir_optim):
    # ir_optim: fc_gru_fuse_pass makes fusion_gru of every mul + elementwise_add + gru.
    model_dir = build_assets.ASSETS_DIR / name
    feeds = _feeds(model_dir)
    expected = run_executor(model_dir, feeds)
    got = runtime.InferenceRunner(model_dir, ir_optim=ir_optim, onednn=False).run(feeds)
    assert got.keys() == expected.keys()
    # Two Paddle implementations (fusion_gru with ir_optim): both within Paddle's error bounds.
    lod = {n: fb.LoDTensor(a, lens) for n, (a, lens) in feeds.items()}
    bounds = None
    for key in got:
        if got[key].dtype.kind in "iu":
            np.testing.assert_array_equal(got[key], expected[key])
        else:
            bounds = bounds or output_bounds(fb.load(model_dir), lod, (PADDLE, PADDLE))
            assert_within(got[key], expected[key], bounds[key], key)
