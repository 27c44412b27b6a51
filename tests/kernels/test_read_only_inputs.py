"""Read-only arrays (flags.writeable False, np.frombuffer of bytes, broadcast views) are
legitimate inputs wherever a kernel only reads them: every public kernel accepts them and gives
what it gives for a writeable copy. Before, nanobind refused them with an untyped "incompatible
function arguments" TypeError. Arrays a kernel writes (`out`) must be writeable, with a typed
error; any other dtype, shape or layout is a fusebridge error, never nanobind's."""

import numpy as np
import pytest
from helpers.compiled_primitives import dropout_primitive

from fusebridge import ArgumentError, Error, kernels
from fusebridge.integrations.mxnet.rnn_params import mxnet_rnn_params_to_canonical
from fusebridge.integrations.paddle.weight_layouts import paddle_weight_h_to_canonical

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)).astype(np.float32)
TRANSITION = RNG.standard_normal((8, 6)).astype(np.float32)
OFFSETS = np.array([0, 1, 4])
MASK = kernels.dropout(X, 0.5, seed=1, return_mask=True)[1]
MM_MASK = kernels.matmul_dropout(X, X.T, 0.5, seed=1, return_mask=True)[1]
SM_MASK = kernels.softmax_dropout(X, 0.5, seed=1, return_mask=True)[1]
W6 = np.ones((6, 12), np.float32)  # wx, IC = 6, OC = 4
W4 = np.ones((4, 12), np.float32) / 8  # wh
B = np.ones(12, np.float32)

# name -> (kernel, its array arguments, its other arguments)
KERNELS = {
    "sgemm": (kernels.sgemm, {"a": X, "b": X.T}, {}),
    "dropout": (kernels.dropout, {"x": X}, {"p": 0.5, "seed": 1, "return_mask": True}),
    "dropout_f16": (kernels.dropout, {"x": X.astype(np.float16)}, {"p": 0.5, "seed": 1}),
    "dropout_axes": (kernels.dropout, {"x": X}, {"p": 0.5, "seed": 1, "axes": (0,)}),
    "dropout_backward": (kernels.dropout_backward, {"dy": X, "mask": MASK}, {"p": 0.5}),
    "dropout_backward_seed": (kernels.dropout_backward, {"dy": X}, {"p": 0.5, "seed": 1}),
    "matmul": (kernels.matmul, {"a": X, "b": X.T, "bias": B[:4]}, {}),
    "matmul_dropout": (kernels.matmul_dropout, {"a": X, "b": X.T}, {"p": 0.5, "seed": 1}),
    "matmul_dropout_backward": (
        kernels.matmul_dropout_backward,
        {"dy": np.ones((4, 4), np.float32), "a": X, "b": X.T, "mask": MM_MASK},
        {"p": 0.5},
    ),
    "softmax": (kernels.softmax, {"x": X}, {}),
    "softmax_dropout": (kernels.softmax_dropout, {"x": X}, {"p": 0.5, "seed": 1}),
    "softmax_dropout_backward": (
        kernels.softmax_dropout_backward,
        {"dy": X, "x": X, "mask": SM_MASK},
        {"p": 0.5},
    ),
    "softmax_dropout_backward_axis0": (
        kernels.softmax_dropout_backward,
        {"dy": X, "probs": X},
        {"p": 0.5, "seed": 3, "axis": 0},
    ),
    "philox4x32": (
        kernels.philox4x32,
        {
            "counter": np.arange(12, dtype=np.uint32).reshape(3, 4),
            "key": np.ones((3, 2), np.uint32),
        },
        {},
    ),
    "crf_decoding": (
        kernels.crf_decoding,
        {
            "emission": X,
            "transition": TRANSITION,
            "offsets": OFFSETS,
            "label": np.zeros((4, 1), np.int64),
        },
        {},
    ),
    "sequence_pool": (kernels.sequence_pool, {"x": X, "offsets": OFFSETS}, {"pooltype": "MAX"}),
    "lod_to_padded": (kernels.lod_to_padded, {"x": X, "offsets": OFFSETS}, {}),
    "padded_to_lod": (
        kernels.padded_to_lod,
        {"padded": X.reshape(2, 2, 6), "seq_lens": np.array([1, 2])},
        {},
    ),
    "pack_gru_weights": (
        kernels.pack_gru_weights,
        {"wx": W6, "wh": W4, "bias": B, "bias_h": B},
        {},
    ),
    "fusion_gru": (
        kernels.fusion_gru,
        {
            "x": X,
            "wx": W6,
            "wh": W4,
            "bias": B,
            "offsets": OFFSETS,
            "h0": np.ones((2, 4), np.float32),
        },
        {"return_last": True},
    ),
    "fusion_gru_tnc": (
        kernels.fusion_gru,
        {"x": X.reshape(2, 2, 6), "wx": W6, "wh": W4, "seq_lens": np.array([2, 1])},
        {"layout": "tnc", "direction": "forward"},
    ),
    "paddle_weight_h_to_canonical": (paddle_weight_h_to_canonical, {"weight_h": W4}, {}),
    "negate_update_gate": (kernels.negate_update_gate, {"wx": W6, "wh": W4, "bias": B}, {}),
    "mxnet_rnn_params_to_canonical": (
        mxnet_rnn_params_to_canonical,
        {"params": np.arange(3 * 4 * 6 + 3 * 4 * 4 + 24, dtype=np.float32)},
        {"input_size": 6, "hidden_size": 4},
    ),
}


