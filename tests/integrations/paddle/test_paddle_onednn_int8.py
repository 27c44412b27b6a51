"""Paddle's own int8 path for Baidu's LAC tagger (Paddle 3.3.1): post-training quantization
(fusebridge.bench.lac.paddle_int8_model, Paddle's PostTrainingQuantization) and Paddle Inference
with oneDNN int8 GRUs, the paddle_inference_onednn_int8 peer. The GRUs really run in int8
(oneDNN's log of the peer's process: u8 data, s8 weights), and the tags stay close to the float32
Executor's (the oracle).

Skipped without lac, snownlp or paddle (the `test` extra has them)."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest
from helpers.paddle_oracle import paddle_or_skip

for _package, _install in (("LAC", "lac==2.1.2"), ("snownlp", "snownlp==0.12.3")):
    if importlib.util.find_spec(_package) is None:
        pytest.skip(f"needs {_package}: pip install {_install}", allow_module_level=True)

from fusebridge.bench import lac, paddle_peer  # noqa: E402
from fusebridge.bench.paddle_comparison import (  # noqa: E402
    INT8_CACHE_ENV,
    ONEDNN_INT8,
    peer_process,
    save_feeds,
)
from fusebridge.errors import ArgumentError  # noqa: E402

# Measured on the first 2000 corpus sentences: 98.6-98.7% of the tags equal float32's (oneDNN
# quantizes a GRU's hidden state with its input's scale: the first layer's, the embedding's,
# is coarse); fusebridge's int8 keeps 99.8%.
AGREEMENT_FLOOR = 0.975


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory):
    paddle = paddle_or_skip()
    if not paddle.base.core.is_compiled_with_mkldnn():
        pytest.skip("this paddle has no oneDNN")
    return lac.paddle_int8_model(tmp_path_factory.mktemp("paddle-int8"))


def test_the_copy_is_made_once_with_fake_quantize_ops(int8_model):
    from paddle.base.proto import framework_pb2

    program = framework_pb2.ProgramDesc()
    program.ParseFromString((int8_model / "model.pdmodel").read_bytes())
    ops = [op.type for op in program.blocks[0].ops]
    # the inputs of the five mul ops: the embedding's output and the two GRU layers' concat
    assert ops.count("fake_quantize_range_abs_max") == 3
    assert ops.count("fake_channel_wise_dequantize_max_abs") == 5
    made = (int8_model / "model.pdiparams").stat().st_mtime_ns
    assert lac.paddle_int8_model(int8_model.parent) == int8_model
    assert (int8_model / "model.pdiparams").stat().st_mtime_ns == made


def test_the_peer_runs_the_grus_in_int8(int8_model, tmp_path):
    words = lac.feed(lac.corpus_sentences(16))
    feeds = {"words": (np.asarray(words.data), list(words.lengths))}
    save_feeds(tmp_path / "feed.npz", feeds)
    model_dir = lac.find_lac().model_dir
    env = {
        **os.environ,
        INT8_CACHE_ENV: str(int8_model.parent),
        "ONEDNN_VERBOSE": "1",
        "GLOG_minloglevel": "3",
        "OMP_NUM_THREADS": "2",
    }
    args = [model_dir, ONEDNN_INT8, tmp_path / "feed.npz", tmp_path / "out.npz", 1, 2]
    done = peer_process(args, tmp_path, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["ms"] > 0
    rnn = [line for line in done.stdout.splitlines() if ",exec," in line and ",rnn," in line]
    # 2 layers x 2 directions, 3 calls: the one whose outputs it saves, a warm one, a timed one
    assert len(rnn) == 12, rnn
    for line in rnn:
        assert "src_layer:u8" in line and "wei_layer:s8" in line and "wei_iter:s8" in line
    with np.load(tmp_path / "out.npz") as out:
        (got,) = out.values()
    want = lac.paddle_tags(None, lac.corpus_sentences(16))
    assert (got.reshape(-1) == np.concatenate(want)).mean() >= AGREEMENT_FLOOR - 0.02


def test_tags_agree_with_float32(int8_model):
    corpus = lac.corpus_sentences(512)
    want = lac.paddle_tags(None, corpus)
    got = lac.paddle_tags(int8_model, corpus, runtime="onednn_int8")
    same = sum(int((g == w).sum()) for g, w in zip(got, want))
    total = sum(len(w) for w in want)
    assert same / total >= AGREEMENT_FLOOR, f"{same} of {total} tags equal float32's"


def test_without_the_copy_the_peer_says_how_to_make_it(monkeypatch, tmp_path):
    model_dir = str(lac.find_lac().model_dir)
    monkeypatch.delenv(INT8_CACHE_ENV, raising=False)
    with pytest.raises(ArgumentError, match=f"set {INT8_CACHE_ENV}.*paddle_int8_model"):
        paddle_peer._onednn_int8(model_dir, 1)
    monkeypatch.setenv(INT8_CACHE_ENV, str(tmp_path))
    with pytest.raises(ArgumentError, match="has no post-training int8 copy"):
        paddle_peer._onednn_int8(model_dir, 1)
    with pytest.raises(ArgumentError, match="onednn_int8 runs paddle_int8_model's copy"):
        lac.paddle_tags(None, ["百度"], runtime="onednn_int8")
