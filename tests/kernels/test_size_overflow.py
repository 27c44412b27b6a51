"""Sizes computed from shapes: with Python ints, never wrapping; refused when the element or byte
count cannot be (more than 2**47 bytes, MAX_BUFFER_BYTES) or when a whole tensor has more
elements than the bit contract's 64-bit Philox counter numbers; and checked before anything is
allocated. Before, dropout_mask((2**32, 2**32)) returned 0 bytes (2**64 wrapped to 0) and a
shard of a (2**62, 2**62) tensor was accepted."""

import contextlib
import math

import numpy as np
import pytest
from helpers.bounded_memory import run_calls_limited
from helpers.compiled_primitives import dropout_primitive

from fusebridge import ArgumentError, kernels
from fusebridge.kernels.arguments import MAX_BUFFER_BYTES


@contextlib.contextmanager
def no_allocation():
    """Fails the test if a kernel face allocates an array through numpy before refusing."""

    def guarded(make):
        def allocate(shape, *args, **kwargs):
            dtype = np.dtype(kwargs.get("dtype", args[0] if args else float))
            if math.prod(np.atleast_1d(shape).tolist()) * dtype.itemsize > 1 << 20:
                raise AssertionError(f"allocated {shape} {dtype} before the size check")
            return make(shape, *args, **kwargs)

        return allocate

    with pytest.MonkeyPatch.context() as patch:
        for name in ("empty", "zeros", "full"):
            patch.setattr(np, name, guarded(getattr(np, name)))
        yield


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: kernels.dropout_mask((2**32, 2**32), 0.5, seed=0),
            r"^dropout_mask: the tensor \(4294967296, 4294967296\) has 18446744073709551616 "
            r"elements; .* at most 2\*\*63 - 1",
        ),
        (
            lambda: kernels.dropout_mask((4, 4), 0.5, seed=0, shard=((2**62, 2**62), (0, 0))),
            r"^dropout_mask: the shard's global_shape \(4611686018427387904, 4611686018427387904\)"
            r" has 21267647932558653966460912964485513216 elements",
        ),
        (
            lambda: kernels.dropout(
                np.ones((2, 2), np.float32), 0.5, seed=0, shard=((2**63, 2), (0, 0))
            ),
            r"^dropout: the shard's global_shape .* has 18446744073709551616 elements",
        ),
        (
            lambda: kernels.dropout_mask((2**62,), 0.5, seed=0),
            r"^dropout_mask: the packed mask of shape \(576460752303423488,\) would take "
            r"576460752303423488 bytes",
        ),
        (
            lambda: kernels.softmax_dropout(
                np.ones((2, 2), np.float32), 0.5, seed=0, shard=((2**40, 2**40), (0, 0))
            ),
            r"^softmax_dropout: the shard's global_shape \(1099511627776, 1099511627776\) has",
        ),
        (
            lambda: kernels.matmul_dropout(
                np.ones((2, 2), np.float32),
                np.ones((2, 2), np.float32),
                0.5,
                seed=0,
                shard=((2**40, 2**40), (0, 0)),
            ),
            r"^matmul_dropout: the shard's global_shape \(1099511627776, 1099511627776\) has",
        ),
    ],
)
def test_dropout_sizes_beyond_the_counter_or_any_buffer(call, match):
    with pytest.raises(ArgumentError, match=match), no_allocation():
        call()


def test_a_mask_near_the_limit_keeps_every_bit_of_its_size():
    """The largest accepted shapes give the exact byte count, where int64 products wrapped."""
    prim = dropout_primitive([2**30, 2**30])
    assert prim.mask_bytes == 2**57 and prim.numel == 2**60
    with pytest.raises(ArgumentError, match=r"dropout: the data's bytes .* overflows int64"):
        dropout_primitive([2**30, 2**30], dtype=1)


