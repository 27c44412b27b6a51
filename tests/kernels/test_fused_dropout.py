"""matmul_dropout and softmax_dropout: bit for bit the plain op (`matmul`, `softmax`: the same
BLAS calls, the same arithmetic) followed by the standalone dropout, on every ISA path, batched,
transposed, with bias and shards; backward from the mask == recomputed == an independent
dy * mask * scale from reference.py's NumPy Philox; typed errors."""

import threading

import numpy as np
import pytest
from helpers.error_bounds import gemm_error_bound
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebridge import ArgumentError, ArgumentTypeError, Error, kernels
from fusebridge.kernels import core, reference

SEEDS = st.one_of(st.sampled_from([0, -1, 2**63, 0xDEADBEEFCAFEF00D]), st.integers(0, 2**64 - 1))
OFFSETS = st.one_of(st.sampled_from([0, 1, 2**32 - 1, 2**64 - 1]), st.integers(0, 2**64 - 1))
PS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.1, 1e-7]), st.floats(0.0, 1.0))
MODES = st.sampled_from(["upscale_in_train", "downgrade_in_infer"])


def examples(n):
    """n examples, or fewer where the profile asks for fewer (the sanitizer runs)."""
    return settings(max_examples=min(n, settings.default.max_examples))


def data(shape, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def same_bits(a, b):
    """Equal bit patterns (so -0 vs +0 and NaN payloads count)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def keep_scale(p, mode):
    p32 = float(np.float32(p))
    return float(np.float32(1.0 / (1.0 - p32))) if mode == "upscale_in_train" and p32 < 1 else 1.0


def ref_mask(shape, p, seed, offset, shard=None):
    """reference.py's keep mask (bool, `shape`) for a block of the output."""
    x = np.zeros(shape, np.float32)
    _, packed = reference.dropout(x, p, seed, offset, shard=shard)
    return reference.unpack_mask(packed, shape)


# ---- softmax --------------------------------------------------------------------------------


@st.composite
def softmax_cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = list(draw(st.lists(st.integers(0, 7), min_size=ndim, max_size=ndim)))
    axis = draw(st.integers(-ndim, ndim - 1))
    if draw(st.booleans()):  # a long softmax axis (or another long axis), past the SIMD tails
        shape[draw(st.sampled_from([axis % ndim, draw(st.integers(0, ndim - 1))]))] = draw(
            st.integers(17, 700)
        )
    return {
        "shape": tuple(shape),
        "axis": axis,
        "p": draw(PS),
        "seed": draw(SEEDS),
        "offset": draw(OFFSETS),
        "mode": draw(MODES),
        "training": draw(st.booleans()),
    }


@examples(100)
@given(case=softmax_cases())
def test_softmax_dropout_is_dropout_of_softmax(case, each_isa):
    c = case
    x = data(c["shape"])
    kw = {"seed": c["seed"], "offset": c["offset"], "mode": c["mode"], "training": c["training"]}
    y, mask = kernels.softmax_dropout(x, c["p"], axis=c["axis"], return_mask=True, **kw)
    y_ref, mask_ref = kernels.dropout(kernels.softmax(x, c["axis"]), c["p"], return_mask=True, **kw)
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)


def test_softmax_same_bits_on_every_isa_and_accurate(each_isa):
    x = data((5, 3, 333), seed=1, scale=10.0)
    x[0, 0, :4] = [-np.inf, -100.0, 0.0, -87.4]
    got = {axis: kernels.softmax(x, axis) for axis in (-1, 1)}
    kernels.set_isa("scalar")
    for axis, y in got.items():
        same_bits(y, kernels.softmax(x, axis))
        # Against float64 softmax of the float32 differences x - max (the rounding softmax
        # cannot avoid): a few ulp, from exp's 2 ulp and the float32 sum.
        d = (x - x.max(axis, keepdims=True)).astype(np.float64)
        ref = np.exp(d) / np.exp(d).sum(axis, keepdims=True)
        np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-38)


