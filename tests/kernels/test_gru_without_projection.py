"""The GRU without an input projection (pack_gru_weights(None, ...)): x holds the gates
already projected, as Paddle's unfused `gru` op receives them, and no identity Wx is
multiplied in. Checked against reference.gru with an identity Wx and, bit for bit, against the
kernel's own projection by an identity (adding exact zeros changes no bit)."""

import numpy as np
import pytest
from test_gru import random_gru

from fusebridge import ArgumentError, kernels
from fusebridge.kernels import reference


def identity_wx(d, oc):
    """[D, D*3*OC, 3*OC]: direction d's projection picks its own 3*OC columns of x."""
    eye = np.eye(d * 3 * oc, dtype=np.float32)
    return np.stack([eye[:, k * 3 * oc : (k + 1) * 3 * oc] for k in range(d)])


CASES = [
    ("forward", "lod", False),
    ("reverse", "tnc", True),
    ("bidirectional", "ntc", False),
    ("bidirectional", "lod", True),
]


@pytest.mark.parametrize(("direction", "layout", "lbr"), CASES)
def test_matches_reference_with_identity_projection(each_isa, direction, layout, lbr):
    rng = np.random.default_rng(6)
    d, oc = 2 if direction == "bidirectional" else 1, 17
    lens = [5, 0, 3, 8, 1]
    gates, args = random_gru(rng, d, d * 3 * oc, oc, lens, layout=layout)
    args.pop("wx")
    attrs = {"direction": direction, "layout": layout, "linear_before_reset": lbr}
    hidden, last = kernels.fusion_gru(gates, None, **args, **attrs, return_last=True)
    ref_hidden, ref_last = reference.gru(gates, identity_wx(d, oc), **args, **attrs)
    tol = 2e-5 * max(1.0, float(np.abs(ref_hidden).max()))
    np.testing.assert_allclose(hidden, ref_hidden, rtol=2e-5, atol=tol)
    np.testing.assert_allclose(last, ref_last, rtol=2e-5, atol=tol)

    projected = kernels.fusion_gru(gates, identity_wx(d, oc), **args, **attrs)
    np.testing.assert_array_equal(hidden, projected)


def test_packed_weights_without_projection():
    rng = np.random.default_rng(7)
    wh = rng.standard_normal((4, 12)).astype(np.float32)
    w = kernels.pack_gru_weights(None, wh, np.ones((12,), np.float32))
    assert w.wx is None and (w.directions, w.input_size, w.hidden_size) == (1, 12, 4)
    gates = rng.standard_normal((6, 12)).astype(np.float32)
    offsets = np.array([0, 2, 6])
    hidden = kernels.fusion_gru(gates, w, offsets=offsets)
    ref, _ = reference.gru(gates, identity_wx(1, 4), wh, np.ones(12), offsets=offsets)
    np.testing.assert_allclose(hidden, ref, rtol=2e-5, atol=2e-5)
    with pytest.raises(ArgumentError, match="x has 11 features, the weights expect IC = 12"):
        kernels.fusion_gru(gates[:, :11], w, offsets=offsets)
