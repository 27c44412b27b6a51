"""fc_lstm and mul_lstm refuse, with their reasons, where the projection cannot fold; the
graph then runs as it was (the folds themselves: tests/integrations/paddle/test_paddle_lstm.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_ir as ir
from helpers.error_bounds import ONNXRUNTIME, assert_within
from helpers.graph_bounds import output_bounds

import fusebridge as fb

LAC_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "paddle_lstm" / "lac_lstm"
LENGTHS = [2, 5, 1]


def _feeds() -> dict:
    words = np.arange(sum(LENGTHS), dtype=np.int64)[:, None] % 50
    return {"words": fb.LoDTensor(words, lengths=LENGTHS)}


def _run(model) -> np.ndarray:
    return next(iter(fb.Session(model).run(_feeds()).values())).data


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
    # The folded projection rounds otherwise: both in ONNX Runtime's LSTM, within its bounds.
    bound = next(iter(output_bounds(model, _feeds(), (ONNXRUNTIME, ONNXRUNTIME)).values()))
    assert_within(_run(optimized), _run(model), bound)  # _run's first output


def test_a_fed_lstm_weight_is_not_folded():
    model = fb.load(LAC_DIR)
    lstm = _first(model, "LSTM")
    fed = ir.Value(name="w_fed", type=lstm.inputs[1].type, shape=lstm.inputs[1].shape)
    model.graph.inputs.append(fed)
    lstm.replace_input_with(1, fed)
    _, report = fb.optimize(model)
    assert report.fired("fc_lstm") == 1
    assert _refusals(report, "fc_lstm") == ["the LSTM's W is not a constant [D, 4H, I]"]
