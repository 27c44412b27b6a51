"""Paddle's legacy LoD `lstm` op (lstm_converter.py) and the fc_lstm / mul_lstm folds, against
Paddle's own Executor on the saved files, and against the op's formula (reference_lstm) on the
committed LAC-style fixture, which runs without paddle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from helpers.error_bounds import (
    ONNXRUNTIME,
    PADDLE,
    Activations,
    assert_within,
    gemm_error_bound,
    lstm_bound,
)
from helpers.graph_bounds import SESSION, output_bounds
from helpers.paddle_lstm_models import LAC, reference_lstm, save_lstm
from helpers.paddle_oracle import paddle_or_skip, run_executor

import fusebridge as fb
from fusebridge.errors import ModelFormatError, UnsupportedOpError

LAC_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "paddle_lstm" / "lac_lstm"
LENGTHS = [3, 1, 0, 7, 4]  # unequal, with a one-word and an empty sentence


def _data(model) -> np.ndarray:
    return model.data if isinstance(model, fb.LoDTensor) else np.asarray(model)


def _run(model, feeds: dict) -> np.ndarray:
    """The one output of `model` on feeds {name: (array, lengths or None)}."""
    fed = {
        n: a if lens is None else fb.LoDTensor(a, lengths=lens) for n, (a, lens) in feeds.items()
    }
    (out,) = fb.Session(model).run(fed).values()
    return _data(out)


def _ops(model) -> list[str]:
    return [n.op_type for n in model.graph]


# -- the committed fixture, without paddle ------------------------------------------------------
def _lac_reference(words: np.ndarray, lengths: list[int]) -> np.ndarray:
    """The LAC-style tagger from its parameters and the formulas of its ops."""
    from fusebridge.integrations.paddle.params import read_paddle_model

    _, params = read_paddle_model(LAC_DIR)
    emb = params["word_emb"][words[:, 0]].astype(np.float64)
    fc = [k for k in sorted(params) if k.startswith("fc_")]  # fc_0 / fc_1 / fc_2 .w_0 / .b_0
    w = {k: params[k].astype(np.float64) for k in fc}
    halves = [
        reference_lstm(emb @ w[f"fc_{k}.w_0"] + w[f"fc_{k}.b_0"], lengths, params[f"{d}.w"],
                       params[f"{d}.b"], is_reverse=d == "bwd")
        for k, d in ((0, "fwd"), (1, "bwd"))
    ]  # fmt: skip
    return np.concatenate(halves, axis=1) @ w["fc_2.w_0"] + w["fc_2.b_0"]


@pytest.mark.parametrize("pipeline", ["none", "inference"])
def test_lac_fixture_matches_the_formula(pipeline):
    rng = np.random.default_rng(1)
    words = rng.integers(0, LAC["vocab"], (sum(LENGTHS), 1)).astype(np.int64)
    model, report = fb.optimize(fb.load(LAC_DIR), pipeline)
    got = _run(model, {"words": (words, LENGTHS)})
    want = _lac_reference(words, LENGTHS)  # float64: its own error is negligible
    lod = {"words": fb.LoDTensor(words, lengths=LENGTHS)}
    bound, _ = output_bounds(model, lod, (SESSION,)).values()  # the data's, the offsets' (exact)
    assert_within(got, want, bound, f"LAC fixture, pipeline {pipeline}")
    if pipeline == "inference":
        assert report.fired("fc_lstm") == 2
        assert _ops(model).count("LSTM") == 2 and _ops(model).count("MatMul") == 1  # the tags fc


def test_lac_fixture_exports_portable_onnx_that_plain_ort_runs(tmp_path):
    rng = np.random.default_rng(2)
    words = rng.integers(0, LAC["vocab"], (sum(LENGTHS), 1)).astype(np.int64)
    model, _ = fb.optimize(fb.load(LAC_DIR))
    ours = _run(model, {"words": (words, LENGTHS)})
    path = tmp_path / "lac.onnx"
    fb.save_onnx(model, path, portable=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    offsets = np.concatenate([[0], np.cumsum(LENGTHS)]).astype(np.int64)
    feeds = {"words": words, "words.offsets": offsets}
    theirs = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})[0]
    lod = {"words": fb.LoDTensor(words, lengths=LENGTHS)}
    bound, _ = output_bounds(model, lod, (SESSION, ONNXRUNTIME)).values()  # data, offsets
    assert_within(theirs, ours, bound, "LAC fixture, portable ONNX in ONNX Runtime")


# -- the op in each configuration, against Paddle ------------------------------------------------
CONFIGS = {
    "fc, peepholes": {},
    "fc, reverse": {"is_reverse": True},
    "fc, no peepholes": {"use_peepholes": False},
    "mul, reverse, no peepholes": {"projection": "mul", "is_reverse": True, "use_peepholes": False},
    "projected input": {"projection": None, "in_size": 16},
    "h0 and c0": {"states": True},
    "h0 and c0, reverse": {"states": True, "is_reverse": True},
    "activations": {
        "gate_activation": "sigmoid",
        "candidate_activation": "relu",
        "cell_activation": "identity",
    },
    "identity gates": {"gate_activation": "identity", "cell_activation": "relu"},
}


def _feeds(config: dict, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    hidden = 4
    feeds = {"x": (rng.standard_normal((sum(LENGTHS), config.get("in_size", 5))), LENGTHS)}
    if config.get("states"):
        for name in ("h0", "c0"):
            feeds[name] = (rng.standard_normal((len(LENGTHS), hidden)), None)
    return {n: (a.astype(np.float32), lens) for n, (a, lens) in feeds.items()}


def _lstm_bound(folder: Path, config: dict, feeds: dict, lib: Activations) -> np.ndarray:
    """The error bound of one implementation of the saved model (tests/helpers/error_bounds.py): the
    projection's products, then the recurrence's, with `lib`'s activations."""
    from fusebridge.integrations.paddle.params import read_paddle_model

    _, params = read_paddle_model(folder)
    x = feeds["x"][0].astype(np.float64)
    projection = config.get("projection", "fc")
    if projection is None:
        gates, gates_error = x, None
    else:
        w = params["proj.w" if projection == "mul" else "fc_0.w_0"].astype(np.float64)
        b = params["fc_0.b_0"].astype(np.float64) if projection == "fc" else np.zeros(w.shape[1])
        gates = x @ w + b
        gates_error = gemm_error_bound(np.abs(x) @ np.abs(w) + np.abs(b), w.shape[0], 1)
    states = [feeds[n][0] if n in feeds else None for n in ("h0", "c0")]
    keys = ("is_reverse", "gate_activation", "cell_activation", "candidate_activation")
    attrs = {k.replace("is_reverse", "reverse"): config[k] for k in keys if k in config}
    _, bound = lstm_bound(
        gates, params["lstm.w"], params["lstm.b"], *states, lengths=LENGTHS, lib=lib,
        use_peepholes=config.get("use_peepholes", True), x_error=gates_error, **attrs,
    )  # fmt: skip
    return bound


