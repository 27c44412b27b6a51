"""fb.save_paddle: the optimized Paddle 3 models (tests/fixtures/paddle3) written back as
Paddle 3 inference models whose fused GRUs are our custom operator, run by Paddle Inference
(after register()) with the outputs of the original files in Paddle Inference; what cannot be
written is refused by name before anything is written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import paddle3_fixtures as fixtures
from helpers.paddle_oracle import assert_close_to_paddle, paddle_or_skip, run_inference

import fusebridge as fb
from fusebridge.errors import UnsupportedOpError
from fusebridge.models import assets

pytestmark = pytest.mark.paddle
ROOT = fixtures.DEFAULT_OUT_DIR


@pytest.fixture(scope="module", autouse=True)
def _ops(tmp_path_factory):
    paddle_or_skip()
    from fusebridge.integrations.paddle import op_library

    op_library.register(tmp_path_factory.mktemp("paddle_ops"))


def _ops_of(path) -> list[str]:
    doc = json.loads(path.read_text())
    return [op["#"] for op in doc["program"]["regions"][0]["blocks"][0]["ops"]]


@pytest.mark.parametrize(
    ("name", "grus"),
    [("gru_tagger_lengths", 2), ("gru_tagger", 2), ("linear_gru", 1), ("encoder", 0)],
)
def test_saved_back_models_equal_the_originals_in_paddle_inference(tmp_path, name, grus):
    source = ROOT / name / "jit"
    optimized, _ = fb.optimize(fb.load(source))
    saved = fb.save_paddle(optimized, tmp_path / "model")
    assert saved == tmp_path / "model.json" and saved.with_suffix(".pdiparams").is_file()
    ops = _ops_of(saved)
    assert sum(op.endswith(".fusebridge_fusion_gru") for op in ops) == grus
    assert not any(op.endswith((".rnn", ".dropout")) for op in ops)
    for batch in (1, 3):
        feeds = fixtures.feeds(name, batch=batch)
        want = run_inference(source, feeds)
        got = run_inference(tmp_path, feeds)
        where = f"{name} saved back, batch {batch}"
        assert_close_to_paddle(optimized, feeds, got, want, where)
        for g, w in zip(got, want):  # the tags: the best class of each word
            np.testing.assert_array_equal(g.argmax(-1), w.argmax(-1))


def test_what_cannot_be_written_is_listed_before_anything_is_written(tmp_path):
    optimized, _ = fb.optimize(fb.load(assets.path("tagger")))  # LoD GRUs and crf_decoding
    with pytest.raises(UnsupportedOpError) as info:
        fb.save_paddle(optimized, tmp_path / "model")
    message = str(info.value)
    assert "FusionGRU" in message and "a LoD GRU" in message
    assert "CRFDecoding" in message and "no Paddle mapping" in message
    assert list(tmp_path.iterdir()) == []


def test_a_saved_back_model_is_not_read_back_yet(tmp_path):
    """fb.load of a saved-back model: its custom op and the Paddle ops the writer used are
    listed as unsupported at once (a clean refusal, not a format error)."""
    optimized, _ = fb.optimize(fb.load(ROOT / "gru_tagger" / "jit"))
    fb.save_paddle(optimized, tmp_path / "model")
    with pytest.raises(
        UnsupportedOpError, match=r"unsupported op type\(s\): .*fusebridge_fusion_gru"
    ):
        fb.load(tmp_path)


def test_the_benchmark_peer_runs_the_saved_back_model(tmp_path, monkeypatch):
    """benchmarks/paddle_models.py's peer `paddle_inference_fusebridge_ops` (a subprocess:
    save_paddle, register, Paddle Inference) agrees with fusebridge's Session."""
    from fusebridge.bench.paddle_comparison import SAVED_BACK, compare_with_paddle

    monkeypatch.setenv("FUSEBRIDGE_PADDLE_CACHE", str(tmp_path / "ops"))
    rows = compare_with_paddle(
        ROOT / "gru_tagger_lengths" / "jit", (2,), repeat=1, peers=(SAVED_BACK,)
    )
    assert [r["runtime"] for r in rows] == ["fusebridge", SAVED_BACK]
    assert rows[1]["same_output"] == "yes", rows[1].get("error")
