"""The compiled core's settings and its BLAS."""

import shutil
import subprocess

import numpy as np
import pytest
from helpers.error_bounds import gemm_error_bound

from fusebridge import ArgumentError, kernels
from fusebridge.kernels import core

GEMM_SHAPES = [(1, 1, 1), (3, 5, 2), (64, 33, 17), (301, 257, 129), (20, 64, 1000), (600, 40, 1100)]


@pytest.mark.parametrize("shape", GEMM_SHAPES)
def test_sgemm_through_openblas(shape, threads):
    threads(2)  # the largest are cut into several pieces (rows and columns)
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    exact = 2.0 * (a.astype(np.float64) @ b.astype(np.float64))
    error = np.abs(kernels.sgemm(a, b, alpha=2.0) - exact)
    bound = gemm_error_bound(2.0 * (np.abs(a).astype(np.float64) @ np.abs(b)), k)
    assert (error <= bound).all()


@pytest.mark.parametrize("shape", GEMM_SHAPES)
def test_sgemm_bits_do_not_depend_on_threads(shape, threads):
    """Pieces are cut from the shape, never from the thread count."""
    m, k, n = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(kernels.sgemm(a, b))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


def test_sgemm_rejects_shapes_that_do_not_chain():
    with pytest.raises(ArgumentError, match="sgemm"):
        kernels.sgemm(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))


def test_blas_is_scipy_openblas():
    info = kernels.blas_info()
    assert info["library"] == "scipy_openblas"
    assert "OpenBLAS" in info["config"]


def test_one_thread_setting_drives_the_pool_and_blas(threads):
    for n in (1, 2):
        threads(n)
        info = kernels.blas_info()
        assert kernels.get_num_threads() == n and info["threads"] == n
        # BLAS runs in row slices on the kernels' pool; OpenBLAS's own pool never wakes.
        assert info["openblas_pool_threads"] == 1
    with pytest.raises(ArgumentError):
        kernels.set_num_threads(0)


def test_isa_selection():
    assert kernels.available_isas()[0] == "scalar"
    assert kernels.isa() in kernels.available_isas()
    with pytest.raises(ArgumentError, match="set_isa"):
        kernels.set_isa("sse9")


@pytest.mark.parametrize("cap", ["scalar", "avx2"])
def test_fusebridge_isa_caps_the_isas_like_a_narrower_cpu(cap, tmp_path):
    """FUSEBRIDGE_ISA=avx2 on an AVX-512 machine behaves as an AVX2-only CPU (AMD Zen 3): the
    wider paths are not available, so nothing (tests included) selects them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "from fusebridge import kernels; print(kernels.isa(), *kernels.available_isas())"
    import fusebridge

    # The fusebridge under test, also where it is a tree on sys.path rather than an install.
    path = os.pathsep.join([str(Path(fusebridge.__file__).parents[1]), *sys.path])
    env = {**os.environ, "FUSEBRIDGE_ISA": cap, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    isas = kernels.available_isas()
    assert out.stdout.split() == [cap, *isas[: isas.index(cap) + 1]]
    env["FUSEBRIDGE_ISA"] = "sse9"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode != 0 and "FUSEBRIDGE_ISA: expected one of" in out.stderr


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_the_core_exports_no_kernel_symbol():
    """The kernels library is linked into _C with its symbols hidden: nothing but the module's
    init leaves _C, so no other library (the MXNet ops' copy of the kernels) can bind to ours,
    and calls between kernels need no PLT."""
    exported = subprocess.run(
        ["nm", "-D", "-C", "--defined-only", core._C.__file__],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "PyInit__C" in exported
    # The enums bound for Python keep their RTTI (nanobind compares types by it): data only.
    code = [line for line in exported.splitlines() if "typeinfo" not in line]
    assert not [line for line in code if "fusebridge::" in line]