def read_only(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def from_bytes(a: np.ndarray) -> np.ndarray:
    """np.frombuffer of an immutable bytes object: read-only, and cannot be made writeable."""
    a = np.ascontiguousarray(a)
    return np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape)


def outputs(result: object) -> list[np.ndarray]:
    if result is None:
        return []
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in outputs(r)]
    return [getattr(result, f) for f in ("wx", "wh", "bias_x", "bias_hc")]  # GRUWeights


@pytest.mark.parametrize("make", [read_only, from_bytes])
@pytest.mark.parametrize("name", KERNELS)
def test_read_only_inputs_are_accepted(name, make):
    kernel, arrays, rest = KERNELS[name]
    want = kernel(**arrays, **rest)
    frozen = {k: make(v) for k, v in arrays.items()}
    assert not any(a.flags.writeable for a in frozen.values())
    got = kernel(**frozen, **rest)
    for g, w in zip(outputs(got), outputs(want), strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_read_only_out_is_a_typed_error():
    for kernel, extra in ((kernels.dropout, {"p": 0.5, "seed": 1}), (kernels.softmax, {})):
        with pytest.raises(ArgumentError, match="out must be a writeable C-contiguous array"):
            kernel(X, out=read_only(X), **extra)
    with pytest.raises(ArgumentError, match=r"^fusion_gru: out must be a writeable"):
        kernels.fusion_gru(X, W6, W4, offsets=OFFSETS, out=read_only(np.zeros((4, 4), np.float32)))


def variants(a: np.ndarray):
    """Arrays of other dtypes, shapes and layouts, and things that are not arrays."""
    yield "non-contiguous", a[..., ::2]
    yield "fortran", np.asfortranarray(a)
    for dtype in (np.float64, np.float16, np.int32, np.uint8, np.bool_, np.complex64, object):
        yield np.dtype(dtype).name, a.astype(dtype)
    yield "0-d", np.asarray(a.flat[0])
    yield "one more axis", a[None]
    yield "list", a.tolist()
    yield "None", None
    yield "str", "abc"
    yield "4 PiB broadcast", np.broadcast_to(a.flat[0], (2**40, 2**10))


@pytest.mark.parametrize("name", KERNELS)
def test_any_other_array_is_a_fusebridge_error_or_works(name):
    """Never nanobind's untyped TypeError, numpy's errors or a MemoryError."""
    kernel, arrays, rest = KERNELS[name]
    for arg, base in arrays.items():
        for label, value in variants(base):
            try:
                kernel(**{**arrays, arg: value}, **rest)
            except Error:
                pass
            except Exception as exc:  # pragma: no cover - the failure message
                pytest.fail(f"{name}({arg}={label}) raised {type(exc).__name__}: {exc}")


def test_compiled_outputs_must_be_writeable_and_contiguous():
    """For callers of _C: an output nanobind would convert (copy) would lose the results, so it
    is refused rather than written to a temporary."""
    prim = dropout_primitive([4])
    with pytest.raises(TypeError):
        prim.forward(np.ones(4, np.float32), np.zeros((4, 2), np.float32)[:, 0], None, 0, 0)
    y = np.zeros(4, np.float32)
    prim.forward(read_only(np.ones(4, np.float32)), y, None, 0, 0)  # a read-only input is fine
    with pytest.raises(ArgumentError, match="dropout: x holds 4 bytes, expected 16"):
        prim.forward(np.ones(4, np.int8), y, None, 0, 0)  # sizes in the primitive's own items
