"""The GRU against Paddle's own unfused `gru` op (mul + gru in a legacy static program), the
framework oracle for LoD input, origin_mode, is_reverse, H0 and the activations. Paddle's CPU
`fusion_gru` is no oracle: it ignores origin_mode (docs/gru.md)."""

import itertools

import numpy as np
import pytest
from helpers.error_bounds import FUSEBRIDGE, PADDLE, assert_within, gru_bound
from helpers.gru_impls import _kernel, impl_fixture  # noqa: F401  (fixture `impl`)
from helpers.paddle_gru_op import offsets_of, paddle_gru

from fusebridge.integrations.paddle.weight_layouts import paddle_weight_h_to_canonical

pytestmark = pytest.mark.paddle

ACTIVATIONS = ["sigmoid", "tanh", "relu", "identity"]
# Unsorted and unequal, with a sentence of one word: Paddle reorders sentences into batches by
# length internally, so any mix-up of sentence order or H0 rows shows.
LENGTHS = [3, 1, 6, 2, 4]
IC, OC = 5, 4


def case(seed: int, has_h0: bool) -> dict:
    """Random float32 inputs, Paddle's way: weights small (scale 0.1) so that relu and
    identity stay bounded over the steps."""
    rng = np.random.default_rng(seed)
    f32 = lambda *shape, scale=1.0: (scale * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    return {
        "x": f32(sum(LENGTHS), IC),
        "weight_x": f32(IC, 3 * OC, scale=0.3),
        "weight": f32(OC, 3 * OC, scale=0.3),  # Paddle's flat layout, not a plain matrix
        "bias": f32(1, 3 * OC, scale=0.1),
        "h0": f32(len(LENGTHS), OC, scale=0.5) if has_h0 else None,
    }


def check(impl, seed, *, has_h0, is_reverse, origin_mode, activation, gate_activation):
    c = case(seed, has_h0)
    attrs = {
        "is_reverse": is_reverse,
        "origin_mode": origin_mode,
        "activation": activation,
        "gate_activation": gate_activation,
    }
    expected = paddle_gru(c["x"], LENGTHS, c["weight_x"], c["weight"], c["bias"], c["h0"], **attrs)
    offsets = offsets_of(LENGTHS)
    hidden, last = impl(
        c["x"],
        c["weight_x"],
        paddle_weight_h_to_canonical(c["weight"]),
        c["bias"][0],
        h0=c["h0"],
        offsets=offsets,
        layout="lod",
        direction="reverse" if is_reverse else "forward",
        linear_before_reset=False,
        origin_mode=origin_mode,
        activation=activation,
        gate_activation=gate_activation,
    )
    assert hidden.shape == expected.shape == (sum(LENGTHS), OC)
    # Each within its error bound of the formula (tests/helpers/error_bounds.py): Paddle's, and the
    # kernel's (the float64 reference's own is nil next to them).
    bound = sum(
        gru_bound(
            c["x"], c["weight_x"], paddle_weight_h_to_canonical(c["weight"]), c["bias"][0],
            h0=c["h0"], lengths=LENGTHS, reverse=is_reverse, origin_mode=origin_mode,
            activation=activation, gate_activation=gate_activation, lib=lib,
        )[1]
        for lib in [PADDLE] + ([FUSEBRIDGE] if impl is _kernel else [])
    )  # fmt: skip
    assert_within(hidden, expected, bound, "hidden")
    # Paddle has no last-state output: it is the row of each sentence's final step, which for
    # is_reverse is the sentence's first word.
    final_rows = offsets[:-1] if is_reverse else offsets[1:] - 1
    assert last.shape == (1, len(LENGTHS), OC)
    assert_within(last[0], expected[final_rows], bound[final_rows], "last")


@pytest.mark.parametrize("has_h0", [False, True], ids=["zero_h0", "h0"])
@pytest.mark.parametrize("is_reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("origin_mode", [False, True], ids=["paddle_mode", "origin_mode"])
def test_modes_directions_and_h0(impl, has_h0, is_reverse, origin_mode):
    check(
        impl,
        seed=4 * has_h0 + 2 * is_reverse + origin_mode,
        has_h0=has_h0,
        is_reverse=is_reverse,
        origin_mode=origin_mode,
        activation="tanh",
        gate_activation="sigmoid",
    )


@pytest.mark.parametrize(
    ("activation", "gate_activation"), list(itertools.product(ACTIVATIONS, ACTIVATIONS))
)
def test_activations(impl, activation, gate_activation):
    # Alternate the modes too, so that each formula meets non-sigmoid gates somewhere.
    i = ACTIVATIONS.index(activation) * 4 + ACTIVATIONS.index(gate_activation)
    check(
        impl,
        seed=100 + i,
        has_h0=True,
        is_reverse=bool(i % 2),
        origin_mode=bool(i // 2 % 2),
        activation=activation,
        gate_activation=gate_activation,
    )
