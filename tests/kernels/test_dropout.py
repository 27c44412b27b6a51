"""The dropout kernel against kernels/reference.py, bit for bit, and its invariants: thread
count, shards, in place, backward from the mask == backward recomputed."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fusebridge import kernels
from fusebridge.kernels import reference

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64]
SEEDS = st.one_of(
    st.sampled_from([0, 1, -1, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, 0xDEADBEEFCAFEF00D]),
    st.integers(-(2**63), 2**64 - 1),
)
OFFSETS = st.one_of(st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**64 - 1]), st.integers(0, 2**64 - 1))
PS = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.1, 1e-7, 1 - 1e-7]), st.floats(0.0, 1.0))


def data(shape, dtype, seed=0):
    x = np.asarray(np.random.default_rng(seed).standard_normal(shape) * 3)
    return x.astype(dtype)


def same_bits(a, b):
    """Equal bit patterns (so -0 vs +0 and NaN payloads count)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    view = {8: np.uint64, 4: np.uint32, 2: np.uint16}[a.dtype.itemsize]
    np.testing.assert_array_equal(a.view(view), b.view(view))


@st.composite
def cases(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    if ndim and draw(st.booleans()):  # now and then one long axis, to reach the SIMD loops
        axis = draw(st.integers(0, ndim - 1))
        shape = shape[:axis] + (draw(st.integers(60, 700)),) + shape[axis + 1 :]
    shared = draw(st.sets(st.integers(0, ndim - 1), max_size=ndim)) if ndim else set()
    return {
        "shape": shape,
        "axes": tuple(sorted(shared)),
        "dtype": draw(st.sampled_from(DTYPES)),
        "p": draw(PS),
        "seed": draw(SEEDS),
        "offset": draw(OFFSETS),
        "mode": draw(st.sampled_from(["upscale_in_train", "downgrade_in_infer"])),
        "training": draw(st.booleans()),
        "noise_style": draw(st.booleans()),  # same sharing given as TF noise_shape
    }


def mask_shape_of(shape, axes):
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


@given(case=cases())
def test_forward_matches_reference(case, each_isa):
    c = case
    x = data(c["shape"], c["dtype"])
    mask_shape = mask_shape_of(c["shape"], c["axes"])
    share = {"noise_shape": mask_shape} if c["noise_style"] else {"axes": c["axes"]}
    y, mask = kernels.dropout(
        x,
        c["p"],
        seed=c["seed"],
        offset=c["offset"],
        mode=c["mode"],
        training=c["training"],
        return_mask=True,
        **share,
    )
    y_ref, mask_ref = reference.dropout(
        x, c["p"], c["seed"], c["offset"], mask_shape, c["mode"], c["training"]
    )
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)
    assert mask.size == math.ceil(math.prod(mask_shape) / 8)


@given(case=cases(), data_=st.data())
def test_shards_equal_the_whole(case, data_, each_isa):
    c = case
    assume(len(c["shape"]) > 0)
    x = data(c["shape"], c["dtype"])
    kw = {"seed": c["seed"], "offset": c["offset"], "axes": c["axes"], "mode": c["mode"]}
    whole, whole_mask = kernels.dropout(x, c["p"], return_mask=True, **kw)
    # Cut every axis at a drawn point (an empty side is allowed) and run each block alone.
    cuts = [data_.draw(st.integers(0, n)) for n in x.shape]
    for corner in np.ndindex(*(2,) * x.ndim):
        start = tuple(0 if side == 0 else cut for side, cut in zip(corner, cuts))
        stop = tuple(cut if side == 0 else n for side, cut, n in zip(corner, cuts, x.shape))
        block = tuple(slice(a, b) for a, b in zip(start, stop))
        part, part_mask = kernels.dropout(
            x[block], c["p"], shard=(x.shape, start), return_mask=True, **kw
        )
        same_bits(part, whole[block])
        # The block's mask is numbered locally: it equals the whole mask's bits there.
        mshape = mask_shape_of(x.shape, c["axes"])
        local = tuple(slice(0, 1) if m == 1 else s for m, s in zip(mshape, block))
        expected = reference.unpack_mask(whole_mask, mshape)[local]
        np.testing.assert_array_equal(
            part_mask, np.packbits(expected.reshape(-1), bitorder="little")
        )
        back = kernels.dropout_backward(
            x[block], c["p"], mask=part_mask, shard=(x.shape, start), axes=c["axes"], mode=c["mode"]
        )
        same_bits(back, part)


@given(case=cases())
def test_backward_from_mask_equals_recomputed(case, each_isa):
    c = case
    dy = data(c["shape"], c["dtype"], seed=1)
    kw = {"axes": c["axes"], "mode": c["mode"]}
    _, mask = kernels.dropout(
        dy, c["p"], seed=c["seed"], offset=c["offset"], return_mask=True, **kw
    )
    from_mask = kernels.dropout_backward(dy, c["p"], mask=mask, **kw)
    recomputed = kernels.dropout_backward(dy, c["p"], seed=c["seed"], offset=c["offset"], **kw)
    same_bits(from_mask, recomputed)
    mshape = mask_shape_of(c["shape"], c["axes"])
    keep = np.broadcast_to(reference.unpack_mask(mask, mshape), dy.shape)
    p32 = float(np.float32(c["p"]))
    scale = 1 / (1 - p32) if c["mode"] == "upscale_in_train" and p32 < 1 else 1.0
    same_bits(from_mask, reference.apply(dy, keep, scale))


