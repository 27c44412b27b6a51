"""The soak runs' short form (issue 31; the long one is `python -m fuzz.soak`, figures in
docs/reliability.md): a Session, and our ops inside Paddle and MXNet, called from 4 Python
threads at once. Every result equals a single-threaded call's for the same input, no call
fails, no file descriptor and no Python object is left behind. Resident memory is held to a
looser bound than the long form's plateau (less than 1 MiB over the last half of 100000 runs):
over a few thousand calls the allocators' high-water marks still rise (glibc gives each
thread an arena; ONNX Runtime's arena grows with the largest runs that coincide), 1-2 MiB a
thousand calls here, where a leak of one result a call grows by hundreds."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).parents[1]))  # the fuzz package, after the installed one

from fuzz import soak

SHORT_BOUND_MIB = 16.0


def _passes(result: soak.Soak) -> None:
    assert not result.failures(SHORT_BOUND_MIB), (result.row(), result.failures(SHORT_BOUND_MIB))
    assert result.rss[-1][0] == result.calls  # every call ran


def test_a_session_from_four_threads():
    cases, same = soak.session_cases(batches=8)
    _passes(soak.soak("session", cases, same, calls=600, threads=4))


@pytest.mark.paddle
def test_the_paddle_ops_from_four_threads():
    pytest.importorskip("paddle")
    _passes(soak.run("paddle", calls=600))


@pytest.mark.mxnet
def test_the_mxnet_ops_from_four_threads():
    pytest.importorskip("mxnet")
    _passes(soak.run("mxnet", calls=600))


def test_a_leak_is_seen():
    """The soak's own check: a call that keeps its result alive is caught. The leak is pages
    mapped afresh and written, so that it shows in resident memory whatever the heap already
    holds free (inside a long pytest run, malloc served plain bytes from resident free space)."""
    kept = []

    def leak() -> None:
        pages = mmap.mmap(-1, 256 << 10)
        pages.write(b"x" * len(pages))
        kept.append([pages])  # a list: gc tracks it

    cases = [(leak, None)]
    result = soak.soak("leak", cases, lambda got, want: True, calls=400, threads=4)
    assert any("resident memory grew" in f for f in result.failures(SHORT_BOUND_MIB))
    assert any("Python objects" in f for f in result.failures(SHORT_BOUND_MIB))
