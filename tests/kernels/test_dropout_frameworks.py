"""Framework semantics. Bits differ between libraries (Paddle and MXNet use other
generators), so these compare what each mode does with the kept and dropped elements."""

import numpy as np
import pytest
from helpers.error_bounds import U, assert_within

from fusebridge import kernels
from fusebridge.kernels.reference import unpack_mask

X = (np.random.default_rng(3).standard_normal((64, 96)) + 4).astype(np.float32)  # no zeros


@pytest.fixture(scope="module")
def paddle():
    paddle = pytest.importorskip("paddle")
    paddle.seed(1234)
    return paddle


@pytest.mark.paddle
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_paddle_upscale_in_train(paddle, p):
    theirs = paddle.nn.functional.dropout(
        paddle.to_tensor(X), p, training=True, mode="upscale_in_train"
    ).numpy()
    ours = kernels.dropout(X, p, seed=5, mode="upscale_in_train")
    exact = X.astype(np.float64) / (1 - np.float64(np.float32(p)))
    for y in (theirs, ours):  # every element is either 0 or x / (1 - p), in float32
        kept = y != 0
        # x times the rounded scale 1 / (1 - p), or x / (1 - p): two roundings at most
        assert_within(y[kept], exact[kept], 2 * U * np.abs(exact[kept]))
        assert abs(kept.mean() - (1 - p)) < 0.05
    both = (theirs != 0) & (ours != 0)
    assert_within(ours[both], theirs[both], 4 * U * np.abs(exact[both]))


@pytest.mark.paddle
@pytest.mark.parametrize("p", [0.2, 0.6])
def test_paddle_downgrade_in_infer(paddle, p):
    train = paddle.nn.functional.dropout(
        paddle.to_tensor(X), p, training=True, mode="downscale_in_infer"
    ).numpy()
    ours = kernels.dropout(X, p, seed=6, mode="downgrade_in_infer")
    for y in (train, ours):  # training keeps x unscaled
        kept = y != 0
        np.testing.assert_array_equal(y[kept], X[kept])
        assert abs(kept.mean() - (1 - p)) < 0.05
    infer = paddle.nn.functional.dropout(
        paddle.to_tensor(X), p, training=False, mode="downscale_in_infer"
    ).numpy()
    ours_infer = kernels.dropout(X, p, seed=6, mode="downgrade_in_infer", training=False)
    # x * (1 - p): (1 - p) and the product rounded, each side
    assert_within(ours_infer, infer, 4 * U * np.abs(X.astype(np.float64) * (1 - p)))
    up_infer = paddle.nn.functional.dropout(
        paddle.to_tensor(X), p, training=False, mode="upscale_in_train"
    ).numpy()
    np.testing.assert_array_equal(kernels.dropout(X, p, seed=6, training=False), up_infer)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 2), (2,)])
def test_mxnet_axes_share_the_mask(axes):
    """MXNet Dropout(axes=...): the mask has size 1 on `axes` and is broadcast over them
    (MXNet 1.9.1); kept values are x / (1 - p), dropped exactly 0."""
    x = (np.random.default_rng(4).standard_normal((6, 7, 40)) + 5).astype(np.float32)
    p = 0.4
    y, mask = kernels.dropout(x, p, seed=8, axes=axes, return_mask=True)
    mask_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    keep = unpack_mask(mask, mask_shape)
    assert 0 < keep.mean() < 1
    np.testing.assert_array_equal(y != 0, np.broadcast_to(keep, x.shape))
    kept = y != 0
    # the float32 scale, and one rounding of each product on either side
    assert_within(y[kept], x[kept] * np.float32(1 / (1 - p)), 2 * U * np.abs(y[kept]))
    # The same sharing given TensorFlow's way.
    np.testing.assert_array_equal(kernels.dropout(x, p, seed=8, noise_shape=mask_shape), y)
