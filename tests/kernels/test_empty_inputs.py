"""Every kernel on empty input (issue 31): 0 rows, 0 words, 0 steps, 0 sentences, empty
sentences among others. Each returns arrays of the shapes its formula gives, equal to the
NumPy reference (kernels/reference.py); what an empty input leaves non-empty (a GRU's last
state, a pooled row, a mask of shared axes) is what the formula says of it."""

from __future__ import annotations

import numpy as np
import pytest

from fusebridge import kernels
from fusebridge.kernels import reference

RNG = np.random.default_rng(4)
IC, OC = 8, 4


def _weights(d: int = 2):
    wx = RNG.standard_normal((d, IC, 3 * OC)).astype(np.float32) * 0.3
    wh = RNG.standard_normal((d, OC, 3 * OC)).astype(np.float32) * 0.3
    return wx, wh


@pytest.mark.parametrize(
    "layout, shape, lengths",
    [
        ("lod", (0, IC), [0, 0, 0]),  # sentences with no word
        ("lod", (0, IC), []),  # no sentence
        ("lod", (6, IC), [0, 4, 0, 2]),  # empty sentences among others
        ("tnc", (0, 3, IC), None),  # 0 steps
        ("tnc", (5, 0, IC), None),  # 0 sequences
        ("tnc", (4, 3, IC), [0, 4, 0]),
        ("ntc", (3, 0, IC), None),
        ("ntc", (0, 5, IC), None),
    ],
)
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_fusion_gru(each_isa, layout, shape, lengths, direction):
    d = 2 if direction == "bidirectional" else 1
    wx, wh = _weights(d)
    x = RNG.standard_normal(shape).astype(np.float32)
    if layout == "lod":
        n, sequences = len(lengths), {"offsets": np.cumsum([0, *lengths])}
    else:
        n = shape[1] if layout == "tnc" else shape[0]
        t = shape[0] if layout == "tnc" else shape[1]
        sequences = {"seq_lens": np.array(lengths if lengths is not None else [t] * n)}
    h0 = RNG.standard_normal((d, n, OC)).astype(np.float32)
    got, last = kernels.fusion_gru(
        x, wx, wh, h0=h0, layout=layout, direction=direction, return_last=True, **sequences
    )
    want, want_last = reference.gru(
        x, wx, wh, h0=h0, layout=layout, direction=direction, **sequences
    )
    assert got.shape == want.shape and last.shape == want_last.shape == (d, n, OC)
    # Empty sentences do no arithmetic: their state is h0, bit for bit.
    steps = lengths if lengths is not None else [shape[0] if layout == "tnc" else shape[1]] * n
    empty = [i for i in range(n) if steps[i] == 0]
    np.testing.assert_array_equal(last[:, empty], h0[:, empty])
    # the words that are there, within test_gru.py's bound
    tol = 2e-5 * max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=tol)
    np.testing.assert_allclose(last, want_last, rtol=2e-5, atol=tol)


@pytest.mark.parametrize(
    "shape, axes", [((0, 8), None), ((0, 8), (0,)), ((3, 0), (1,)), ((0,), None)]
)
def test_dropout(each_isa, shape, axes):
    x = np.zeros(shape, np.float32)
    y, mask = kernels.dropout(x, 0.3, seed=7, axes=axes, return_mask=True)
    mask_shape = tuple(1 if a in (axes or ()) else s for a, s in enumerate(shape))
    want_y, want_mask = reference.dropout(x, 0.3, seed=7, mask_shape=mask_shape)
    assert y.shape == shape and np.array_equal(mask, want_mask)
    assert np.array_equal(y, want_y)
    dx = kernels.dropout_backward(x, 0.3, mask=mask, axes=axes)
    assert dx.shape == shape
    assert np.array_equal(dx, kernels.dropout_backward(x, 0.3, seed=7, axes=axes))


@pytest.mark.parametrize("shape", [(0, 8), (3, 0), (0, 0)])
def test_softmax_and_softmax_dropout(each_isa, shape):
    x = np.zeros(shape, np.float32)
    assert kernels.softmax(x).shape == shape
    y, mask = kernels.softmax_dropout(x, 0.3, seed=1, return_mask=True)
    assert y.shape == shape and mask.size == 0
    dx = kernels.softmax_dropout_backward(x, 0.3, probs=y, mask=mask)
    assert dx.shape == shape


@pytest.mark.parametrize("m, k, n", [(0, 8, 4), (3, 0, 4), (3, 8, 0), (0, 0, 0)])
def test_matmul_and_matmul_dropout(m, k, n):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b  # inner size 0: zeros
    np.testing.assert_array_equal(kernels.matmul(a, b), want)
    np.testing.assert_array_equal(kernels.sgemm(a, b), want)
    y, mask = kernels.matmul_dropout(a, b, 0.3, seed=2, return_mask=True)
    _, want_mask = reference.dropout(np.zeros((m, n), np.float32), 0.3, seed=2)
    assert np.array_equal(mask, want_mask)
    np.testing.assert_array_equal(y, reference.dropout(want.astype(np.float32), 0.3, seed=2)[0])
    da, db = kernels.matmul_dropout_backward(np.ones((m, n), np.float32), a, b, 0.3, mask=mask)[:2]
    assert da.shape == a.shape and db.shape == b.shape


@pytest.mark.parametrize("lengths", [[], [0, 0], [0, 3, 0, 2]])
def test_crf_decoding(lengths):
    tags = 4
    emission = RNG.standard_normal((sum(lengths), tags)).astype(np.float32)
    transition = RNG.standard_normal((tags + 2, tags)).astype(np.float32)
    offsets = np.cumsum([0, *lengths])
    got = kernels.crf_decoding(emission, transition, offsets)
    np.testing.assert_array_equal(got, reference.crf_decoding(emission, transition, offsets))


@pytest.mark.parametrize("pool", ["SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST"])
@pytest.mark.parametrize("lengths", [[], [0, 0], [0, 3, 0, 2]])
def test_sequence_pool(pool, lengths):
    x = RNG.standard_normal((sum(lengths), 5)).astype(np.float32)
    offsets = np.cumsum([0, *lengths])
    got = kernels.sequence_pool(x, offsets, pool, pad_value=0.5)
    want = reference.sequence_pool(x, offsets, pool, pad_value=0.5)
    assert got.shape == (len(lengths), 5)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("lengths", [[], [0, 0], [0, 3, 0, 2]])
def test_lod_and_padded_reorders(lengths):
    x = RNG.standard_normal((sum(lengths), 5)).astype(np.float32)
    offsets = np.cumsum([0, *lengths])
    padded, lens = kernels.lod_to_padded(x, offsets)
    want, want_lens = reference.lod_to_padded(x, offsets)
    assert np.array_equal(padded, want) and np.array_equal(lens, want_lens)
    back, back_offsets = kernels.padded_to_lod(padded, lens)
    assert np.array_equal(back, x) and np.array_equal(back_offsets, offsets)
