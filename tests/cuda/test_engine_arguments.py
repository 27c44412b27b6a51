"""The cuda engine's argument checks, run on host arrays through a launcher that fails if
anything is launched: every bad argument is refused with the engine's typed error, naming the
op and the value, before any kernel runs or any memory is taken."""

from __future__ import annotations

import numpy as np
import pytest

from fusebridge import cuda
from fusebridge.cuda import device
from fusebridge.errors import ArgumentError, ArgumentTypeError


class NoLaunch:
    xp = np
    device = "no-launch"

    def launch(self, *args):
        raise AssertionError("a kernel was launched for bad arguments")

    def empty(self, shape, dtype, *, zeros=False):
        raise AssertionError("memory was taken for bad arguments")

    def upload(self, host):
        return host.copy()


@pytest.fixture(autouse=True)
def no_launch():
    with device.use_launcher(NoLaunch()):
        yield


X = np.ones((4, 8), np.float32)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: cuda.dropout(X.astype(np.float64), 0.5, seed=1),
            ArgumentTypeError,
            "dropout: x must be float32 or float16 or bfloat16, got float64",
        ),
        (lambda: cuda.dropout(X, 1.5, seed=1), ArgumentError, r"p must lie in \[0, 1\]"),
        (lambda: cuda.dropout(X, 0.5, seed=2**64), ArgumentError, "seed must lie in"),
        (lambda: cuda.dropout(X, 0.5, seed=1, mode="always"), ArgumentError, "mode must be"),
        (lambda: cuda.dropout(X, 0.5, seed=1, axes=(2,)), ArgumentError, "axis 2 is out of range"),
        (
            lambda: cuda.dropout(X, 0.5, seed=1, noise_shape=(4, 3)),
            ArgumentError,
            "not broadcastable",
        ),
        (
            lambda: cuda.dropout(X, 0.5, seed=1, shard=((4, 8), (1, 0))),
            ArgumentError,
            "outside its global shape",
        ),
        (
            lambda: cuda.dropout(X, 0.5, seed=np.zeros(2, np.uint64)),
            ArgumentError,
            "seed as a device array must hold one uint64",
        ),
        (
            lambda: cuda.dropout(X, 0.5, seed=1, out=np.ones((4, 8), np.float16)),
            ArgumentError,
            "out must have shape",
        ),
        (lambda: cuda.dropout(X, 0.5, seed=1, out=X[:, ::2]), ArgumentError, "must have shape"),
        (lambda: cuda.dropout(X.T, 0.5, seed=1), ArgumentError, "C-contiguous"),
        (lambda: cuda.dropout_backward(X, 0.5), ArgumentError, "exactly one of mask="),
        (
            lambda: cuda.dropout_backward(X, 0.5, mask=np.zeros(3, np.uint8)),
            ArgumentError,
            "mask must be the 1-D uint8 array of 4 bytes",
        ),
        (
            lambda: cuda.softmax_dropout(X.astype(np.float16), 0.5, seed=1),
            ArgumentTypeError,
            "softmax_dropout: x must be float32",
        ),
        (
            lambda: cuda.softmax_dropout(X, 0.5, seed=1, shard=((4, 16), (0, 0))),
            ArgumentError,
            "whole rows along the softmax axis",
        ),
        (lambda: cuda.softmax_dropout_backward(X, 0.5, seed=1), ArgumentError, "exactly one of x="),
        (lambda: cuda.matmul_dropout(X, X, 0.5, seed=1), ArgumentError, "must chain"),
        (
            lambda: cuda.matmul(X, X.T.copy(), bias=np.ones(3, np.float32)),
            ArgumentError,
            r"bias must have shape \(N,\) = \(4,\)",
        ),
    ],
)
def test_bad_arguments_are_refused_before_any_work(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_out_overlapping_the_input_is_refused():
    buf = np.ones(64, np.float32)
    with pytest.raises(ArgumentError, match="out overlaps the input"):
        cuda.dropout(buf[:32], 0.5, seed=1, out=buf[16:48])


def test_a_layout_the_index_maps_cannot_hold_is_named():
    """A mask shared over every other axis of an 18-D tensor leaves 18 dimensions that do not
    merge: refused by name, not launched with a wrong map."""
    x = np.ones((2,) * 18, np.float32)
    with pytest.raises(ArgumentError, match=r"dropout: the layout .* the cuda engine's index maps"):
        cuda.dropout(x, 0.5, seed=1, axes=tuple(range(1, 18, 2)))


def test_a_size_beyond_any_buffer_is_refused_before_allocation():
    with pytest.raises(ArgumentError, match="more than any buffer can hold"):
        cuda.dropout_mask((2**30, 2**30), 0.5, seed=1)


def test_a_0d_host_array_is_a_host_seed_not_a_device_scalar():
    """numpy's 0-d arrays carry __dlpack__ too; as seeds they are integers, as on the cpu
    engine, and one-element device arrays are read by the kernel."""
    from fusebridge.cuda import arguments

    launcher = device.current_launcher()
    assert arguments.counter(launcher, np.array(7), "dropout", "seed") == (7, None)
    assert arguments.counter(launcher, np.uint64(2**63), "dropout", "seed") == (2**63, None)
    value, on_device = arguments.counter(launcher, np.array([7], np.uint64), "dropout", "seed")
    assert value == 0 and on_device.tolist() == [7]
