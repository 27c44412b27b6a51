"""The cuda engine's kernels run on the CPU: the UNCHANGED sources of fusebridge/cuda/csrc
compiled by g++ with the emulator of tests/cuda/emulator (a block's threads as fibers, warps'
shuffles and ballots as meeting points) under AddressSanitizer and UBSan, driven by the
engine's own Python code, against the cpu engine: the case list the GPU check runs first
(fusebridge/cuda/gpu_cases.py), under several launch shapes. cuBLAS is not emulated: the GEMM
of matmul_dropout is numpy's here (its epilogue is ours and runs emulated)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cuda_emulator import EmulatedLauncher, Emulator, build_harness, compiler

from fusebridge.cuda import build, device, gpu_cases
from fusebridge.cuda.gpu_bench import TUNE_DROPOUT, TUNE_SOFTMAX

pytestmark = pytest.mark.skipif(compiler() is None, reason="the emulator needs g++")

KERNELS = [
    f"dropout_{kind}_{suffix}" for kind in ("forward", "apply") for suffix in ("f32", "f16", "bf16")
] + ["softmax_dropout_forward", "softmax_dropout_backward"]


def _emulator(folder, defines=()) -> Emulator:
    sources = [build.CSRC / s for s in build.SOURCES]
    includes = [build.CSRC, build.KERNELS_CSRC]
    return Emulator(build_harness(sources, KERNELS, includes, folder, defines=defines))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Emulator:
    return _emulator(tmp_path_factory.mktemp("emulator"))


def _host_io() -> gpu_cases.Arrays:
    # Copies, as to and from a device: the engine never sees the oracle's arrays.
    return gpu_cases.Arrays(lambda a: np.array(a, copy=True), lambda a: np.asarray(a))


def _failed(results: list[dict]) -> list[dict]:
    assert results
    return [r for r in results if not r["ok"]]


def test_every_case_of_the_gpu_check_passes_emulated(emulator):
    """The whole case list, with a launch shape that makes every kernel loop grid-stride."""
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3)
    with device.use_launcher(launcher):
        results = gpu_cases.run_all(_host_io(), families=gpu_cases.DROPOUT_FAMILIES)
    assert _failed(results) == []
    launched = {kernel for kernel, *_ in launcher.launches}
    assert launched == set(KERNELS)


@pytest.mark.parametrize(("block", "max_grid"), [(32, 1), (96, 2), (256, 5)])
def test_the_bits_do_not_depend_on_the_launch_shape(emulator, block, max_grid):
    launcher = EmulatedLauncher(emulator, block, max_grid)
    with device.use_launcher(launcher):
        results = gpu_cases.run_all(_host_io(), True, gpu_cases.DROPOUT_FAMILIES)
    assert _failed(results) == []


def test_an_unwritten_output_element_would_show(emulator):
    """The launcher poisons fresh outputs, so the equality checks above see any element the
    kernels skip: here a dropout over a tensor too large for one warp's first pass."""
    launcher = EmulatedLauncher(emulator, block=32, max_grid=1)
    x = np.arange(1000, dtype=np.float32)
    with device.use_launcher(launcher):
        from fusebridge import cuda, kernels

        y, mask = cuda.dropout(x, 0.5, seed=3, return_mask=True)
    want, want_mask = kernels.dropout(x, 0.5, seed=3, return_mask=True)
    assert y.tobytes() == want.tobytes() and mask.tobytes() == want_mask.tobytes()


# The tuning constants change the kernels' loops (groups in flight, rows held in registers),
# so the variants gpu_bench.tune times on a GPU run the whole case list here too: one build
# with the other extreme of each constant.
VARIANTS = [
    ("FB_UNROLL=1", "FB_CACHED=8", "FB_CACHED_BACKWARD=8"),
    ("FB_UNROLL=4", "FB_CACHED=2", "FB_CACHED_BACKWARD=2"),
]


def test_the_tuned_constants_cover_the_variants_timed():
    timed = {d.split("=")[0] for defines, _ in TUNE_DROPOUT + TUNE_SOFTMAX for d in defines}
    varied = {d.split("=")[0] for defines in VARIANTS for d in defines}
    # FB_MIN_BLOCKS* only caps registers (__launch_bounds__), which the emulator ignores.
    assert timed - varied == {"FB_MIN_BLOCKS", "FB_MIN_BLOCKS_BACKWARD"}


@pytest.mark.parametrize("defines", VARIANTS, ids=" ".join)
def test_every_case_passes_under_other_tuning_constants(tmp_path_factory, defines):
    launcher = EmulatedLauncher(_emulator(tmp_path_factory.mktemp("variant"), defines), 64, 3)
    launcher.device += ",".join(defines)  # primitives of their own
    with device.use_launcher(launcher):
        results = gpu_cases.run_all(_host_io(), families=gpu_cases.DROPOUT_FAMILIES)
    assert _failed(results) == []
