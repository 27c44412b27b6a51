"""A fresh interpreter that imports the fusebridge under test: the installed one, or the tree the
tests import (the sanitizer run's), never a source tree that happens to be the working
directory (`python -c` puts the working directory first on sys.path, and CI runs the tests from
the repository's root, which has no compiled core)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import fusebridge


def run_python(
    code: str,
    *args: str,
    limit: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """`python -c code args`; limit: an address-space limit (bytes) set before anything else."""
    prologue = ""
    if limit is not None:
        prologue = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
    path = os.pathsep.join([str(Path(fusebridge.__file__).parents[1]), *sys.path])
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run(
            [sys.executable, "-c", prologue + textwrap.dedent(code), *args],
            cwd=cwd,
            env={**os.environ, **(env or {}), "PYTHONPATH": path},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
