"""The CUDA emulator itself (tests/helpers/cuda_emulator.py): the kernels of
emulator/sample_kernels.cu against numpy over several grids and blocks, cooperative launches
(a grid barrier) and dynamic shared memory, and the bugs it must report (an access past a
buffer, lanes that leave before or meet at different collectives, a spin wait that never ends).

No __init__.py in this folder on purpose: it would make tests/cuda the package `cuda` on
sys.path, hiding the installed cuda-bindings (`cuda.bindings`) that torch and fusebridge.cuda
import."""

import re
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.cuda_emulator import (
    Emulator,
    EmulatorBuildError,
    EmulatorError,
    build_harness,
    compiler,
)

pytestmark = pytest.mark.skipif(compiler() is None, reason="the emulator needs g++")

SAMPLES = Path(__file__).parent / "emulator" / "sample_kernels.cu"
KERNELS = re.findall(r'extern "C" __global__ void (\w+)', SAMPLES.read_text())
GRIDS = [1, 3, 7]
BLOCKS = [32, 64, 96, 256]
SHAPES = [(g, b) for g in GRIDS for b in BLOCKS]


@pytest.fixture(scope="module")
def emu(tmp_path_factory) -> Emulator:
    workdir = tmp_path_factory.mktemp("emu")
    return Emulator(build_harness([SAMPLES], KERNELS, [], workdir))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- correct kernels against numpy ---------------------------------------------------------------


