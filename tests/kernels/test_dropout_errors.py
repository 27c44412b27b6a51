"""Bad input: a typed fusebridge error naming the op, the argument and what was expected,
raised before any work."""

import numpy as np
import pytest

from fusebridge import ArgumentError, ArgumentTypeError, Error, kernels

X = np.ones((4, 6), np.float32)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"p": 1.5}, ArgumentError, "p must lie in"),
        ({"p": -0.1}, ArgumentError, "p must lie in"),
        ({"p": float("nan")}, ArgumentError, "p must lie in"),
        ({"p": "0.5"}, ArgumentTypeError, "p must be a real number"),
        ({"seed": 1.5}, ArgumentTypeError, "seed must be an integer"),
        ({"seed": True}, ArgumentTypeError, "seed must be an integer"),
        ({"seed": 2**64}, ArgumentError, r"seed must lie in"),
        ({"seed": -(2**63) - 1}, ArgumentError, r"seed must lie in"),
        ({"offset": 2**70}, ArgumentError, "offset must lie in"),
        ({"axes": (2,)}, ArgumentError, "axis 2 is out of range"),
        ({"axes": (0, -2)}, ArgumentError, "repeated"),
        (
            {"noise_shape": (4, 3)},
            ArgumentError,
            r"noise_shape \(4, 3\) is not broadcastable .*\(4, 6\)",
        ),
        ({"noise_shape": (4,)}, ArgumentError, "noise_shape must have 2 entries"),
        ({"noise_shape": (1, 6), "axes": (0,)}, ArgumentError, "not both"),
        ({"mode": "sideways"}, ArgumentError, "mode must be one of"),
        # Paddle's Python API spelling is the frontends' business, not the kernels'.
        ({"mode": "downscale_in_infer"}, ArgumentError, "mode must be one of"),
        ({"mode": ["upscale_in_train"]}, ArgumentError, "mode must be one of"),
        ({"training": "no"}, ArgumentTypeError, "training must be True or False"),
        ({"shard": ((4, 6), (1, 0))}, ArgumentError, "outside its global shape on axis 0"),
        ({"shard": ((4, 6), (0,))}, ArgumentError, "shard start must have 2 entries"),
        ({"shard": ((4, 6), (0, -1))}, ArgumentError, "must not be negative"),
        ({"shard": (4, 6)}, ArgumentTypeError, "sequence of integers"),
        ({"out": np.ones((4, 5), np.float32)}, ArgumentError, "out must have shape"),
        ({"out": np.ones((4, 6), np.float64)}, ArgumentError, "dtype float32"),
        ({"out": np.ones((6, 4), np.float32).T}, ArgumentError, "C-contiguous"),
        ({"out": [0.0] * 24}, ArgumentTypeError, "out must be a numpy array"),
    ],
)
def test_dropout_rejects(kwargs, error, match):
    args = {"p": 0.5, "seed": 1, **kwargs}
    with pytest.raises(error, match=match) as info:
        kernels.dropout(X, **args)
    assert isinstance(info.value, Error) and str(info.value).startswith("dropout: ")


def test_integer_input_is_rejected():
    with pytest.raises(
        ArgumentTypeError, match="x must be float32, float16, bfloat16 or float64, got int32"
    ):
        kernels.dropout(np.ones(3, np.int32), 0.5, seed=1)


def test_partially_overlapping_out_is_rejected():
    buf = np.ones(20, np.float32)
    with pytest.raises(ArgumentError, match="overlaps"):
        kernels.dropout(buf[:10], 0.5, seed=1, out=buf[5:15])


def test_backward_mask_checks():
    _, mask = kernels.dropout(X, 0.5, seed=1, return_mask=True)
    with pytest.raises(ArgumentError, match=r"exactly one of mask= .* or seed="):
        kernels.dropout_backward(X, 0.5)
    with pytest.raises(ArgumentError, match="exactly one"):
        kernels.dropout_backward(X, 0.5, mask=mask, seed=1)
    with pytest.raises(ArgumentTypeError, match="mask must be the uint8 array"):
        kernels.dropout_backward(X, 0.5, mask=mask.astype(np.int32))
    with pytest.raises(ArgumentError, match="mask must be 1-D with 3 bytes"):
        kernels.dropout_backward(X, 0.5, mask=mask[:2])
    # dy of another shape than the mask was made for: the byte count tells them apart.
    with pytest.raises(
        ArgumentError, match=r"mask must be 1-D with 4 bytes for dy of shape \(5, 6\)"
    ):
        kernels.dropout_backward(np.ones((5, 6), np.float32), 0.5, mask=mask)


def test_mask_only_checks():
    with pytest.raises(ArgumentError, match="dropout_mask: p"):
        kernels.dropout_mask((3,), 2.0, seed=1)
    with pytest.raises(ArgumentError, match="dropout_mask: shape must not be negative"):
        kernels.dropout_mask((-3,), 0.5, seed=1)
