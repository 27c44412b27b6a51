"""The cuda engine's fusion_gru in the CPU emulation (tests/cuda/emulator: the unchanged
gru.cu, every block of the persistent recurrence a set of fibers resident at once, the grid
barrier spinning on __nanosleep), against the cpu engine on the GPU check's case list
(fusebridge/cuda/gru_cases.py), under several grids and blocks: what a GPU's SM count or our
block size changes must change no bit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cuda_emulator import EmulatedLauncher, Emulator, build_harness, compiler

from fusebridge import cuda, kernels
from fusebridge.cuda import build, device, gpu_cases, gru, gru_cases
from fusebridge.errors import ArgumentError, ArgumentTypeError

pytestmark = pytest.mark.skipif(compiler() is None, reason="the emulator needs g++")

KERNELS = ["gru_projection", "gru_recurrence"]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Emulator:
    exe = build_harness(
        [build.CSRC / "gru.cu"],
        KERNELS,
        [build.CSRC, build.KERNELS_CSRC],
        tmp_path_factory.mktemp("gru-emulator"),
    )
    return Emulator(exe)


@pytest.fixture
def small_blocks(monkeypatch):
    """Recurrence blocks of 64 threads: 2 warps share a block's sentences (the GPU runs 8)."""
    monkeypatch.setitem(gru.THREADS, "gru_recurrence", 64)


def _host_io() -> gpu_cases.Arrays:
    return gpu_cases.Arrays(lambda a: np.array(a, copy=True), lambda a: np.asarray(a))


def _failed(results: list[dict]) -> list[dict]:
    assert results
    return [r for r in results if not r["ok"]]


def test_every_gru_case_of_the_gpu_check_passes_emulated(emulator, small_blocks):
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3, resident=4)
    with device.use_launcher(launcher):
        results = list(gru_cases.gru_cases(_host_io()))
    assert _failed(results) == []
    assert {kernel for kernel, *_ in launcher.launches} == set(KERNELS)
    # Both paths of the projection, and grids of several blocks per direction.
    assert any(grid > 1 for kernel, grid, _ in launcher.launches if kernel == "gru_recurrence")


def _bidirectional_run(resident: int, threads: int, emulator, monkeypatch):
    monkeypatch.setitem(gru.THREADS, "gru_recurrence", threads)
    case = gru_cases.Case("grid", [5, 2, 7, 0, 3], 6, 24, direction="bidirectional").make()
    c = case.data
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3, resident=resident)
    with device.use_launcher(launcher):
        w = cuda.pack_gru_weights(c["wx"], c["wh"], c["bias"], c["bias_h"])
        hidden, last = cuda.fusion_gru(c["x"], w, h0=c["h0"], return_last=True, **case.kwargs())
    grids = [grid for kernel, grid, _ in launcher.launches if kernel == "gru_recurrence"]
    return hidden, last, grids


@pytest.mark.parametrize(("resident", "threads"), [(2, 256), (6, 96), (48, 32)])
def test_the_bits_do_not_depend_on_the_grid_or_the_block(emulator, monkeypatch, resident, threads):
    """As GPUs of 2, 6 and 48 SMs (1 to 24 blocks a direction, owning 24 to 1 units each)
    and blocks of 8, 3 and 1 warps, against 4 SMs with blocks of 2 warps."""
    want, want_last, base = _bidirectional_run(4, 64, emulator, monkeypatch)
    got, got_last, grids = _bidirectional_run(resident, threads, emulator, monkeypatch)
    assert grids != base  # another grid indeed
    assert got.tobytes() == want.tobytes() and got_last.tobytes() == want_last.tobytes()


def test_weights_too_large_for_the_resident_blocks_are_refused(emulator, small_blocks):
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3, resident=2)
    rng = np.random.default_rng(0)
    wx = rng.standard_normal((2, 3, 3 * 40)).astype(np.float32)
    wh = rng.standard_normal((2, 40, 3 * 40)).astype(np.float32)
    with device.use_launcher(launcher):
        w = cuda.pack_gru_weights(wx, wh)
        with pytest.raises(ArgumentError, match="hidden size 40 x 2 direction"):
            cuda.fusion_gru(np.zeros((3, 3), np.float32), w, offsets=[0, 3],
                            direction="bidirectional")  # fmt: skip


def test_errors_name_the_argument_and_what_was_expected(emulator, small_blocks):
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3, resident=4)
    rng = np.random.default_rng(1)
    wx = rng.standard_normal((4, 6)).astype(np.float32)
    wh = rng.standard_normal((2, 6)).astype(np.float32)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    with device.use_launcher(launcher):
        w = cuda.pack_gru_weights(wx, wh)
        with pytest.raises(ArgumentError, match="x has 3 features, the weights expect IC = 4"):
            cuda.fusion_gru(np.ascontiguousarray(x[:, :3]), w, offsets=[0, 5])
        with pytest.raises(ArgumentTypeError, match="x must be float32"):
            cuda.fusion_gru(x.astype(np.float64), w, offsets=[0, 5])
        with pytest.raises(ArgumentError, match="offsets"):
            cuda.fusion_gru(x, w, offsets=[0, 6])
        with pytest.raises(ArgumentError, match="h0 must have shape"):
            cuda.fusion_gru(x, w, offsets=[0, 2, 5], h0=np.zeros((1, 3, 2), np.float32))
        with pytest.raises(ArgumentTypeError, match=r"fusebridge\.cuda\.pack_gru_weights"):
            cuda.GRUKernel(kernels.pack_gru_weights(wx, wh))
        with pytest.raises(ArgumentError, match="direction 'bidirectional' needs weights for 2"):
            cuda.fusion_gru(x, w, offsets=[0, 5], direction="bidirectional")


def test_the_ops_cuda_binding_equals_the_cpu_binding(emulator, small_blocks):
    """FusionGRU through ops.prepare(..., engine="cuda") against engine="cpu": weights packed
    once at prepare, lengths as host offsets."""
    import onnx_ir as ir

    from fusebridge import ops

    case = gru_cases.Case("op", [4, 1, 3], 5, 6, direction="bidirectional").make()
    c = case.data
    names = ["X", "lengths", "Wx", "Wh", "B", "B_h"]
    values = [ir.Value(name=n) for n in names]
    node = ops.node("FusionGRU", values, {"direction": "bidirectional", "layout": "lod"},
                    num_outputs=2)  # fmt: skip
    constants = {2: c["wx"], 3: c["wh"], 4: c["bias"], 5: c["bias_h"]}
    feeds = [c["x"], case.kwargs()["offsets"], None, None, None, None, None]
    want = ops.prepare(node, constants, engine="cpu")(feeds)
    launcher = EmulatedLauncher(emulator, block=64, max_grid=3, resident=4)
    with device.use_launcher(launcher):
        got = ops.prepare(node, constants, engine="cuda")(feeds)
    hidden_bound, last_bound = gru_cases._bounds(case)
    assert np.all(np.abs(got[0] - want[0]) <= hidden_bound)
    assert np.all(np.abs(got[1] - want[1]) <= last_bound)
