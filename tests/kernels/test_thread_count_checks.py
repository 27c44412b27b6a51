"""Thread counts: set_num_threads(100000) used to end the process in libgomp ("Thread creation
failed") at the next parallel region, when the kernels ran on OpenMP. Counts past thread_cap()
are refused with the allowed range, other types with ArgumentTypeError, and OMP_NUM_THREADS past
the cap is lowered to it when the core loads."""

import os

import numpy as np
import pytest
from helpers.python_under_test import run_python

from fusebridge import ArgumentError, ArgumentTypeError, kernels
from fusebridge.kernels import core


def test_the_cap_is_the_usable_cores_or_at_most_256():
    cap = kernels.thread_cap()
    usable = len(os.sched_getaffinity(0))  # the cores the core counts
    assert min(usable, 256) <= cap <= max(usable, 256)


@pytest.mark.parametrize("n", [0, -1, 100_000, 2**31, 2**64, "cap+1"])
def test_counts_outside_the_range_are_refused(threads, n):
    cap = kernels.thread_cap()
    n = cap + 1 if n == "cap+1" else n
    before = kernels.get_num_threads()
    with pytest.raises(
        ArgumentError, match=rf"^set_num_threads: n must lie in \[1, {cap}\]"
    ) as info:
        kernels.set_num_threads(n)
    assert str(info.value).endswith(f"got {n}")
    assert kernels.get_num_threads() == before


@pytest.mark.parametrize("n", [2.0, "4", None, True, [2], np.float32(2)])
def test_other_types_are_refused(threads, n):
    with pytest.raises(ArgumentTypeError, match=r"^set_num_threads: n must be an integer, got "):
        kernels.set_num_threads(n)


def test_the_cap_and_numpy_integers_are_accepted(threads):
    threads(np.int64(kernels.thread_cap()))
    assert kernels.get_num_threads() == kernels.thread_cap()
    kernels.dropout(np.ones(1 << 16, np.float32), 0.5, seed=1)  # starts a full team
    threads(np.int32(1))
    assert kernels.get_num_threads() == 1


def test_the_core_refuses_past_the_cap_itself():
    """For callers of _C: the same bound, in C++."""
    with pytest.raises(ArgumentError, match=r"set_num_threads: n must lie in \[1, "):
        core._C.set_num_threads(100_000)


def test_a_huge_omp_num_threads_is_lowered_to_the_cap():
    script = (
        "import numpy as np; from fusebridge import kernels as k; "
        "k.dropout(np.ones(1 << 16, np.float32), 0.5, seed=1); "
        "print(k.get_num_threads(), k.thread_cap())"
    )
    done = run_python(script, env={"OMP_NUM_THREADS": "100000"})
    assert done.returncode == 0, done.stderr
    got, cap = map(int, done.stdout.split())
    assert got == cap
