"""Paddle 3 models as Paddle 3.3 saves them (tests/fixtures/paddle3, written by
tests/helpers/paddle3_fixtures.py): PIR programs from paddle.jit.save and save_inference_model, and
legacy .pdmodel from save_inference_model with PIR off. Each loads without paddle, equals Paddle
Inference's predictor on the same files within both error bounds (tests/helpers/graph_bounds.py; as
loaded and optimized), exports portable ONNX that plain ONNX Runtime runs with the same outputs, and
gets the fusions its ops call for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import paddle3_fixtures as fixtures
from helpers import saved_paddle_models as saved_models
from helpers.paddle_oracle import paddle_or_skip

import fusebridge as fb
from fusebridge.errors import ModelFormatError, UnsupportedOpError

ROOT = fixtures.DEFAULT_OUT_DIR
SAVED = saved_models.saved_forms(ROOT)


def _feeds(saved: str, batch: int) -> dict[str, np.ndarray]:
    return fixtures.feeds(saved.split("/")[0], batch=batch)


def test_the_fixtures_cover_every_model_and_way():
    expected = {f"{m}/{w}" for m in fixtures.MODELS for w in fixtures.WAYS}
    # Paddle 3.3 cannot save the encoder with PIR off (tests/helpers/paddle3_fixtures.py).
    assert set(SAVED) == expected - {"encoder/legacy"}


def test_every_model_loads_without_paddle():
    saved_models.assert_load_without_paddle([ROOT / s for s in SAVED])


@pytest.mark.paddle
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("saved", SAVED)
def test_session_equals_paddle_inference(saved, batch):
    paddle_or_skip()
    saved_models.assert_equals_paddle_inference(ROOT / saved, _feeds(saved, batch))


@pytest.mark.parametrize("saved", SAVED)
def test_portable_export_runs_in_plain_onnxruntime(saved, tmp_path):
    saved_models.assert_portable_export_runs(ROOT / saved, _feeds(saved, 3), tmp_path)


def _ops(saved: str) -> list[str]:
    return [n.op_type for n in fb.optimize(fb.load(ROOT / saved))[0].graph]


@pytest.mark.parametrize("way", fixtures.WAYS)
def test_fusions_fire(way):
    """Each GRU layer is one FusionGRU from zeros (the state nn.GRU builds is dropped with
    its shape chain); inference dropouts go; a Linear before the GRU folds into it; LSTM and
    tanh RNN layers are ONNX's own ops."""
    tagger = _ops(f"gru_tagger_lengths/{way}")
    assert tagger.count("FusionGRU") == 2
    assert not {"Dropout", "ConstantOfShape", "Shape", "Transpose"} & set(tagger)
    assert _ops(f"linear_gru/{way}").count("MatMul") == 0
    assert _ops(f"lstm_tagger_lengths/{way}").count("LSTM") == 2
    assert _ops(f"rnn_tanh/{way}").count("RNN") == 1
    if way != "legacy":
        assert "Dropout" not in _ops(f"encoder/{way}")


def test_paths_as_paddle_takes_them():
    """The directory, the .json file and the prefix name the same model."""
    jit = ROOT / "gru_tagger" / "jit"
    outputs = [
        [v.name for v in fb.load(path).graph.outputs]
        for path in (jit, jit / "model.json", jit / "model")
    ]
    assert outputs == [["fetch_name_0"]] * 3
    legacy = ROOT / "gru_tagger" / "legacy" / "model"
    assert [v.name for v in fb.load(legacy).graph.inputs] == ["ids"]


def _copy(tmp_path: Path, saved: str = "gru_tagger/jit") -> Path:
    target = tmp_path / "model"
    shutil.copytree(ROOT / saved, target)
    return target


def _rewrite(model_dir: Path, change) -> None:
    path = model_dir / "model.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _ops_of(doc: dict) -> list:
    return doc["program"]["regions"][0]["blocks"][0]["ops"]


def test_an_unchecked_pir_version_is_named(tmp_path):
    model = _copy(tmp_path)
    _rewrite(model, lambda doc: doc["base_code"].update(version=7))
    with pytest.raises(ModelFormatError, match=r"PIR version 7 .*checked on \(4: Paddle 3.3\)"):
        fb.load(model)


def test_unsupported_ops_are_listed_at_once(tmp_path):
    model = _copy(tmp_path)

    def rename(doc):
        for op in _ops_of(doc):
            if op["#"] in ("1.matmul", "1.rnn"):
                op["#"] = op["#"].replace("1.", "1.my_")

    _rewrite(model, rename)
    with pytest.raises(UnsupportedOpError, match=r"2 unsupported op type\(s\): pd_op.my_rnn"):
        fb.load(model)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc.pop("program"), "field 'program'"),
        (lambda doc: doc["base_code"].update(magic="nope"), "magic = 'nope'"),
        (lambda doc: _ops_of(doc)[-1]["I"].__setitem__(0, {"%": 999}), "operand %999 is not"),
        (lambda doc: _ops_of(doc)[0].__setitem__("A", [0]), "a parameter needs"),
        (
            lambda doc: next(o for o in _ops_of(doc) if o["#"] == "1.dropout")["I"].pop(),
            "dropout's p must be a constant",
        ),
        (
            lambda doc: next(o for o in _ops_of(doc) if o["#"] == "1.rnn")["A"][1]["AT"].update(
                D="yes"
            ),
            "attribute 'is_bidirec': attribute of kind 0.a_bool holds 'yes'",
        ),
    ],
)
def test_malformed_programs_are_named(tmp_path, change, message):
    model = _copy(tmp_path)
    _rewrite(model, change)
    with pytest.raises(ModelFormatError, match=message):
        fb.load(model)


def test_truncated_json_is_a_model_format_error(tmp_path):
    model = _copy(tmp_path)
    path = model / "model.json"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        fb.load(model)


def test_a_directory_with_two_models_is_refused(tmp_path):
    model = _copy(tmp_path)
    shutil.copy(ROOT / "gru_tagger" / "legacy" / "model.pdmodel", model / "model.pdmodel")
    with pytest.raises(
        ModelFormatError, match=r"expected one model file .* found model\.pdmodel, model\.json"
    ):
        fb.load(model)


@pytest.mark.paddle
def test_regenerating_writes_the_same_programs(tmp_path):
    """The committed fixtures are what the installed Paddle writes: same op types, in order."""
    paddle_or_skip()
    fixtures.main(tmp_path)
    saved_models.assert_same_programs(tmp_path, ROOT)
