"""The compiled core's settings and its BLAS."""

import numpy as np
import pytest

from fusebridge import ArgumentError, kernels


@pytest.mark.parametrize(
    "shape", [(1, 1, 1), (3, 5, 2), (64, 33, 17), (301, 257, 129), (20, 64, 1000)]
)
def test_sgemm_through_openblas(shape, threads):
    threads(2)  # the two largest are split over the threads, by rows and by columns
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(kernels.sgemm(a, b, alpha=2.0), 2.0 * (a @ b), rtol=1e-5, atol=1e-5)


def test_sgemm_rejects_shapes_that_do_not_chain():
    with pytest.raises(ArgumentError, match="sgemm"):
        kernels.sgemm(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))


def test_blas_is_scipy_openblas():
    info = kernels.blas_info()
    assert info["library"] == "scipy_openblas"
    assert "OpenBLAS" in info["config"]


def test_one_thread_setting_drives_openmp_and_blas(threads):
    for n in (1, 2):
        threads(n)
        info = kernels.blas_info()
        assert kernels.get_num_threads() == n and info["threads"] == n
        # BLAS runs in row slices on the OpenMP threads; OpenBLAS's own pool never wakes.
        assert info["openblas_pool_threads"] == 1
    with pytest.raises(ArgumentError):
        kernels.set_num_threads(0)


def test_isa_selection():
    assert kernels.available_isas()[0] == "scalar"
    assert kernels.isa() in kernels.available_isas()
    with pytest.raises(ArgumentError, match="set_isa"):
        kernels.set_isa("sse9")