@pytest.mark.paddle
@pytest.mark.parametrize("name", list(CONFIGS))
def test_lstm_matches_paddle(tmp_path, name):
    """Within the sum of both implementations' error bounds, which grow with the steps and the
    recurrence (identity gates reach 1e23 in 7 steps): our LSTM runs in ONNX Runtime. A fixed
    1e-5 of the output's scale failed on an AVX512-FP16 Xeon (1.16e-5), where Paddle's GEMMs
    take other kernels (issue 31)."""
    paddle_or_skip()
    config = CONFIGS[name]
    save_lstm(tmp_path, **config)
    feeds = _feeds(config)
    (want,) = run_executor(tmp_path, feeds).values()
    bound = sum(_lstm_bound(tmp_path, config, feeds, lib) for lib in (ONNXRUNTIME, PADDLE))
    model = fb.load(tmp_path)
    optimized, report = fb.optimize(model)
    for label, m in (("as loaded", model), ("optimized", optimized)):
        assert_within(_run(m, feeds), want, bound, f"{name}, {label}")
    projection = config.get("projection", "fc")
    if projection is not None:  # the projection folds into the LSTM's W
        assert report.fired(f"{projection}_lstm") == 1 and "MatMul" not in _ops(optimized)


@pytest.mark.paddle
def test_the_formula_is_paddles():
    """reference_lstm, the oracle of the fixture test, against Paddle's own op."""
    paddle_or_skip()
    import tempfile

    config = {"projection": None, "in_size": 16, "states": True, "is_reverse": True}
    with tempfile.TemporaryDirectory() as tmp:
        save_lstm(Path(tmp), **config)
        feeds = _feeds(config)
        (want,) = run_executor(tmp, feeds).values()
        from fusebridge.integrations.paddle.params import read_paddle_model

        _, params = read_paddle_model(tmp)
        bound = _lstm_bound(Path(tmp), config, feeds, PADDLE)  # the formula's float64: exact
    x, h0, c0 = (feeds[n][0] for n in ("x", "h0", "c0"))
    got = reference_lstm(x, LENGTHS, params["lstm.w"], params["lstm.b"], h0, c0, is_reverse=True)
    assert_within(got, want, bound, "reference_lstm against Paddle's lstm")


# -- what is refused -----------------------------------------------------------------------------
@pytest.mark.paddle
def test_a_read_cell_output_is_refused_by_name(tmp_path):
    paddle_or_skip()
    save_lstm(tmp_path, read_cell=True)
    with pytest.raises(UnsupportedOpError, match=r"lstm.*output Cell 'lstm.cell' .* is read"):
        fb.load(tmp_path)


@pytest.mark.paddle
@pytest.mark.parametrize(
    ("param", "shape", "message"),
    [
        ("lstm.w", (4, 15), r"Weight 'lstm.w' is float32 \[4, 15\], expected float32 \[H, 4H\]"),
        ("lstm.b", (1, 16), r"Bias 'lstm.b' is \[1, 16\], expected \[1, 28\] \(use_peepholes"),
    ],
)
def test_wrong_parameter_shapes_are_named(tmp_path, monkeypatch, param, shape, message):
    paddle_or_skip()
    from fusebridge.integrations.paddle import load

    save_lstm(tmp_path)
    real = load.read_paddle_model

    def with_bad_param(path):
        program, params = real(path)
        return program, {**params, param: np.zeros(shape, np.float32)}

    monkeypatch.setattr(load, "read_paddle_model", with_bad_param)
    with pytest.raises(ModelFormatError, match=message):
        fb.load(tmp_path)
