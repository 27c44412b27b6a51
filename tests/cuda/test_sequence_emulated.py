"""The cuda engine's sequence ops (crf_decoding, lod_to_padded, padded_to_lod) run on the CPU:
the UNCHANGED fusebridge/cuda/csrc/sequence.cu compiled by g++ with the emulator of
tests/cuda/emulator under AddressSanitizer and UBSan, driven by the engine's own Python code,
against the cpu engine: the case list of fusebridge/cuda/sequence_cases.py under several launch
shapes, the argument errors, and the ops' cuda bindings."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from helpers.cuda_emulator import EmulatedLauncher, Emulator, build_harness, compiler

from fusebridge import cuda, kernels, ops
from fusebridge.cuda import build, device, gpu_cases, sequence_cases
from fusebridge.errors import Error

pytestmark = pytest.mark.skipif(compiler() is None, reason="the emulator needs g++")

KERNELS = ["crf_decoding", "lod_to_padded", "padded_to_lod"]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Emulator:
    folder = tmp_path_factory.mktemp("emulator")
    sources = [build.CSRC / "sequence.cu"]
    return Emulator(build_harness(sources, KERNELS, [build.CSRC, build.KERNELS_CSRC], folder))


def _host_io() -> gpu_cases.Arrays:
    # Copies, as to and from a device: the engine never sees the oracle's arrays.
    return gpu_cases.Arrays(lambda a: np.array(a, copy=True), lambda a: np.asarray(a))


@pytest.mark.parametrize(("block", "max_grid"), [(32, 1), (96, 2), (256, 5)])
def test_every_sequence_case_passes_under_any_launch_shape(emulator, block, max_grid):
    """Bit for bit with the cpu engine; one warp for everything (32 x 1) makes every kernel
    loop grid-stride, and the fresh outputs are poisoned, so an unwritten element shows."""
    launcher = EmulatedLauncher(emulator, block, max_grid)
    with device.use_launcher(launcher):
        results = sequence_cases.run_all(_host_io())
    assert results and [r for r in results if not r["ok"]] == []
    assert {kernel for kernel, *_ in launcher.launches} == set(KERNELS)


def test_the_small_cases_run_every_kernel(emulator):
    launcher = EmulatedLauncher(emulator, 64, 3)
    with device.use_launcher(launcher):
        results = sequence_cases.run_all(_host_io(), small=True)
    assert results and all(r["ok"] for r in results)
    assert {kernel for kernel, *_ in launcher.launches} == set(KERNELS)


E = np.ones((5, 3), np.float32)
T = np.ones((5, 3), np.float32)
OFFSETS = np.array([0, 2, 5])
X = np.ones((5, 2), np.float32)
P = np.ones((3, 2, 4), np.float32)
BAD_CALLS = {
    "emission int": ("crf_decoding", (E.astype(np.int32), T, OFFSETS)),
    "emission 1-D": ("crf_decoding", (E[0], T, OFFSETS)),
    "no tags": ("crf_decoding", (E[:, :0], T[:2, :0], OFFSETS)),
    "transition shape": ("crf_decoding", (E, T[:4], OFFSETS)),
    "offsets end": ("crf_decoding", (E, T, np.array([0, 2, 4]))),
    "offsets fall": ("crf_decoding", (E, T, np.array([0, 3, 2, 5]))),
    "offsets float": ("crf_decoding", (E, T, np.array([0.0, 5.0]))),
    "label float": ("crf_decoding", (E, T, OFFSETS, np.ones((5, 1)))),
    "label shape": ("crf_decoding", (E, T, OFFSETS, np.ones(5, np.int64))),
    "layout": ("lod_to_padded", (X, OFFSETS, "nct")),
    "pad side": ("lod_to_padded", (X, OFFSETS, "tnc", "middle")),
    "x scalar": ("lod_to_padded", (np.array(1.0, np.float32), np.array([0]))),
    "x offsets": ("lod_to_padded", (X, np.array([1, 5]))),
    "padded 1-D": ("padded_to_lod", (P[0, 0], None)),
    "seq_lens long": ("padded_to_lod", (P, np.array([1, 4]))),
    "seq_lens negative": ("padded_to_lod", (P, np.array([1, -1]), "ntc")),
    "seq_lens count": ("padded_to_lod", (P, np.array([1, 1, 1]))),
    "seq_lens 2-D": ("padded_to_lod", (P, np.ones((2, 1), np.int64))),
}


def _error(call) -> Error:
    with pytest.raises(Error) as info:
        call()
    return info.value


@pytest.mark.parametrize("case", BAD_CALLS, ids=str)
def test_bad_arguments_are_answered_as_the_cpu_engine_answers(emulator, case):
    """The same typed error, word for word, before anything is launched."""
    fn, call_args = BAD_CALLS[case]
    launcher = EmulatedLauncher(emulator, 32, 1)
    with device.use_launcher(launcher):
        got = _error(lambda: getattr(cuda, fn)(*call_args))
    want = _error(lambda: getattr(kernels, fn)(*call_args))
    assert (type(got), str(got)) == (type(want), str(want))
    assert launcher.launches == []


def test_a_host_array_is_refused_on_a_gpu():
    """Without a chosen launcher the engine takes device arrays only: numpy data is refused by
    name (host offsets are what it expects, though)."""
    with pytest.raises(Error, match="must be a CUDA device array"):
        cuda.lod_to_padded(X, OFFSETS)


def _node(op_type: str, inputs: list[str], attrs: dict | None = None) -> ir.Node:
    return ops.node(op_type, [ir.Value(name=n) for n in inputs], attrs or {}, name="n")


@pytest.mark.parametrize("layout", ["tnc", "ntc"])
def test_the_ops_cuda_bindings_equal_the_cpu_bindings(emulator, layout):
    rng = np.random.default_rng(7)
    offsets = np.array([0, 3, 3, 7], np.int64)
    emission = rng.standard_normal((7, 4)).astype(np.float32)
    transition = rng.standard_normal((6, 4)).astype(np.float32)
    label = rng.integers(0, 4, (7, 1))
    x = rng.standard_normal((7, 3)).astype(np.float32)
    padded = kernels.lod_to_padded(x, offsets, layout)[0]
    runs = [
        (_node("CRFDecoding", ["e", "o", "t"]), [emission, offsets, transition, None]),
        (_node("CRFDecoding", ["e", "o", "t", "l"]), [emission, offsets, transition, label]),
        (_node("LoDToPadded", ["x", "o"], {"layout": layout}), [x, offsets]),
        (_node("PaddedToLoD", ["p", "o"], {"layout": layout}), [padded, offsets]),
    ]
    with device.use_launcher(EmulatedLauncher(emulator, 64, 2)):
        for node, inputs in runs:
            assert set(ops.op(node.op_type).bindings) == {"cpu", "cuda"}
            want = ops.prepare(node, {}, engine="cpu")(inputs)
            dev = [None if a is None else np.array(a, copy=True) for a in inputs]
            got = ops.prepare(node, {}, engine="cuda")(dev)
            assert len(got) == len(want) == 1
            assert got[0].dtype == want[0].dtype and got[0].tobytes() == want[0].tobytes()
