"""Runs a script in a Python process limited to 4 GiB of address space (issue 15's bound: no
input of a few KB may need more) and returns its output lines; run_calls_limited reports how
each of a script's calls ended."""

from __future__ import annotations

import os
import textwrap

import pytest

from .python_under_test import run_python

LIMIT = 4 << 30
# AddressSanitizer reserves terabytes of shadow memory up front: it cannot start under the limit.
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")


def run_limited(script: str) -> list[str]:
    if SANITIZED:
        pytest.skip("AddressSanitizer cannot run under an address-space limit")
    done = run_python(script, limit=LIMIT, env={"OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


# What run_calls_limited appends to its script: a line per call, in order.
REPORT_CALLS = """
import fusebridge as _fb
for call in calls:
    try:
        call()
        print("accepted")
    except _fb.Error as e:
        print(type(e).__name__, e)
"""


def run_calls_limited(script: str) -> list[str]:
    """Runs a script that makes a list `calls` of functions under the limit and calls each: a
    line per call, "accepted" or the fusebridge error's type name and message."""
    return run_limited(textwrap.dedent(script) + REPORT_CALLS)