@pytest.mark.parametrize("grid, block", SHAPES)
def test_saxpy(emu, grid, block):
    n = 1000
    x = rng().standard_normal(n, dtype=np.float32)
    y = rng(1).standard_normal(n, dtype=np.float32)
    want = np.float32(2.5) * x + y
    emu.launch("saxpy", grid, block, [np.int32(n), np.float32(2.5), x, y])
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("cooperative", [False, True])
def test_thread_and_block_indices_of_a_3d_launch(emu, cooperative):
    grid, block = (3, 2, 2), (8, 4, 2)
    nb, nt = 3 * 2 * 2, 8 * 4 * 2
    out = np.zeros((nb * nt, 2), np.uint32)
    emu.launch("thread_ids", grid, block, [out], cooperative=cooperative)
    want = np.stack(np.meshgrid(np.arange(nb), np.arange(nt), indexing="ij"), -1).reshape(-1, 2)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_warp_sums(emu, grid, block):
    x = rng().integers(-100, 100, grid * block).astype(np.float32)  # exact sums
    out = np.zeros(grid * block // 32, np.float32)
    emu.launch("warp_sums", grid, block, [x, out])
    np.testing.assert_array_equal(out, x.reshape(-1, 32).sum(1))


@pytest.mark.parametrize("grid, block", [*SHAPES, (2, 1000), (1, 1024)])
def test_block_sums(emu, grid, block):
    n = 5000
    x = rng().integers(-100, 100, n).astype(np.float32)
    out = np.zeros(grid, np.float32)
    emu.launch("block_sums", grid, block, [np.int32(n), x, out])
    # Block b sums the elements whose grid-stride share is its own.
    owner = (np.arange(n) % (grid * block)) // block
    np.testing.assert_array_equal(out, np.bincount(owner, x, grid).astype(np.float32))


@pytest.mark.parametrize("grid, block", SHAPES)
@pytest.mark.parametrize("n", [1, 31, 1000, 4096])
def test_ballot_packs_predicates_lsb_first(emu, grid, block, n):
    x = rng(n).standard_normal(n, dtype=np.float32)
    words = np.zeros((n + 31) // 32, np.uint32)
    emu.launch("ballot_pack", grid, block, [np.int32(n), x, np.float32(0.25), words])
    want = np.packbits(x > 0.25, bitorder="little")
    np.testing.assert_array_equal(words.view(np.uint8)[: want.size], want)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_atomic_or_sets_bits(emu, grid, block):
    idx = rng().integers(0, 3000, 2000).astype(np.int32)
    words = np.zeros(3000 // 32 + 1, np.uint32)
    emu.launch("set_bits", grid, block, [np.int32(idx.size), idx, words])
    want = np.zeros(words.size * 32, bool)
    want[idx] = True
    np.testing.assert_array_equal(words.view(np.uint8), np.packbits(want, bitorder="little"))


def test_atomic_add_histogram(emu):
    v = rng().integers(0, 17, 3000).astype(np.int32)
    counts = np.zeros(17, np.uint64)
    emu.launch("histogram", 5, 128, [np.int32(v.size), v, counts])
    np.testing.assert_array_equal(counts, np.bincount(v, minlength=17))


def shuffle_model(x, src, delta, lane_mask, width):
    """PTX shfl.sync per lane of each warp: (idx, up, down, xor) sources."""
    lane = np.arange(32)
    start = lane & ~(width - 1)
    idx = start + (src & (width - 1))
    up = np.where(lane - start >= delta, lane - delta, lane)
    down = np.where(lane - start + delta < width, lane + delta, lane)
    xor = lane ^ lane_mask
    xor = np.where(xor < start + width, xor, lane)
    w = x.reshape(-1, 32)
    return [w[:, s].reshape(-1) for s in (idx, up, down, xor)]


@pytest.mark.parametrize("width", [32, 16, 8, 4, 1])
@pytest.mark.parametrize("src, delta, lane_mask", [(0, 1, 1), (5, 3, 6), (31, 16, 16)])
def test_shuffles_and_votes(emu, width, src, delta, lane_mask):
    grid, block = 2, 96
    # 64-bit values with both halves busy; some negative for the votes.
    x = rng(width).integers(-(2**62), 2**62, grid * block, dtype=np.int64)
    x[:32] = np.abs(x[:32])  # warp 0: none negative
    x[32:64] = -np.abs(x[32:64]) - 1  # warp 1: all negative
    out = np.zeros((grid * block, 7), np.int64)
    emu.launch(
        "shuffles",
        grid,
        block,
        [x, out, np.int32(src), np.int32(delta), np.int32(lane_mask), np.int32(width)],
    )
    for k, want in enumerate(shuffle_model(x, src, delta, lane_mask, width)):
        np.testing.assert_array_equal(out[:, k], want, err_msg=f"mode {k}")
    neg = (x < 0).reshape(-1, 32)
    np.testing.assert_array_equal(out[:, 4], np.repeat(neg.any(1), 32))
    np.testing.assert_array_equal(out[:, 5], np.repeat(neg.all(1), 32))
    np.testing.assert_array_equal(out[:, 6], np.repeat((x < 0).reshape(grid, -1).sum(1), block))


def test_half_warp_shuffles_on_doubles(emu):
    x = rng().standard_normal(4 * 64)
    out = np.zeros(8)
    emu.launch("half_warp_max", 4, 64, [x, out])
    np.testing.assert_array_equal(out, x.reshape(-1, 32)[:, :16].max(1))


def test_bit_intrinsics(emu):
    x = np.concatenate([[0, 1, 0x80000000, 0xFFFFFFFF], rng().integers(0, 2**32, 60)])
    x = x.astype(np.uint32)
    out = np.zeros((64, 6), np.uint32)
    emu.launch("bit_tricks", 1, 64, [x, out])
    bits = [[int(v) >> k & 1 for k in range(32)] for v in x]
    np.testing.assert_array_equal(out[:, 0], [sum(b) for b in bits])
    np.testing.assert_array_equal(out[:, 1], [32 - int(v).bit_length() for v in x])
    np.testing.assert_array_equal(out[:, 2], [int(f"{int(v):032b}"[::-1], 2) for v in x])
    np.testing.assert_array_equal(out[:, 3], [(int(v) & -int(v)).bit_length() for v in x])
    np.testing.assert_array_equal(out[:, 4], [int(v) * 0x9E3779B9 >> 32 for v in x])
    hi64 = [((int(v) << 32 | int(v)) * 0x9E3779B97F4A7C15 >> 64) & 0xFFFFFFFF for v in x]
    np.testing.assert_array_equal(out[:, 5], hi64)


@pytest.mark.parametrize("grid, block", [(1, 32), (3, 96)])
def test_atomic_reductions(emu, grid, block):
    v = rng().integers(-(2**31), 2**31, 1000).astype(np.int32)
    r = np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max], np.int32)
    u = np.array([0xFFFFFFFF, 0, 0], np.uint32)
    emu.launch("atomic_reductions", grid, block, [np.int32(v.size), v, r, u])
    np.testing.assert_array_equal(r, [v.max(), v.min()])
    bits = v.view(np.uint32)
    want = [np.bitwise_and.reduce(bits), np.bitwise_xor.reduce(bits), bits.sum(dtype=np.uint32)]
    np.testing.assert_array_equal(u, want)


# ---- cooperative launches and dynamic shared memory ----------------------------------------------

SPIN_ROUNDS = 10000  # emu::kSpinRounds


def grid_phases_model(data: np.ndarray, grid: int, block: int, phases: int) -> np.ndarray:
    """What grid_phases leaves in its double buffer data[2][n]."""
    n = grid * block
    i = np.arange(n, dtype=np.uint64)
    out = data.astype(np.uint64)
    for p in range(phases):
        k = 1 + p % (grid - 1) if grid > 1 else 0
        out[1 - p % 2] = (out[p % 2][(i + k * block) % n] * 3 + i + p) & 0xFFFFFFFF
    return out.astype(np.uint32)


def grid_phases(emu, grid, block, phases, *, every_thread=False, absent=-1, cooperative=True):
    data = rng().integers(0, 2**32, (2, grid * block), dtype=np.uint32)
    want = grid_phases_model(data, grid, block, phases)
    sync = np.zeros(2, np.uint32)
    args = [np.int32(phases), np.int32(every_thread), np.int32(absent), data, sync]
    emu.launch("grid_phases", grid, block, args, cooperative=cooperative)
    np.testing.assert_array_equal(data, want)
    np.testing.assert_array_equal(sync, [0, phases])


@pytest.mark.parametrize("every_thread", [False, True])
@pytest.mark.parametrize("grid, block", [(4, 64), (3, 96), (2, 32)])
def test_grid_barrier_in_a_cooperative_launch(emu, grid, block, every_thread):
    # Each phase reads what another block wrote in the one before.
    grid_phases(emu, grid, block, 6, every_thread=every_thread)


def test_a_grid_barrier_of_one_block_needs_no_cooperative_launch(emu):
    grid_phases(emu, 1, 64, 4, cooperative=False)


def test_barriers_without_collectives_are_not_taken_for_a_hang(emu):
    # Every thread arrives for itself: no collective in the whole kernel, and between the
    # phases only the arrivals' atomics show that the spinning threads get somewhere.
    grid_phases(emu, 2, 32, 2 * SPIN_ROUNDS + 1, every_thread=True)


def test_block_indices_are_each_threads_own_across_yields(emu):
    out = np.zeros((4 * 64, 2), np.uint32)
    emu.launch("block_ids_across_yields", 4, 64, [out], cooperative=True)
    np.testing.assert_array_equal(out, np.repeat(np.arange(4), 64)[:, None].repeat(2, 1))


@pytest.mark.parametrize("grid, block", [(1, 32), (3, 96), (4, 256), (2, 1000)])
def test_block_barriers_in_a_cooperative_launch(emu, grid, block):
    n = 5000
    x = rng().integers(-100, 100, n).astype(np.float32)
    out = np.zeros(grid, np.float32)
    args = [np.int32(n), x, out]
    emu.launch("block_sums_dynamic", grid, block, args, shared_bytes=4 * block, cooperative=True)
    owner = (np.arange(n) % (grid * block)) // block
    np.testing.assert_array_equal(out, np.bincount(owner, x, grid).astype(np.float32))


def test_block_barrier_mismatch_in_a_cooperative_launch(emu):
    with pytest.raises(EmulatorError, match=r"block \(0,0,0\).*__syncthreads: thread \(0,0,0\)"):
        emu.launch("barrier_after_exit", 3, 64, [np.zeros(64, np.float32)], cooperative=True)
    with pytest.raises(EmulatorError, match="meet at different collectives"):
        emu.launch("mixed_collectives", 2, 32, [np.zeros(64, np.uint32)], cooperative=True)


@pytest.mark.parametrize("cooperative", [False, True])
def test_dynamic_shared_memory_is_each_blocks_own(emu, cooperative):
    grid, block = 3, 64
    before = np.zeros(grid * block, np.uint32)
    after = np.zeros(grid * block, np.uint32)
    args = [before, after]
    emu.launch(
        "shared_per_block", grid, block, args, shared_bytes=4 * block, cooperative=cooperative
    )
    assert (before == 0xA5A5A5A5).all()  # fresh and poisoned in every block
    t = np.arange(block)
    np.testing.assert_array_equal(
        after.reshape(grid, block), np.arange(grid)[:, None] * 1000 + t[::-1]
    )


@pytest.mark.parametrize("n", [16, 0])
def test_dynamic_shared_memory_overflow(emu, n):
    # n == 0: a launch without dynamic shared memory gets a 0-byte allocation.
    out = np.zeros(64, np.float32)
    with pytest.raises(EmulatorError, match="AddressSanitizer: heap-buffer-overflow") as err:
        emu.launch("shared_write_past_end", 2, 64, [np.int32(n), out], shared_bytes=4 * n)
    assert "shared_write_past_end" in str(err.value)


def test_grid_barrier_in_a_launch_that_is_not_cooperative(emu):
    # Block 0 waits for blocks that run only once it has finished.
    start = time.monotonic()
    with pytest.raises(EmulatorError, match=r"block \(0,0,0\).*a spin wait that never ends"):
        grid_phases(emu, 2, 64, 3, cooperative=False)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("every_thread", [False, True])
def test_grid_barrier_that_a_block_never_reaches(emu, every_thread):
    start = time.monotonic()
    with pytest.raises(EmulatorError, match=r"block \(1,0,0\).*a spin wait that never ends"):
        grid_phases(emu, 4, 64, 3, every_thread=every_thread, absent=0)
    assert time.monotonic() - start < 60


def test_cooperative_launch_size_is_bounded(emu):
    args = [np.int32(0), np.float32(1), None, None]
    with pytest.raises(EmulatorError, match="cooperative launch of 17 blocks of 1024 threads"):
        emu.launch("saxpy", 17, 1024, args, cooperative=True)
    emu.launch("saxpy", 17, 1024, args)  # one block after another: fine
    with pytest.raises(EmulatorError, match="232449 bytes of dynamic shared memory"):
        emu.launch("saxpy", 1, 32, args, shared_bytes=227 * 1024 + 1)


@pytest.mark.parametrize(
    "options, error",
    [
        ({"shared_bytes": -1}, ValueError),
        ({"shared_bytes": 1.0}, TypeError),
        ({"shared_bytes": True}, TypeError),
        ({"cooperative": 1}, TypeError),
    ],
)
def test_launch_options_are_checked(emu, options, error):
    with pytest.raises(error):
        emu.launch("saxpy", 1, 32, [np.int32(0), np.float32(1), None, None], **options)


# ---- device memory: views share it ---------------------------------------------------------------


def test_in_place_with_aliased_arguments(emu):
    y = rng().standard_normal(777)
    want = 3.0 * y + y
    emu.launch("axpy_alias", 3, 64, [np.int64(y.size), np.float64(3.0), y, y])
    np.testing.assert_array_equal(y, want)


def test_views_of_one_array_are_one_buffer(emu):
    base = rng().standard_normal(300)
    x, y = base[3:103], base[150:250].reshape(10, 10)
    want = base.copy()
    want[150:250] = 0.5 * want[3:103] + want[150:250]
    emu.launch("axpy_alias", 1, 32, [np.int64(100), np.float64(0.5), x, y])
    np.testing.assert_array_equal(base, want)
    np.testing.assert_array_equal(y.reshape(-1), want[150:250])


def test_overlapping_views_see_each_others_writes(emu):
    # base[i + 1] = 2 * base[i] + base[i + 1], in order (one thread): x is y shifted by one,
    # so each step reads the element the step before wrote.
    base = np.ones(10)
    emu.launch("axpy_alias", 1, 1, [np.int64(9), np.float64(2.0), base[:-1], base[1:]])
    np.testing.assert_array_equal(base, 2.0 ** np.arange(1, 11) - 1)


def test_unwritten_read_only_arrays_are_fine(emu):
    x = np.ones(64, np.float32)
    x.flags.writeable = False
    y = np.zeros(64, np.float32)
    emu.launch("saxpy", 1, 64, [np.int32(64), np.float32(1.0), x, y])
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("bad", [64, 1.0, True, np.int16(64)])
def test_scalars_must_say_their_width(emu, bad):
    y = np.zeros(64, np.float32)
    with pytest.raises(TypeError, match="numpy scalar"):
        emu.launch("saxpy", 1, 64, [bad, np.float32(1.0), y, y])


def test_non_contiguous_arrays_are_refused(emu):
    y = np.zeros(128, np.float32)
    with pytest.raises(TypeError, match="C-contiguous"):
        emu.launch("saxpy", 1, 64, [np.int32(64), np.float32(1.0), y[::2], y[:64]])


def test_a_scalar_of_the_wrong_width_names_the_argument(emu):
    y = np.zeros(64, np.float32)
    with pytest.raises(EmulatorError, match="argument 0 of saxpy: the kernel takes a 4-byte"):
        emu.launch("saxpy", 1, 64, [np.int64(64), np.float32(1.0), y, y])


def test_unknown_kernel(emu):
    with pytest.raises(EmulatorError, match="no kernel nope"):
        emu.launch("nope", 1, 32, [])


# ---- bugs the emulator reports -------------------------------------------------------------------


def test_write_past_the_end_of_a_buffer(emu):
    y = np.zeros(100, np.float32)
    with pytest.raises(EmulatorError, match="AddressSanitizer: heap-buffer-overflow") as err:
        emu.launch("write_past_end", 4, 32, [np.int32(100), y])
    assert "write_past_end" in str(err.value)


def test_write_past_a_view_inside_its_array_is_not_caught(emu):
    # The limit of the emulator: a view's end is not its buffer's.
    base = np.zeros(101, np.float32)
    emu.launch("write_past_end", 4, 32, [np.int32(100), base[:100]])
    assert base[100] == 1.0


def test_shared_memory_overflow(emu):
    # UBSan's bounds check sees the index first; ASan would report a global-buffer-overflow.
    with pytest.raises(EmulatorError, match="index 32 out of bounds for type 'float \\[32\\]'"):
        emu.launch("shared_overflow", 1, 64, [np.zeros(64, np.float32)])


def test_undefined_behaviour(emu):
    with pytest.raises(EmulatorError, match="runtime error: signed integer overflow"):
        emu.launch("signed_overflow", 1, 32, [np.int32(2**31 - 8), np.zeros(32, np.int32)])


def test_shuffle_with_a_lane_that_has_exited(emu):
    with pytest.raises(EmulatorError, match=r"__shfl_xor_sync.*lane 0\] has already exited"):
        emu.launch("shuffle_after_exit", 1, 64, [np.zeros(64, np.float32)])


def test_lanes_at_different_collectives(emu):
    with pytest.raises(EmulatorError, match="meet at different collectives") as err:
        emu.launch("mixed_collectives", 1, 32, [np.zeros(32, np.uint32)])
    assert "__shfl_xor_sync" in str(err.value) and "__ballot_sync" in str(err.value)


def test_barrier_after_a_thread_has_exited(emu):
    with pytest.raises(EmulatorError, match=r"__syncthreads: thread \(0,0,0\).*exited"):
        emu.launch("barrier_after_exit", 2, 64, [np.zeros(64, np.float32)])


def test_full_mask_in_a_partial_warp(emu):
    with pytest.raises(EmulatorError, match="names lane 16, which this block of 48 threads"):
        emu.launch("full_mask_partial_warp", 1, 48, [np.zeros(48, np.float32)])


def test_deadlock(emu):
    with pytest.raises(EmulatorError, match=r"deadlock: waits at __syncwarp\(mask 0x00000003\)"):
        emu.launch("deadlock_cycle", 1, 32, [np.zeros(32, np.int32)])


def test_shuffle_from_a_lane_outside_the_mask(emu):
    with pytest.raises(EmulatorError, match="reads lane 16, which is not in the mask"):
        emu.launch("shuffle_outside_mask", 1, 32, [np.zeros(32, np.float32)])


def test_block_of_more_than_1024_threads(emu):
    with pytest.raises(EmulatorError, match=r"not 1\.\.1024 threads"):
        emu.launch("saxpy", 1, (64, 17), [np.int32(0), np.float32(1), None, None])


# ---- the build -----------------------------------------------------------------------------------


def test_a_build_is_cached_by_everything_it_includes(tmp_path):
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "value.cuh"
    header.write_text("#define VALUE 7.0f\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text(
        '#include "value.cuh"\n'
        'extern "C" __global__ void fill(float* y) { y[threadIdx.x] = VALUE; }\n'
    )
    work = tmp_path / "work"
    first = build_harness([kernel], ["fill"], [tmp_path / "inc"], work, sanitize=False)
    built = first.stat().st_mtime_ns
    assert build_harness([kernel], ["fill"], [tmp_path / "inc"], work, sanitize=False) == first
    assert first.stat().st_mtime_ns == built  # not compiled again
    y = np.zeros(32, np.float32)
    Emulator(first).launch("fill", 1, 32, [y])
    assert (y == 7).all()
    header.write_text("#define VALUE 8.0f\n")  # the source is the same, a header it includes not
    changed = build_harness([kernel], ["fill"], [tmp_path / "inc"], work, sanitize=False)
    assert changed != first
    Emulator(changed).launch("fill", 1, 32, [y])
    assert (y == 8).all()


def test_a_compile_error_is_reported(tmp_path):
    kernel = tmp_path / "k.cu"
    kernel.write_text('extern "C" __global__ void broken(float* y) { y[0] = undeclared; }\n')
    with pytest.raises(EmulatorBuildError, match="undeclared"):
        build_harness([kernel], ["broken"], [], tmp_path, sanitize=False)
