"""The recurrence toolkit (fusebridge/ops/recurrence.py) on its own: gate orders, a layer's
layouts, and projection folding against the two matrix products it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from fusebridge.ops import recurrence


def _gate_labelled(gates: int, h: int, cols: int, label: float) -> np.ndarray:
    """[gates*h, cols], block g filled with label + g."""
    return np.repeat(label + np.arange(gates, dtype=np.float32), h)[:, None] * np.ones(cols)


@pytest.mark.parametrize(
    ("order", "framework", "canonical"),
    [
        (recurrence.GRU_RZN, "rzn", "zrn"),
        (recurrence.LSTM_IFCO, "ifco", "iofc"),
        (recurrence.LSTM_CIFO, "cifo", "iofc"),
    ],
)
def test_gate_orders_give_the_canonical_blocks(order, framework, canonical):
    h = 2
    packed = np.repeat([framework.index(g) for g in framework], h).astype(np.float32)
    got = recurrence.reorder_gates(packed, order)
    want = np.repeat([framework.index(g) for g in canonical], h).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_a_layer_from_a_frameworks_blocks():
    h, i = 3, 5
    forward = (
        _gate_labelled(3, h, i, 0),
        _gate_labelled(3, h, h, 10),
        _gate_labelled(3, h, 1, 20)[:, 0],
        _gate_labelled(3, h, 1, 30)[:, 0],
    )
    backward = tuple(a + 100 for a in forward)
    layer = recurrence.LayerWeights.from_blocks([forward, backward], recurrence.GRU_RZN)
    assert (layer.directions, layer.hidden) == (2, h)
    assert layer.w.shape == (2, 3 * h, i) and layer.r.shape == (2, 3 * h, h)
    # (r, z, n) -> (z, r, n): block 0 of ours is the framework's block 1.
    assert layer.w[0, 0, 0] == 1 and layer.w[0, h, 0] == 0 and layer.w[1, 2 * h, 0] == 102
    wx, wh, b, bh = layer.fusion_gru()
    np.testing.assert_array_equal(wx, layer.w.transpose(0, 2, 1))
    np.testing.assert_array_equal(wh, layer.r.transpose(0, 2, 1))
    assert wx.flags.c_contiguous and not np.shares_memory(b, layer.b)
    np.testing.assert_array_equal(bh, layer.bh)
    np.testing.assert_array_equal(layer.onnx_bias(), np.concatenate([layer.b, layer.bh], 1))


def test_folding_a_projection_is_the_two_products():
    rng = np.random.default_rng(0)
    k, i, gates, d = 4, 6, 9, 2
    x = rng.standard_normal((7, k))
    w1, b1 = rng.standard_normal((k, i)), rng.standard_normal(i)
    w = rng.standard_normal((d, i, gates))
    folded, shift = recurrence.fold_projection(w1, b1, w)
    for direction in range(d):
        want = (x @ w1 + b1) @ w[direction]
        got = x @ folded[direction] + shift[direction]
        # float32 weights: products of k + i terms, each rounded at 2^-24 relative.
        scale = (np.abs(x) @ np.abs(w1) + np.abs(b1)) @ np.abs(w[direction])
        assert np.all(np.abs(got - want) <= 4 * (k + i) * 2.0**-24 * scale)
    assert recurrence.fold_projection(w1, None, w)[1] is None


def test_projection_refusals():
    assert recurrence.projection_refusal((4, 6), (2, 6, 9), ("Wx", "GRU")) is None
    assert "gives 5 columns, Wx takes 6" in recurrence.projection_refusal(
        (4, 5), (2, 6, 9), ("Wx", "GRU")
    )
    why = recurrence.projection_refusal((100, 6), (2, 6, 9), ("W", "LSTM"))
    assert why == (
        "folding would raise the projection from 708 to 1800 multiply-adds per word "
        "(100 inputs, 6 LSTM inputs)"
    )
