"""origin_mode False -> True by negating the update gate (negate_update_gate), checked against
the reference GRU run both ways."""

import numpy as np
import pytest
from helpers.paddle_gru_op import offsets_of

from fusebridge import ArgumentError
from fusebridge.kernels import negate_update_gate, reference

RNG = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_negate_update_gate_turns_origin_mode_on(linear_before_reset):
    lengths, ic, oc = [3, 1, 4], 3, 2
    x = f32(sum(lengths), ic)
    wx, wh = f32(2, ic, 3 * oc), f32(2, oc, 3 * oc)
    bias, bias_h, h0 = f32(2, 3 * oc), f32(2, 3 * oc), f32(2, len(lengths), oc)
    inputs = [wx.copy(), wh.copy(), bias.copy(), bias_h.copy()]
    common = {
        "h0": h0,
        "offsets": offsets_of(lengths),
        "direction": "bidirectional",
        "linear_before_reset": linear_before_reset,
    }
    expected = reference.gru(x, wx, wh, bias, bias_h=bias_h, origin_mode=False, **common)
    nwx, nwh, nbias, nbias_h = negate_update_gate(wx, wh, bias, bias_h)
    got = reference.gru(x, nwx, nwh, nbias, bias_h=nbias_h, origin_mode=True, **common)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    # The update-gate columns negated, the others untouched, the inputs unchanged.
    for before, after in zip(inputs, (nwx, nwh, nbias, nbias_h)):
        np.testing.assert_array_equal(after[..., :oc], -before[..., :oc])
        np.testing.assert_array_equal(after[..., oc:], before[..., oc:])
    for before, now in zip(inputs, (wx, wh, bias, bias_h)):
        np.testing.assert_array_equal(now, before)


def test_negate_update_gate_none_stays_none_and_2d_weights():
    wx, wh = f32(3, 6), f32(2, 6)
    nwx, nwh, nbias, nbias_h = negate_update_gate(wx, wh)
    assert nbias is None and nbias_h is None
    assert not np.shares_memory(nwx, wx) and not np.shares_memory(nwh, wh)
    np.testing.assert_array_equal(nwh[:, :2], -wh[:, :2])


@pytest.mark.parametrize("gate_activation", ["tanh", "relu", "identity"])
def test_negate_update_gate_refuses_other_gates(gate_activation):
    with pytest.raises(
        ArgumentError,
        match=f"negate_update_gate: gate_activation must be 'sigmoid'.*{gate_activation}",
    ):
        negate_update_gate(f32(3, 6), f32(2, 6), gate_activation=gate_activation)


def test_negate_update_gate_checks_columns():
    with pytest.raises(ArgumentError, match=r"bias must have 3\*OC = 6 columns"):
        negate_update_gate(f32(3, 6), f32(2, 6), f32(9))