def test_softmax_nan_and_inf_rows():
    x = np.array([[0.0, np.nan, 1.0], [-np.inf] * 3, [1.0, np.inf, 2.0], [0.0, -np.inf, 0.0]])
    y = kernels.softmax(x.astype(np.float32))
    assert np.isnan(y[:3]).all()
    np.testing.assert_array_equal(y[3], [0.5, 0.0, 0.5])
    yd = kernels.softmax_dropout(x.astype(np.float32), 0.5, seed=3)
    same_bits(yd, kernels.dropout(y, 0.5, seed=3))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_shards_equal_the_whole(axis, each_isa):
    x = data((6, 9, 70), seed=2)
    kw = {"seed": 77, "offset": 5, "axis": axis}
    whole, whole_mask = kernels.softmax_dropout(x, 0.3, return_mask=True, **kw)
    whole_keep = reference.unpack_mask(whole_mask, x.shape)
    # Blocks along the two axes that are not the softmax axis.
    free = [d for d in range(3) if d != axis % 3]
    for cut in [(1, 4), (2, 3)]:
        index = [slice(None)] * 3
        index[free[0]] = slice(cut[0], cut[1])
        index[free[1]] = slice(cut[0] + 1, None)
        index = tuple(index)
        start = tuple(s.start or 0 for s in index)
        y, mask = kernels.softmax_dropout(
            x[index], 0.3, shard=(x.shape, start), return_mask=True, **kw
        )
        same_bits(y, whole[index])
        np.testing.assert_array_equal(reference.unpack_mask(mask, y.shape), whole_keep[index])
        np.testing.assert_array_equal(
            reference.unpack_mask(mask, y.shape), ref_mask(y.shape, 0.3, 77, 5, (x.shape, start))
        )
        # The block's mask goes back into the block's backward.
        dy = data(y.shape, seed=3)
        kb = {"x": x[index], "axis": axis, "shard": (x.shape, start)}
        same_bits(
            kernels.softmax_dropout_backward(dy, 0.3, mask=mask, **kb),
            kernels.softmax_dropout_backward(dy, 0.3, seed=77, offset=5, **kb),
        )


@examples(50)
@given(case=softmax_cases())
def test_softmax_backward_mask_recomputed_and_independent(case, each_isa):
    c = case
    x, dy = data(c["shape"], seed=4), data(c["shape"], seed=5)
    kw = {"axis": c["axis"], "mode": c["mode"]}
    _, mask = kernels.softmax_dropout(
        x, c["p"], seed=c["seed"], offset=c["offset"], return_mask=True, **kw
    )
    from_mask = kernels.softmax_dropout_backward(dy, c["p"], x=x, mask=mask, **kw)
    recomputed = kernels.softmax_dropout_backward(
        dy, c["p"], x=x, seed=c["seed"], offset=c["offset"], **kw
    )
    probs = kernels.softmax(x, c["axis"])
    given_probs = kernels.softmax_dropout_backward(dy, c["p"], probs=probs, mask=mask, **kw)
    same_bits(from_mask, recomputed)
    same_bits(from_mask, given_probs)
    # Independent: the reference's keep mask, then softmax's backward in float64.
    keep = ref_mask(x.shape, c["p"], c["seed"], c["offset"])
    g = np.where(keep, dy * np.float32(keep_scale(c["p"], c["mode"])), 0).astype(np.float64)
    p64 = probs.astype(np.float64)
    expect = p64 * (g - (g * p64).sum(c["axis"], keepdims=True))
    np.testing.assert_allclose(from_mask, expect, rtol=1e-4, atol=1e-5)


def test_softmax_in_place_and_threads(each_isa, threads):
    x = data((40, 257), seed=6)
    expect, mask = kernels.softmax_dropout(x, 0.25, seed=9, return_mask=True)
    for n in (1, 2, 3):
        threads(n)
        same_bits(kernels.softmax_dropout(x, 0.25, seed=9), expect)
    buf = x.copy()
    assert kernels.softmax_dropout(buf, 0.25, seed=9, out=buf) is buf
    same_bits(buf, expect)
    dy = data(x.shape, seed=7)
    dx = kernels.softmax_dropout_backward(dy, 0.25, x=x, mask=mask)
    inplace = dy.copy()
    kernels.softmax_dropout_backward(inplace, 0.25, x=x, mask=mask, out=inplace)
    same_bits(inplace, dx)


def test_softmax_large_streaming_path(each_isa):
    if each_isa == "scalar":
        pytest.skip("the scalar path is checked on smaller shapes")
    x = data((2048, 1024), seed=8)  # 8 MiB: the output bypasses the caches
    y, mask = kernels.softmax_dropout(x, 0.1, seed=1, offset=2, return_mask=True)
    same_bits(y, kernels.dropout(kernels.softmax(x), 0.1, seed=1, offset=2))
    np.testing.assert_array_equal(mask, kernels.dropout_mask(x.shape, 0.1, seed=1, offset=2))


# ---- matmul ---------------------------------------------------------------------------------