def test_compiled_shards_cannot_wrap_their_bounds():
    """start + n > g wrapped for start near 2**63: the core compares start > g - n."""
    with pytest.raises(ArgumentError, match="inconsistent shard or mask geometry on axis 0"):
        dropout_primitive([4], global_shape=[2**63 - 1], start=[2**63 - 2])


def test_broadcast_shapes_are_checked_before_anything_is_made():
    """Broadcast views and empty operands are a few bytes standing for huge arrays."""
    huge = np.broadcast_to(np.float32(1), (2**40, 2**10))  # 4 PiB, read-only view
    counter = np.broadcast_to(np.zeros((1, 1, 4), np.uint32), (2**30, 1, 4))
    key = np.broadcast_to(np.zeros((1, 1, 2), np.uint32), (1, 2**30, 2))
    a, b = np.zeros((2**40, 1, 0, 1), np.float32), np.zeros((1, 2**40, 1, 0), np.float32)
    empty_rows, empty_cols = np.zeros((2**31, 0), np.float32), np.zeros((0, 2), np.float32)
    cases = [
        (lambda: kernels.dropout(huge, 0.5, seed=0), r"^dropout: .* of shape \(1099511627776,"),
        (lambda: kernels.softmax(huge), r"^softmax: .* of shape \(1099511627776, 1024\)"),
        (lambda: kernels.philox4x32(counter, key), r"^philox4x32: the output of shape"),
        (lambda: kernels.matmul(a, b), r"^matmul: the output of shape .* would take"),
        (lambda: kernels.sgemm(empty_rows, empty_cols), "exceed the 32-bit BLAS interface"),
    ]
    for call, match in cases:
        with pytest.raises(ArgumentError, match=match), no_allocation():
            call()


def test_empty_broadcast_operands_plan_no_matrices():
    """An empty output from operands that broadcast to 2**40 batches: nothing to compute, and
    no plan of 2**40 matrices (it was built, in lists of Python ints, before)."""
    a, b = np.zeros((2**20, 1, 0, 4), np.float32), np.zeros((1, 2**20, 4, 0), np.float32)
    y = kernels.matmul(a, b)
    assert y.shape == (2**20, 2**20, 0, 0)


def test_the_bound_is_the_address_space():
    assert MAX_BUFFER_BYTES == 2**47


def test_allocations_the_process_cannot_make_are_typed_errors():
    """In a process limited to 4 GiB of address space, outputs of a few KB of input that need
    more (by broadcasting, or T * N padding) are ArgumentErrors naming op and size, not
    MemoryErrors or crashes."""
    lines = run_calls_limited(
        """
        import numpy as np
        from fusebridge import kernels as k
        x = np.zeros((2**12, 1), np.float32)
        many_empty = np.concatenate([[0], np.full(2**20, 2**12)])  # 2**20 sentences, T 2**12
        row = np.zeros((1, 2**20), np.float32)
        calls = [
            lambda: k.lod_to_padded(x, many_empty),
            lambda: k.sequence_pool(row, np.concatenate([[0], np.ones(2**20, np.int64)]), "SUM"),
            lambda: k.matmul(np.ones((2**20, 1, 1, 1), np.float32),
                             np.ones((1, 2**20, 1, 1), np.float32)),
            lambda: k.sgemm(np.zeros((2**20, 0), np.float32), np.zeros((0, 2**20), np.float32)),
            lambda: k.dropout_mask((2**40,), 0.5, seed=0),
            lambda: k.philox4x32(np.zeros((2**16, 1, 4), np.uint32),
                                 np.zeros((1, 2**16, 2), np.uint32)),
        ]
        """
    )
    ops = ["lod_to_padded", "sequence_pool", "matmul", "sgemm", "dropout_mask", "philox4x32"]
    assert len(lines) == len(ops), lines
    for line, op in zip(lines, ops):
        assert line.startswith(f"ArgumentError {op}: "), line
        assert "than this process can" in line, line
