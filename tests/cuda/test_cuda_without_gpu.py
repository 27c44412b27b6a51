"""The cuda engine on a machine with no GPU and no driver (CI): importing it, `fusebridge
info`, every call and the check command's no-GPU half answer cleanly, with the engine's
errors, never a crash or a hang."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest

from fusebridge import cuda
from fusebridge.errors import ArgumentTypeError, Error

pytestmark = pytest.mark.skipif(cuda.is_available(), reason="a GPU is here: tests/cuda/gpu")


class FakeDeviceArray:
    """What a framework hands over: a CUDA array interface, here pointing at no device."""

    __cuda_array_interface__: ClassVar[dict] = {
        "shape": (4,),
        "typestr": "<f4",
        "data": (0x7F0000000000, False),
        "version": 3,
    }


def test_status_says_what_is_missing():
    assert cuda.status().startswith("not available: ")
    assert cuda.is_available() is False


@pytest.mark.parametrize(
    "call",
    [
        lambda x: cuda.dropout(x, 0.5, seed=1),
        lambda x: cuda.dropout_backward(x, 0.5, seed=1),
        lambda x: cuda.softmax_dropout(x, 0.5, seed=1),
        lambda x: cuda.softmax(x),
        lambda x: cuda.matmul_dropout(x, x, 0.5, seed=1),
        lambda x: cuda.matmul(x, x),
    ],
)
def test_host_arrays_are_refused_by_name(call):
    with pytest.raises(ArgumentTypeError, match="must be a CUDA device array"):
        call(np.ones((2, 2), np.float32))


def test_device_arrays_without_a_driver_are_an_engine_error():
    pytest.importorskip("cupy")
    with pytest.raises(Error, match="no CUDA driver or GPU"):
        cuda.dropout(FakeDeviceArray(), 0.5, seed=1)
    with pytest.raises(Error, match="no CUDA driver or GPU"):
        cuda.dropout_mask((8,), 0.5, seed=1)


def _run(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_info_names_the_engines_state(tmp_path):
    done = _run("-m", "fusebridge.cli", "info", cwd=tmp_path)  # not the source tree
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["engines"]["cuda"].startswith("not available: ")


def test_the_check_commands_no_gpu_half_runs(tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    done = _run("-m", "fusebridge.cuda.check", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    compiled = json.loads((tmp_path / "out" / "compile_kernels.json").read_text())
    # 8 dropout kernels, 2 of the GRU, 3 of the sequence ops; for sm_80 and sm_90.
    assert compiled["ok"] and len(compiled["kernels"]) == 2 * 13
    for part in ("correctness", "graph_replay", "sanitizer", "benchmarks"):
        result = json.loads((tmp_path / "out" / f"{part}.json").read_text())
        assert result["ok"] is None and "no CUDA GPU" in result["skipped"]


def test_the_cuda_extra_names_the_cuda_13_wheels():
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].strip() for req in extras["cuda"]}
    assert names == {"cupy-cuda13x", "cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-cublas"}
    assert not any("-cu13" in n or "-cu12" in n for n in names)
    assert all(">=13" in r or ">=14" in r for r in extras["cuda"])
