"""The four model families beyond taggers (tests/fixtures/paddle_families, written by
tests/helpers/paddle_families.py from paddle.nn layers and Paddle 3.3's own savers): a
DeepSpeech2-style speech model, a CRNN-style recogniser, an ERNIE-style encoder and a GRU text
classifier. Each form Paddle can write loads without paddle, equals Paddle Inference's predictor
on the same files within both error bounds (as loaded and optimized), fuses its recurrences, and
exports portable ONNX that plain ONNX Runtime runs with the same outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import saved_paddle_models as saved
from helpers.paddle_oracle import paddle_or_skip

import fusebridge as fb
from fusebridge.models import paddle_families as families

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "paddle_families"
SAVED = saved.saved_forms(ROOT)
# Paddle 3.3 cannot save these with PIR off: in legacy static mode paddle.argmax, paddle.sum
# and MultiHeadAttention's matmul take only PIR values ("must be Value, but got Variable").
NOT_SAVABLE = {"crnn/legacy", "ernie/legacy", "classifier/legacy"}


def _feeds(saved: str, batch: int = 3) -> dict:
    return families.feeds(saved.split("/")[0], batch=batch)


def test_the_fixtures_cover_every_model_and_way():
    expected = {f"{m}/{w}" for m in families.MODELS for w in families.WAYS}
    assert set(SAVED) == expected - NOT_SAVABLE


def test_every_model_loads_without_paddle():
    saved.assert_load_without_paddle([ROOT / s for s in SAVED])


@pytest.mark.paddle
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("form", SAVED)
def test_session_equals_paddle_inference(form, batch):
    paddle_or_skip()
    saved.assert_equals_paddle_inference(ROOT / form, _feeds(form, batch))


@pytest.mark.parametrize("form", SAVED)
def test_portable_export_runs_in_plain_onnxruntime(form, tmp_path):
    saved.assert_portable_export_runs(ROOT / form, _feeds(form), tmp_path)


def _ops(saved: str) -> list[str]:
    return [n.op_type for n in fb.optimize(fb.load(ROOT / saved))[0].graph]


@pytest.mark.parametrize("saved", SAVED)
def test_recurrences_fuse(saved):
    """Each GRU layer is one FusionGRU (two stacked bidirectional layers in the speech model,
    one in the classifier); the recogniser's bidirectional LSTM is ONNX's LSTM, one node."""
    ops = _ops(saved)
    expected = {"deepspeech": ("FusionGRU", 2), "classifier": ("FusionGRU", 1)}
    expected.update({"crnn": ("LSTM", 1), "ernie": ("MatMul", 18)})
    op_type, count = expected[saved.split("/")[0]]
    assert ops.count(op_type) == count, (saved, ops)
    assert "RNN" not in ops and "GRU" not in ops and "Dropout" not in ops


@pytest.mark.paddle
def test_regenerating_writes_the_same_programs(tmp_path):
    """The committed fixtures are what the installed Paddle writes: same op types, in order."""
    paddle_or_skip()
    families.save_all(tmp_path)
    saved.assert_same_programs(tmp_path, ROOT)
