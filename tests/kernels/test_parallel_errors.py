"""An exception thrown inside a part of a kernel's job (csrc/parallel.hpp) reaches the caller as
a typed fusebridge error, from a pool worker as from the calling thread, and the pool keeps
working after it (issue 31: an exception in a part used to end the process).

`_C._parallel_throw_test` is the test hook: parts that sleep, of which those run on a slot at
or above `throw_slot` throw (slot 0 is the calling thread, 1.. the pool's workers)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.python_under_test import run_python

import fusebridge as fb
from fusebridge import kernels
from fusebridge.kernels import _C

KINDS = {
    "invalid_argument": fb.ArgumentError,
    "bad_alloc": fb.ExecutionError,
    "logic_error": fb.ExecutionError,
}


def _throw_on_a_worker(kind: str) -> Exception:
    """The error of a job whose parts throw only on pool workers (retried until a worker took a
    part: on a loaded machine the caller may finish every part before a worker wakes)."""
    for _ in range(50):
        try:
            _C._parallel_throw_test(64, 2, 1, kind, 500)
        except fb.Error as exc:
            return exc
    pytest.fail("no pool worker ran a part in 50 jobs")


@pytest.mark.parametrize("kind", KINDS)
def test_an_exception_on_a_pool_worker_reaches_the_caller(threads, kind):
    threads(2)
    exc = _throw_on_a_worker(kind)
    assert type(exc) is KINDS[kind]
    if kind == "bad_alloc":
        assert "could not allocate its work memory" in str(exc)
    else:
        assert "on slot 1" in str(exc)  # thrown on the worker, raised here


@pytest.mark.parametrize("kind", KINDS)
def test_an_exception_on_the_calling_thread_reaches_the_caller(threads, kind):
    threads(2)
    with pytest.raises(KINDS[kind]):
        _C._parallel_throw_test(64, 2, 0, kind, 100)


def test_the_pool_works_after_a_part_threw(threads):
    threads(2)
    _throw_on_a_worker("logic_error")
    assert _C._parallel_throw_test(64, 2, 99, "none", 500) > 0  # workers take parts again
    x = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    np.testing.assert_array_equal(
        kernels.dropout(x, 0.5, seed=3), kernels.reference.dropout(x, 0.5, seed=3)[0]
    )


def test_a_throwing_part_does_not_end_the_process():
    """Before the fix this aborted ('terminate called ...'): checked in a child, so that a
    regression fails here instead of killing pytest."""
    code = """
        import fusebridge as fb
        from fusebridge import kernels
        from fusebridge.kernels import _C
        kernels.set_num_threads(2)
        for _ in range(20):
            try:
                _C._parallel_throw_test(64, 2, 1, "logic_error", 500)
            except fb.ExecutionError:
                pass
        print("alive")
    """
    done = run_python(code)
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr[-2000:]