@st.composite
def matmul_cases(draw):
    m, n, k = (draw(st.integers(0, 9)) for _ in range(3))
    if draw(st.booleans()):  # sizes past the SIMD tails and through BLAS's blocked paths
        m, n, k = (draw(st.integers(1, 200)) for _ in range(3))
    batch_a = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    # b's batch broadcasts against a's: equal, 1, or missing on each axis.
    batch_b = tuple(
        draw(st.sampled_from([d, 1])) for d in batch_a[len(batch_a) - draw(st.integers(0, 2)) :]
    )
    if draw(st.booleans()):
        batch_a, batch_b = batch_b, batch_a
    ta, tb = draw(st.booleans()), draw(st.booleans())
    return {
        "a": (*batch_a, *((k, m) if ta else (m, k))),
        "b": (*batch_b, *((n, k) if tb else (k, n))),
        "transpose_a": ta,
        "transpose_b": tb,
        "bias": draw(st.booleans()),
        "n": n,
        "p": draw(PS),
        "seed": draw(SEEDS),
        "offset": draw(OFFSETS),
        "mode": draw(MODES),
    }


def operands(c, seed=0):
    a, b = data(c["a"], seed), data(c["b"], seed + 1)
    bias = data((c["n"],), seed + 2) if c["bias"] else None
    return a, b, bias


def np_matmul(a, b, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.matmul(
        np.swapaxes(a64, -1, -2) if ta else a64, np.swapaxes(b64, -1, -2) if tb else b64
    )


@examples(100)
@given(case=matmul_cases())
def test_matmul_dropout_is_dropout_of_matmul(case, each_isa):
    c = case
    a, b, bias = operands(c)
    t = {"transpose_a": c["transpose_a"], "transpose_b": c["transpose_b"]}
    kw = {"seed": c["seed"], "offset": c["offset"], "mode": c["mode"]}
    y, mask = kernels.matmul_dropout(a, b, c["p"], bias=bias, return_mask=True, **t, **kw)
    plain = kernels.matmul(a, b, bias=bias, **t)
    y_ref, mask_ref = kernels.dropout(plain, c["p"], return_mask=True, **kw)
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)
    # The GEMM itself against float64 NumPy, within the bound for k products (+ the bias).
    ta, tb = c["transpose_a"], c["transpose_b"]
    extra = 0 if bias is None else bias
    expect = np_matmul(a, b, ta, tb) + extra
    k = a.shape[-2] if ta else a.shape[-1]
    bound = gemm_error_bound(np_matmul(abs(a), abs(b), ta, tb) + abs(extra), k, extra_terms=1)
    assert (abs(plain - expect) <= bound).all()


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "tiles"),
    [
        ((64, 512), (512, 2048), (64, 1024)),  # big enough for two tiles (two threads)
        ((600, 100), (100, 700), (600, 352)),  # more than 2^18 outputs: column tiles
        ((512, 512), (512, 512), (256, 512)),  # square: row halves (whole rows)
        ((2, 700, 40), (40, 500), (352, 500)),  # b shared: the batches fold into the rows
        ((8, 128, 64), (8, 64, 128), (128, 128)),  # whole matrices, in strided-batch groups
    ],
)
def test_tiled_shapes(a_shape, b_shape, tiles, each_isa, threads):
    a, b = data(a_shape, 1), data(b_shape, 2)
    bias = data((b_shape[-1],), 3)
    prim = kernels.fused_dropout._matmul_primitive(
        "t", a, b, bias, False, False, 0.5, "upscale_in_train", True, None
    )[0]
    assert (prim.tile_rows, prim.tile_cols) == tiles
    y = kernels.matmul_dropout(a, b, 0.5, seed=11, bias=bias)
    plain = kernels.matmul(a, b, bias=bias)
    same_bits(y, kernels.dropout(plain, 0.5, seed=11))
    bound = gemm_error_bound(np_matmul(abs(a), abs(b), False, False) + abs(bias), a.shape[1], 1)
    assert (abs(plain - (np_matmul(a, b, False, False) + bias)) <= bound).all()
    # Tiles follow the shapes only: every thread count gives the same bits.
    for n in (1, 3):
        threads(n)
        same_bits(kernels.matmul_dropout(a, b, 0.5, seed=11, bias=bias), y)


