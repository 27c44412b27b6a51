"""The kernels' thread pool (csrc/parallel.hpp): the caller claims parts alongside the workers
and never waits for one that has not started, so results must be the same bits whatever the
workers do: asleep after idle, busy with another Python thread's call, or absent after a fork.
Oracle: the same call on one thread (the thread tests elsewhere compare that with the NumPy
references)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from helpers.python_under_test import run_python

from fusebridge import kernels

T, N, IC, OC = 30, 16, 64, 128  # big enough that the GRU and the dropout use every thread


def gru_case(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, IC)).astype(np.float32)
    wx = (rng.standard_normal((2, IC, 3 * OC)) * 0.1).astype(np.float32)
    wh = (rng.standard_normal((2, OC, 3 * OC)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((2, 3 * OC)) * 0.1).astype(np.float32)
    lens = rng.integers(1, T + 1, N)
    gru = kernels.GRUKernel(
        kernels.pack_gru_weights(wx, wh, b, b),
        layout="tnc",
        direction="bidirectional",
        linear_before_reset=True,
    )
    return lambda: gru(x, seq_lens=lens)


def drop_case():
    x = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    return lambda: kernels.dropout(x, 0.3, seed=7, offset=11)[0]


def one_thread(fn, threads):
    threads(1)
    want = fn()
    threads(2)
    return want


def test_calls_after_the_workers_went_to_sleep_give_the_same_bits(threads):
    """A worker sleeps after about a millisecond without work; the next call starts without it
    (it joins when it wakes)."""
    for fn in (gru_case(), drop_case()):
        want = one_thread(fn, threads)
        for _ in range(5):
            time.sleep(0.02)
            np.testing.assert_array_equal(fn(), want)


def test_python_threads_calling_kernels_at_once_give_the_same_bits(threads):
    """Kernels release the GIL: while one call's job holds the pool, another thread's call runs
    on its own thread; nothing is shared between the two."""
    cases = [gru_case(0), gru_case(1), drop_case()]
    wants = [one_thread(fn, threads) for fn in cases]
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(cases[i % 3]) for i in range(60)]
        for i, future in enumerate(futures):
            np.testing.assert_array_equal(future.result(), wants[i % 3])


def test_a_forked_child_runs_kernels_with_a_pool_of_its_own():
    """The pool's workers exist in the parent only: the child of a fork after they started gets a
    new pool (pthread_atfork), and its threaded calls neither hang nor differ."""
    script = """
    import os, sys
    import numpy as np
    from fusebridge import kernels
    kernels.set_num_threads(2)
    x = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    want = kernels.dropout(x, 0.3, seed=7, offset=11)[0]  # the workers have started
    pid = os.fork()
    if pid == 0:
        same = all(np.array_equal(kernels.dropout(x, 0.3, seed=7, offset=11)[0], want)
                   for _ in range(20))
        os._exit(0 if same else 3)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
    done = run_python(script, timeout=60)
    assert done.returncode == 0, done.stderr
