"""The cuda engine's kernels compiled by NVRTC with no GPU and no driver, for the two
architectures of the GPUs we run on (A100 sm_80, H100/H200 sm_90): every kernel compiles,
none spills or uses local memory, each stays within its register and shared-memory budget."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="the cuda extra (cuda-bindings) is needed")

from fusebridge.cuda import build

ARCHS = ("sm_80", "sm_90")
# Every kernel the engine launches, by source (the kernel names of fusebridge/cuda/*.py).
KERNELS = {
    "dropout.cu": {
        f"dropout_{kind}_{suffix}"
        for kind in ("forward", "apply")
        for suffix in ("f32", "f16", "bf16")
    },
    "softmax_dropout.cu": {"softmax_dropout_forward", "softmax_dropout_backward"},
    "gru.cu": {"gru_projection", "gru_recurrence"},
    "sequence.cu": {"crf_decoding", "lod_to_padded", "padded_to_lod"},
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of the tests' own, so the first compile of each source is really run."""
    folder = tmp_path_factory.mktemp("cuda-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(build.CACHE_ENV, str(folder))
        yield folder


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", build.SOURCES)
def test_every_kernel_compiles_within_its_budget(cache, source, arch):
    cubin = build.compile_source(source, arch)
    assert cubin.path.parent == cache and cubin.path.read_bytes()[:4] == b"\x7fELF"
    used = build.resources(cubin.log)
    assert set(used) == KERNELS[source], cubin.log
    for kernel, res in used.items():
        assert build.over_budget(kernel, res) == [], cubin.log
        assert res.stack_bytes == res.spill_stores == res.spill_loads == 0


def test_the_cubin_is_cached_by_source_and_options(cache):
    first = build.compile_source("dropout.cu", "sm_90")
    stamp = first.path.stat().st_mtime_ns
    again = build.compile_source("dropout.cu", "sm_90")
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    other = build.compile_source("dropout.cu", "sm_80")
    assert other.path != first.path


def test_the_cache_folder_is_the_users_choice(tmp_path, monkeypatch):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "mine"))
    assert build.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(build.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_dir() == tmp_path / "xdg" / "fusebridge" / "cuda"


def test_the_philox_header_is_the_cpu_builds_own():
    """One generator source for both engines: the CUDA sources reach philox.hpp through the
    include path of the CPU build's csrc, and no copy of it lies beside them."""
    assert build.KERNELS_CSRC / "philox.hpp" in build.HEADERS
    assert not list(build.CSRC.glob("philox*"))
    common = (build.CSRC / "common.cuh").read_text()
    assert re.search(r'#include "philox\.hpp"', common)


def test_a_budget_overrun_and_a_spill_are_reported():
    fat = build.Resources(
        registers=255, stack_bytes=16, spill_stores=8, spill_loads=8, shared_bytes=0
    )
    problems = build.over_budget("softmax_dropout_forward", fat)
    assert any("registers 255" in p for p in problems)
    assert any("spill_stores" in p for p in problems) and any("stack_bytes" in p for p in problems)
    assert build.over_budget("new_kernel", fat) == [
        "new_kernel has no budget in fusebridge/cuda/build.py BUDGETS"
    ]


def test_ptxas_report_is_parsed():
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
"""
    assert build.resources(log) == {"k": build.Resources(40, 24, 8, 4, 1024)}


def test_a_compile_error_names_the_source_and_the_line(tmp_path, monkeypatch):
    broken = tmp_path / "csrc"
    broken.mkdir()
    for f in build.CSRC.iterdir():
        (broken / f.name).write_text(f.read_text())
    (broken / "dropout.cu").write_text(
        '#include "common.cuh"\nextern "C" __global__ void k() { x; }\n'
    )
    monkeypatch.setattr(build, "CSRC", broken)
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(build.CudaBuildError, match=r"dropout\.cu for sm_90:\n.*dropout\.cu\(2\)"):
        build.compile_source("dropout.cu", "sm_90")
    with pytest.raises(build.CudaBuildError, match="arch must look like"):
        build.compile_source("dropout.cu", "90")


def _variants(source: str) -> set[tuple[str, ...]]:
    """The compile-time variants gpu_bench.tune times for a source, the defaults aside."""
    from fusebridge.cuda.gpu_bench import TUNE_DROPOUT, TUNE_SOFTMAX

    return {d for d, _ in (TUNE_DROPOUT if source == "dropout.cu" else TUNE_SOFTMAX)}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", build.SOURCES)
def test_every_tuning_variant_compiles(cache, source, arch):
    """The variants timed on a GPU compile with every kernel. Their register caps differ from
    the defaults', so the budgets do not apply, and one is kept although it spills: the
    shipped kernels are held to the budgets above."""
    for defines in sorted(_variants(source)):
        cubin = build.compile_source(source, arch, defines)
        assert set(build.resources(cubin.log)) == KERNELS[source], (defines, cubin.log)