def test_batched_equals_per_batch_calls():
    """A batched b (no folding): each matrix is the 2-D product of its own operands, whether a
    group of them went through one strided-batch call or not."""
    rng = np.random.default_rng(0)
    for shape_a, shape_b, ta, tb in [
        ((6, 37, 50), (6, 50, 29), False, False),
        ((5, 50, 37), (5, 29, 50), True, True),
        ((4, 1, 9, 8), (3, 8, 7), False, False),
    ]:
        a = rng.standard_normal(shape_a).astype(np.float32)
        b = rng.standard_normal(shape_b).astype(np.float32)
        c = kernels.matmul(a, b, transpose_a=ta, transpose_b=tb)
        for index in np.ndindex(c.shape[:-2]):
            same_bits(
                c[index],
                kernels.matmul(
                    a[batch_of(index, a)], b[batch_of(index, b)], transpose_a=ta, transpose_b=tb
                ),
            )


def batch_of(index, x):
    """The batch index of operand x that output batch `index` reads (np.matmul broadcasting)."""
    own = index[len(index) - (x.ndim - 2) :]
    return tuple(0 if n == 1 else i for i, n in zip(own, x.shape[:-2]))


def test_matmul_equals_sgemm_where_blas_makes_one_call(threads):
    """One tile and one thread: kernels.sgemm and matmul make the same single OpenBLAS call."""
    threads(1)
    for m, k, n in [(7, 5, 3), (64, 64, 64), (100, 30, 200)]:
        a, b = data((m, k), 1), data((k, n), 2)
        same_bits(kernels.matmul(a, b), kernels.sgemm(a, b))


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, True)])
def test_matmul_shards_equal_the_whole(ta, tb, each_isa):
    m, k, n = 37, 20, 150
    a, b = data((k, m) if ta else (m, k), 1), data((n, k) if tb else (k, n), 2)
    bias = data((n,), 3)
    kw = {"seed": 5, "offset": 8, "transpose_a": ta, "transpose_b": tb}
    whole, whole_mask = kernels.matmul_dropout(a, b, 0.4, bias=bias, return_mask=True, **kw)
    whole_keep = reference.unpack_mask(whole_mask, whole.shape)
    for r0, r1, c0, c1 in [(5, 20, 0, n), (0, m, 33, 97), (11, 12, 1, 149)]:
        a_blk = a[:, r0:r1] if ta else a[r0:r1]
        b_blk = b[c0:c1] if tb else b[:, c0:c1]
        shard = ((m, n), (r0, c0))
        y, mask = kernels.matmul_dropout(
            a_blk, b_blk, 0.4, bias=bias[c0:c1], shard=shard, return_mask=True, **kw
        )
        keep = reference.unpack_mask(mask, y.shape)
        np.testing.assert_array_equal(keep, whole_keep[r0:r1, c0:c1])
        np.testing.assert_array_equal(keep, ref_mask(y.shape, 0.4, 5, 8, shard))
        # The block's GEMM is its own BLAS call: exact against the block's plain product,
        # close to the whole's (OpenBLAS's bits depend on how a product is cut).
        plain = kernels.matmul(a_blk, b_blk, bias=bias[c0:c1], transpose_a=ta, transpose_b=tb)
        same_bits(y, kernels.dropout(plain, 0.4, seed=5, offset=8, shard=shard))
        np.testing.assert_allclose(y, whole[r0:r1, c0:c1], rtol=1e-5, atol=1e-4)
        dy = data(y.shape, 4)
        grads_mask = kernels.matmul_dropout_backward(
            dy, a_blk, b_blk, 0.4, mask=mask, shard=shard, transpose_a=ta, transpose_b=tb
        )
        grads_seed = kernels.matmul_dropout_backward(
            dy, a_blk, b_blk, 0.4, seed=5, offset=8, shard=shard, transpose_a=ta, transpose_b=tb
        )
        for g1, g2 in zip(grads_mask, grads_seed):
            same_bits(g1, g2)