@given(case=cases())
def test_in_place_equals_out_of_place(case, each_isa):
    c = case
    x = data(c["shape"], c["dtype"])
    kw = {
        "seed": c["seed"],
        "offset": c["offset"],
        "axes": c["axes"],
        "mode": c["mode"],
        "training": c["training"],
    }
    expected = kernels.dropout(x, c["p"], **kw)
    buf = x.copy()
    assert kernels.dropout(buf, c["p"], out=buf, **kw) is buf
    same_bits(buf, expected)
    dy = x.copy()
    back = kernels.dropout_backward(
        x, c["p"], seed=c["seed"], offset=c["offset"], axes=c["axes"], mode=c["mode"]
    )
    kernels.dropout_backward(
        dy, c["p"], seed=c["seed"], offset=c["offset"], axes=c["axes"], mode=c["mode"], out=dy
    )
    same_bits(dy, back)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("axes", [(), (1,)])
def test_same_bits_for_every_thread_count(n_threads, axes, each_isa, threads):
    x = data((37, 4099), np.float32)  # many work items, ragged ends
    threads(1)
    expected = kernels.dropout(x, 0.3, seed=-5, offset=9, axes=axes, return_mask=True)
    threads(n_threads)
    got = kernels.dropout(x, 0.3, seed=-5, offset=9, axes=axes, return_mask=True)
    same_bits(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


@pytest.mark.parametrize("size", [(1 << 21) + 45, 3 << 20])
def test_large_tensor_streaming_path(size, each_isa):
    # Beyond the non-temporal-store threshold, misaligned start included.
    base = data(size, np.float32)
    x = base[45:] if size % 2 else base
    y, mask = kernels.dropout(x, 0.25, seed=77, offset=3, return_mask=True)
    y_ref, mask_ref = reference.dropout(x, 0.25, 77, 3)
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)


def test_non_contiguous_input_is_read_correctly(each_isa):
    x = data((40, 70), np.float32)
    view = x[::3, 5:60:2].T  # strided and transposed
    y, mask = kernels.dropout(view, 0.4, seed=3, return_mask=True)
    y_ref, mask_ref = reference.dropout(np.ascontiguousarray(view), 0.4, 3)
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)


def test_zero_d_and_empty():
    x = np.array(2.5, np.float32)
    y, mask = kernels.dropout(x, 0.5, seed=11, return_mask=True)
    y_ref, mask_ref = reference.dropout(x, 0.5, 11)
    assert y.shape == () and mask.shape == (1,)
    same_bits(y, y_ref)
    np.testing.assert_array_equal(mask, mask_ref)
    e, emask = kernels.dropout(np.zeros((3, 0, 2), np.float16), 0.5, seed=1, return_mask=True)
    assert e.shape == (3, 0, 2) and emask.size == 0


def test_extremes_of_p():
    x = data(1000, np.float32)
    np.testing.assert_array_equal(kernels.dropout(x, 0.0, seed=1), x)
    np.testing.assert_array_equal(kernels.dropout(x, 1.0, seed=1), np.zeros_like(x))
    np.testing.assert_array_equal(
        kernels.dropout(np.full(9, np.inf, np.float32), 1.0, seed=1), np.zeros(9, np.float32)
    )
    y = kernels.dropout(x, 0.25, seed=1, mode="downgrade_in_infer", training=False)
    np.testing.assert_array_equal(y, x * np.float32(0.75))
    np.testing.assert_array_equal(kernels.dropout(x, 0.25, seed=1, training=False), x)


def test_mask_only_matches_forward_mask(each_isa):
    shape = (5, 333)
    mask = kernels.dropout_mask(shape, 0.6, seed=2**63 + 5, offset=12)
    _, fwd_mask = kernels.dropout(
        np.ones(shape, np.float32), 0.6, seed=2**63 + 5, offset=12, return_mask=True
    )
    np.testing.assert_array_equal(mask, fwd_mask)
    block = kernels.dropout_mask((2, 100), 0.6, seed=2**63 + 5, offset=12, shard=(shape, (3, 200)))
    whole = reference.unpack_mask(mask, shape)[3:5, 200:300]
    np.testing.assert_array_equal(block, np.packbits(whole.reshape(-1), bitorder="little"))


def test_unused_mask_bits_are_zero():
    _, mask = kernels.dropout(np.ones(13, np.float32), 0.0, seed=0, return_mask=True)
    assert mask.tolist() == [0xFF, 0x1F]


def test_negative_seed_is_its_twos_complement():
    x = data(300, np.float32)
    for negative in (-1, -(2**63), -12345):
        same_bits(
            kernels.dropout(x, 0.5, seed=negative), kernels.dropout(x, 0.5, seed=negative + 2**64)
        )
