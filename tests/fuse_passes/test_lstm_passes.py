"""fc_lstm and mul_lstm refuse, with their reasons, where the projection cannot fold; the
graph then runs as it was (the folds themselves: tests/integrations/paddle/test_paddle_lstm.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_ir as ir

import fusebridge as fb

LAC_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "paddle_lstm" / "lac_lstm"
LENGTHS = [2, 5, 1]


def _run(model) -> np.ndarray:
    words = np.arange(sum(LENGTHS), dtype=np.int64)[:, None] % 50
    out = fb.Session(model).run({"words": fb.LoDTensor(words, lengths=LENGTHS)})
    return next(iter(out.values())).data


def _refusals(report, rule):
    return [why for _, why in report.refusals(rule)]


def _first(model, op_type):
    return next(n for n in model.graph if n.op_type == op_type)


def test_a_projection_read_twice_is_not_folded():
    model = fb.load(LAC_DIR)
    fc_out = _first(model, "LoDToPadded").inputs[0]
    side = ir.node("Relu", [fc_out])
    side.outputs[0].name = "side"
    model.graph.append(side)
    model.graph.outputs.append(side.outputs[0])
    optimized, report = fb.optimize(model)
    assert report.fired("fc_lstm") == 1  # the other LSTM folds
    (why,) = _refusals(report, "fc_lstm")
    assert why == (
        f"the projection output (after the bias) {fc_out.name!r} has a second consumer "
        f"(LoDToPadded {_first(model, 'LoDToPadded').name!r}, Relu {side.name!r})"
    )
    np.testing.assert_allclose(_run(optimized), _run(model), rtol=0, atol=1e-6)


def test_a_fed_lstm_weight_is_not_folded():
    model = fb.load(LAC_DIR)
    lstm = _first(model, "LSTM")
    fed = ir.Value(name="w_fed", type=lstm.inputs[1].type, shape=lstm.inputs[1].shape)
    model.graph.inputs.append(fed)
    lstm.replace_input_with(1, fed)
    _, report = fb.optimize(model)
    assert report.fired("fc_lstm") == 1
    assert _refusals(report, "fc_lstm") == ["the LSTM's W is not a constant [D, 4H, I]"]