@examples(50)
@given(case=matmul_cases())
def test_matmul_backward_mask_recomputed_and_independent(case, each_isa):
    c = case
    a, b, bias = operands(c, seed=3)
    t = {"transpose_a": c["transpose_a"], "transpose_b": c["transpose_b"], "mode": c["mode"]}
    y, mask = kernels.matmul_dropout(
        a, b, c["p"], bias=bias, seed=c["seed"], offset=c["offset"], return_mask=True, **t
    )
    dy = data(y.shape, seed=9)
    from_mask = kernels.matmul_dropout_backward(dy, a, b, c["p"], mask=mask, bias=bias, **t)
    recomputed = kernels.matmul_dropout_backward(
        dy, a, b, c["p"], seed=c["seed"], offset=c["offset"], bias=bias, **t
    )
    assert len(from_mask) == (3 if c["bias"] else 2)
    for g1, g2 in zip(from_mask, recomputed):
        same_bits(g1, g2)
    # Independent: dz from the reference's mask, gradients in float64 with np.matmul, summed
    # over broadcast batch axes.
    keep = ref_mask(y.shape, c["p"], c["seed"], c["offset"])
    dz = np.where(keep, dy * np.float32(keep_scale(c["p"], c["mode"])), 0).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    opa = np.swapaxes(a64, -1, -2) if c["transpose_a"] else a64
    opb = np.swapaxes(b64, -1, -2) if c["transpose_b"] else b64
    da = dz @ np.swapaxes(opb, -1, -2)
    db = np.swapaxes(opa, -1, -2) @ dz
    da = np.swapaxes(da, -1, -2) if c["transpose_a"] else da
    db = np.swapaxes(db, -1, -2) if c["transpose_b"] else db
    expect = [unbroadcast(da, a.shape), unbroadcast(db, b.shape)]
    if bias is not None:
        expect.append(dz.sum(axis=tuple(range(dz.ndim - 1))))
    for got, want in zip(from_mask, expect):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(0)
    for d, n in enumerate(shape[:-2]):
        if n == 1:
            g = g.sum(d, keepdims=True)
    return g


def test_matmul_empty_and_zero_k():
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    bias = np.arange(4, dtype=np.float32)
    y = kernels.matmul_dropout(a, b, 0.0, seed=1, bias=bias)
    np.testing.assert_array_equal(y, np.broadcast_to(bias, (3, 4)))
    y, mask = kernels.matmul_dropout(
        np.ones((0, 5), np.float32), np.ones((5, 4), np.float32), 0.5, seed=1, return_mask=True
    )
    assert y.shape == (0, 4) and mask.size == 0


