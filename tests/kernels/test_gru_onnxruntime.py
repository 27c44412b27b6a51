"""The GRU against ONNX Runtime's GRU op: padded input with unequal, unsorted lengths,
linear_before_reset 0 and 1, all directions, with and without initial_h.

ONNX's GRU is the canonical recurrence with origin_mode=True (Ht = (1 - zt) * ht + zt * Ht-1),
gate order (z, r, h) = our (u, r, c), W [D, 3H, IC] and R [D, 3H, H] acting from the left
(canonical wx[d] = W[d].T, wh[d] = R[d].T) and B [D, 6H] = input bias then recurrent bias.

What ONNX Runtime 1.31 does that the tests work around:
- layout=1 (batch-major, our ntc) is refused when the session is made ("Batchwise recurrent
  operations (layout == 1) are not supported"), so ntc is checked against layout 0 on the
  transposed input.
- A sequence length of 0 is accepted: its Y rows are zero, as ours, but its Y_h is zero where
  our contract gives initial_h (an empty sentence keeps its initial state), so Y_h is compared
  on the non-empty sentences only."""

import functools
from typing import NamedTuple

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers.error_bounds import FUSEBRIDGE, ONNXRUNTIME, assert_within, padded_gru_bound
from helpers.gru_impls import _kernel, impl_fixture  # noqa: F401  (fixture `impl`)
from onnx import TensorProto, helper

T, N, IC, H = 6, 4, 5, 3
LENGTHS = [4, 6, 1, 3]  # unsorted, unequal, shorter than T except one
DIRECTIONS = ["forward", "reverse", "bidirectional"]
# Our activation names in ONNX's spelling: identity is Affine with alpha 1, beta 0.
ONNX_ACTIVATIONS = {
    "sigmoid": ("Sigmoid", None, None),
    "tanh": ("Tanh", None, None),
    "relu": ("Relu", None, None),
    "identity": ("Affine", 1.0, 0.0),
}


@functools.cache
def session(direction, linear_before_reset, has_h0, gate_activation, activation):
    """One ONNX Runtime session per configuration; data comes in as graph inputs."""
    d = 2 if direction == "bidirectional" else 1
    value = helper.make_tensor_value_info
    inputs = [
        value("X", TensorProto.FLOAT, [T, N, IC]),
        value("W", TensorProto.FLOAT, [d, 3 * H, IC]),
        value("R", TensorProto.FLOAT, [d, 3 * H, H]),
        value("B", TensorProto.FLOAT, [d, 6 * H]),
        value("sequence_lens", TensorProto.INT32, [N]),
    ]
    if has_h0:
        inputs.append(value("initial_h", TensorProto.FLOAT, [d, N, H]))
    # Per direction: the gate activation (f), then the candidate's (g).
    acts = [ONNX_ACTIVATIONS[gate_activation], ONNX_ACTIVATIONS[activation]] * d
    attrs = {"activations": [a[0] for a in acts]}
    if any(a[1] is not None for a in acts):
        # alpha and beta are listed only for the activations that take them, in order.
        attrs["activation_alpha"] = [a[1] for a in acts if a[1] is not None]
        attrs["activation_beta"] = [a[2] for a in acts if a[2] is not None]
    node = helper.make_node(
        "GRU",
        [v.name for v in inputs],
        ["Y", "Y_h"],
        hidden_size=H,
        direction=direction,
        linear_before_reset=int(linear_before_reset),
        **attrs,
    )
    outputs = [
        value("Y", TensorProto.FLOAT, [T, d, N, H]),
        value("Y_h", TensorProto.FLOAT, [d, N, H]),
    ]
    graph = helper.make_graph([node], "gru", inputs, outputs)
    # IR 9: ONNX Runtime 1.31 refuses IR 14, which onnx 1.23 writes by default.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def case(seed, direction, has_h0, lengths=LENGTHS):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    f32 = lambda *shape, scale=1.0: (scale * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    return {
        "X": f32(T, N, IC),  # padded steps hold noise: they must not leak into anything
        "W": f32(d, 3 * H, IC, scale=0.3),
        "R": f32(d, 3 * H, H, scale=0.3),
        "B": f32(d, 6 * H, scale=0.1),
        "sequence_lens": np.array(lengths, np.int32),
        **({"initial_h": f32(d, N, H, scale=0.5)} if has_h0 else {}),
    }


