import os

import pytest
from hypothesis import HealthCheck, settings

from fusebridge import kernels

# This folder is on sys.path (pytest's default "prepend" import mode puts a conftest's folder
# there when the folder has no __init__.py): the tests import what they share as
# `helpers.NAME` (tests/helpers/__init__.py).

# each_isa is set once per test on purpose: every generated input runs on that ISA.
SUPPRESSED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]

settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=SUPPRESSED
)
# Under the sanitizers everything runs ~10x slower: fewer examples, same properties.
settings.register_profile(
    "sanitize", max_examples=25, deadline=None, suppress_health_check=SUPPRESSED
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=kernels.available_isas())
def each_isa(request):
    """Runs a test once per instruction set this CPU can execute (scalar, avx2, avx512)."""
    before = kernels.isa()
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa(before)


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = kernels.get_num_threads()
    yield kernels.set_num_threads
    kernels.set_num_threads(before)


@pytest.fixture
def kernel_outputs(monkeypatch):
    """The first output of every kernel step that Sessions created from now on run, in order
    (fusebridge.ops.prepare spied on)."""
    from fusebridge import ops

    made = []
    prepare = ops.prepare

    def spy(node, constants, reuse_output):
        run = prepare(node, constants, reuse_output)

        def run_and_record(inputs):
            outs = run(inputs)
            made.append(outs[0])
            return outs

        return run_and_record

    monkeypatch.setattr("fusebridge.ops.prepare", spy)
    return made