def test_gil_released_for_concurrent_calls():
    a, b = data((256, 256), 1), data((256, 256), 2)
    x = data((256, 256), 3)
    expect = kernels.matmul_dropout(a, b, 0.3, seed=4), kernels.softmax_dropout(x, 0.3, seed=4)
    results = []

    def work():
        for _ in range(5):
            results.append(
                (kernels.matmul_dropout(a, b, 0.3, seed=4), kernels.softmax_dropout(x, 0.3, seed=4))
            )

    workers = [threading.Thread(target=work) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for got in results:
        same_bits(got[0], expect[0])
        same_bits(got[1], expect[1])


def test_primitives_are_cached_by_descriptor():
    a, b = data((5, 6), 1), data((6, 7), 2)
    kernels.matmul_dropout(a, b, 0.5, seed=1)
    before = kernels.cache_stats()
    kernels.matmul_dropout(a, b, 0.5, seed=2, offset=9)  # seed and offset are arguments
    kernels.softmax_dropout(a, 0.5, seed=3)
    kernels.softmax_dropout(a, 0.5, seed=4)
    after = kernels.cache_stats()
    if after["capacity"]:
        assert after["hits"] - before["hits"] >= 2
    mode, isa = core._C.DropoutMode.upscale_in_train, core._C.Isa.scalar
    desc = kernels.SoftmaxDropoutDescriptor((5, 6), 1, (5, 6), (0, 0), 0.5, mode, True, isa, 0)
    same = kernels.SoftmaxDropoutDescriptor(
        shape=[5, 6], axis=1, global_shape=(5, 6), start=(0, 0), p=0.5, mode=mode,
        training=True, isa=isa, stream_min_bytes=0,
    )  # fmt: skip
    assert desc == same and hash(desc) == hash(same)
    assert desc != kernels.SoftmaxDropoutDescriptor(
        (5, 6), 1, (5, 6), (0, 0), 0.25, mode, True, isa, 0
    )
    with pytest.raises(AttributeError):
        desc.p = 0.1  # frozen


# ---- errors ---------------------------------------------------------------------------------

A, B = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
X = np.ones((4, 6), np.float32)
S = np.ones((4, 4), np.float32)


F1 = np.ones((4, 5), np.float32)  # dy of A @ B
MASK3 = np.zeros(3, np.uint8)
ERRORS = [
    ("matmul_dropout", (A, B, 1.5), {"seed": 1}, ArgumentError, "p must lie in"),
    (
        "matmul_dropout",
        (A.astype(np.float64), B, 0.5),
        {"seed": 1},
        ArgumentTypeError,
        "a must be float32, got float64",
    ),
    ("matmul_dropout", (A, B.T, 0.5), {"seed": 1}, ArgumentError, "must chain"),
    ("matmul_dropout", (A[0], B, 0.5), {"seed": 1}, ArgumentError, "a must be at least 2-D"),
    (
        "matmul_dropout",
        (np.ones((2, 4, 3), np.float32), np.ones((3, 3, 5), np.float32), 0.5),
        {"seed": 1},
        ArgumentError,
        "do not broadcast",
    ),
    (
        "matmul_dropout",
        (A, B, 0.5),
        {"seed": 1, "bias": np.ones(5)},
        ArgumentTypeError,
        "bias must be float32",
    ),
    (
        "matmul_dropout",
        (A, B, 0.5),
        {"seed": 1, "bias": np.ones(4, np.float32)},
        ArgumentError,
        r"bias must have shape \(N,\) = \(5,\)",
    ),
    ("matmul_dropout", (A, B, 0.5), {"seed": 2**64}, ArgumentError, "seed must lie in"),
    (
        "matmul_dropout",
        (A, B, 0.5),
        {"seed": 1, "transpose_a": "yes"},
        ArgumentTypeError,
        "transpose_a must be True or False",
    ),
    ("matmul_dropout", (A, B, 0.5), {"seed": 1, "mode": "x"}, ArgumentError, "mode must be one of"),
    (
        "matmul_dropout",
        (A, B, 0.5),
        {"seed": 1, "shard": ((4, 5), (1, 0))},
        ArgumentError,
        "outside its global shape",
    ),
    (
        "matmul_dropout",
        (A, B, 0.5),
        {"seed": 1, "out": np.ones((4, 4))},
        ArgumentError,
        "out must have shape",
    ),
    (
        "matmul_dropout",
        (S, S.copy(), 0.5),
        {"seed": 1, "out": S},
        ArgumentError,
        "out overlaps an input",
    ),
    ("matmul", (A, B), {"bias": [1.0]}, ArgumentTypeError, "bias must be float32"),
    ("matmul_dropout_backward", (F1, A, B, 0.5), {}, ArgumentError, "exactly one of mask="),
    (
        "matmul_dropout_backward",
        (F1[:, :4], A, B, 0.5),
        {"seed": 1},
        ArgumentError,
        r"dy must have the output's shape \(4, 5\)",
    ),
    (
        "matmul_dropout_backward",
        (F1, A, B, 0.5),
        {"mask": MASK3[:2]},
        ArgumentError,
        "mask must be 1-D with 3 bytes",
    ),
    (
        "matmul_dropout_backward",
        (F1, A, B, 0.5),
        {"mask": MASK3.view(np.int8)},
        ArgumentTypeError,
        "mask must be the uint8 array",
    ),
    (
        "softmax_dropout",
        (X, 0.5),
        {"seed": 1, "axis": 2},
        ArgumentError,
        "axis 2 is out of range for rank 2",
    ),
    (
        "softmax_dropout",
        (X.astype(np.float16), 0.5),
        {"seed": 1},
        ArgumentTypeError,
        "x must be float32, got float16",
    ),
    ("softmax_dropout", (X, "0.5"), {"seed": 1}, ArgumentTypeError, "p must be a real number"),
    (
        "softmax_dropout",
        (X, 0.5),
        {"seed": 1, "shard": ((4, 12), (0, 6))},
        ArgumentError,
        "whole rows along the softmax axis 1",
    ),
    ("softmax_dropout", (np.float32(1), 0.5), {"seed": 1}, ArgumentError, "at least 1-D"),
    ("softmax", (X,), {"axis": 1.0}, ArgumentTypeError, "axis must be an integer"),
    (
        "softmax_dropout_backward",
        (X, 0.5),
        {"seed": 1},
        ArgumentError,
        "exactly one of x= .* or probs=",
    ),
    (
        "softmax_dropout_backward",
        (X, 0.5),
        {"x": X[:2], "seed": 1},
        ArgumentError,
        r"x must have dy's shape \(4, 6\)",
    ),
    (
        "softmax_dropout_backward",
        (X, 0.5),
        {"x": X, "seed": 1, "mask": MASK3},
        ArgumentError,
        "exactly one of mask=",
    ),
]


@pytest.mark.parametrize(("op", "args", "kwargs", "error", "match"), ERRORS)
def test_typed_errors(op, args, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        getattr(kernels, op)(*args, **kwargs)
    assert isinstance(info.value, Error) and str(info.value).startswith(f"{op}: ")
