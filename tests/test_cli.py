"""The `fusebridge` command, run as a user runs it."""

import json
import shutil
import subprocess
import sys

import pytest

import fusebridge


def run(*args):
    exe = shutil.which("fusebridge")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "fusebridge.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_version():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == fusebridge.__version__


def test_info_reports_the_core():
    out = run("info")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["engines"]["cpu"] == "available"
    assert info["isa"]["selected"] in info["isa"]["available"]
    assert info["blas"]["library"] == "scipy_openblas" and info["blas"]["threads"] >= 1
    assert {"hits", "misses", "capacity"} <= set(info["primitive_cache"])


def test_demo_runs_and_checks_itself():
    out = run("demo")
    assert out.returncode == 0, out.stderr
    assert "backward from the mask == backward recomputed from the seed: True" in out.stdout
    assert "the tensor run as two shards == the whole: True" in out.stdout


@pytest.mark.parametrize("p", ["1.5", "nan"])
def test_demo_bad_p_is_a_clean_error(p):
    out = run("demo", "--p", p)
    assert out.returncode == 2 and "p must lie in [0, 1]" in out.stderr