def run_both(impl, feeds, direction, linear_before_reset, layout="tnc", **acts):
    acts = {"gate_activation": "sigmoid", "activation": "tanh", **acts}
    sess = session(direction, linear_before_reset, "initial_h" in feeds, *acts.values())
    y, y_h = sess.run(None, feeds)
    x = feeds["X"]
    hidden, last = impl(
        x if layout == "tnc" else x.transpose(1, 0, 2),
        feeds["W"].transpose(0, 2, 1),
        feeds["R"].transpose(0, 2, 1),
        feeds["B"][:, : 3 * H],
        bias_h=feeds["B"][:, 3 * H :],
        h0=feeds.get("initial_h"),
        seq_lens=feeds["sequence_lens"],
        layout=layout,
        direction=direction,
        linear_before_reset=linear_before_reset,
        origin_mode=True,
        **acts,
    )
    if layout == "ntc":
        hidden = hidden.transpose(1, 0, 2)
    d = y.shape[1]
    # Y [T, D, N, H] -> ours [T, N, D*H], forward half first.
    expected = y.transpose(0, 2, 1, 3).reshape(T, N, d * H)
    # Both within their error bounds of the formula (the reference's own error, in float64, is
    # nil next to them): tests/helpers/error_bounds.py.
    args = (x, feeds["W"].transpose(0, 2, 1), feeds["R"].transpose(0, 2, 1), feeds["B"][:, : 3 * H])
    kw = dict(
        bias_h=feeds["B"][:, 3 * H :],
        h0=feeds.get("initial_h"),
        seq_lens=feeds["sequence_lens"],
        direction=direction,
        linear_before_reset=linear_before_reset,
        **acts,
    )
    libs = [ONNXRUNTIME] + ([FUSEBRIDGE] if impl is _kernel else [])
    bounds = [padded_gru_bound(*args, lib=lib, **kw) for lib in libs]
    return Compared(hidden, last, expected, y_h, *(sum(b) for b in zip(*bounds)))


class Compared(NamedTuple):
    hidden: np.ndarray
    last: np.ndarray
    expected: np.ndarray  # ONNX Runtime's Y as [T, N, D*H]
    y_h: np.ndarray
    hidden_bound: np.ndarray  # |hidden - expected| may reach it
    last_bound: np.ndarray

    def check(self, where: str = "") -> None:
        assert_within(self.hidden, self.expected, self.hidden_bound, f"{where} Y")
        assert_within(self.last, self.y_h, self.last_bound, f"{where} Y_h")


@pytest.mark.parametrize("has_h0", [False, True], ids=["zero_h0", "h0"])
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_padded_tnc(impl, direction, linear_before_reset, has_h0):
    feeds = case(
        DIRECTIONS.index(direction) * 4 + 2 * linear_before_reset + has_h0, direction, has_h0
    )
    both = run_both(impl, feeds, direction, linear_before_reset)
    both.check()
    for n, length in enumerate(LENGTHS):  # padding exactly zero
        assert not both.hidden[length:, n].any()


@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_ntc_against_time_major_onnx(impl, direction, linear_before_reset):
    feeds = case(20 + DIRECTIONS.index(direction) * 2 + linear_before_reset, direction, True)
    run_both(impl, feeds, direction, linear_before_reset, "ntc").check()


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_zero_length_sentence(impl, direction):
    lengths = [3, 0, 6, 1]
    feeds = case(30 + DIRECTIONS.index(direction), direction, True, lengths)
    both = run_both(impl, feeds, direction, True)
    assert_within(both.hidden, both.expected, both.hidden_bound, "Y")
    assert not both.hidden[:, 1].any()
    real = [n for n, length in enumerate(lengths) if length]
    assert_within(both.last[:, real], both.y_h[:, real], both.last_bound[:, real], "Y_h")
    # Ours keeps initial_h for the empty sentence (ONNX Runtime gives zeros there).
    np.testing.assert_array_equal(both.last[:, 1], feeds["initial_h"][:, 1])


@pytest.mark.parametrize(
    ("gate_activation", "activation"),
    [("sigmoid", "relu"), ("tanh", "identity"), ("relu", "sigmoid"), ("identity", "tanh")],
)
def test_activations(impl, gate_activation, activation):
    feeds = case(40, "bidirectional", True)
    run_both(
        impl, feeds, "bidirectional", True, gate_activation=gate_activation, activation=activation
    ).check()


@pytest.mark.parametrize("where", ["X", "R"])
def test_nan_propagates_where_onnxruntime_drops_it(where):
    """ONNX Runtime 1.32's GRU turns NaN into finite numbers: its sigmoid clamps the input
    with a min/max that drops NaN, so an update gate of NaN becomes 1 and the state stays
    initial_h. Ours follows the formula (and IEEE arithmetic): NaN in, NaN out, exactly where
    the float64 reference has it (test_gru.py checks every ISA path and activation)."""
    feeds = case(50, "bidirectional", True)
    feeds[where] = np.full_like(feeds[where], np.nan)
    hidden, last, expected, y_h, *_ = run_both(_kernel, feeds, "bidirectional", True)
    assert not np.isnan(expected).any()  # ONNX Runtime: finite, the initial state kept
    np.testing.assert_array_equal(y_h, feeds["initial_h"])
    real = np.zeros_like(hidden, bool)
    for n, length in enumerate(LENGTHS):
        real[:length, n] = True
    assert np.isnan(hidden[real]).all() and np.isnan(last).all()
