"""The PIR form of each op of round two (comparisons, reductions, conv2d, pool2d, batch_norm,
squeeze / unsqueeze / flatten, full_like / arange, floor_divide, maximum, minimum, pow,
hardtanh, argmax): programs that Paddle 3.3 itself wrote with `paddle.jit.save`
(tests/helpers/pir_op_programs.py, all made in one child process), each loaded and run on both
Session backends, every output equal to Paddle's own dygraph op within both error bounds
(integers and booleans exactly)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import pir_op_programs
from helpers.paddle_oracle import assert_close_to_paddle, paddle_or_skip
from helpers.python_under_test import run_python

import fusebridge as fb

pytestmark = pytest.mark.paddle
NAMES = [
    *("less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"),
    *("sum", "mean", "max", "min", "prod"),
    *("conv2d", "pool2d", "batch_norm", "squeeze_unsqueeze_flatten", "full_like_arange"),
    "arithmetic",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """Every program saved by Paddle with PIR on, in one child process (a few seconds)."""
    paddle_or_skip()
    root = tmp_path_factory.mktemp("pir_ops")
    code = (
        "import runpy, sys\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    done = run_python(
        code, pir_op_programs.__file__, str(root), env={"FLAGS_enable_pir_api": "1"}, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def test_every_program_is_listed():
    assert sorted(NAMES) == sorted(pir_op_programs.programs())


@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize("name", NAMES)
def test_pir_op_matches_paddle(saved, name, backend):
    with np.load(saved / name / "feeds.npz") as stored:
        feeds = {k: stored[k] for k in stored.files}
    with np.load(saved / name / "expected.npz") as stored:
        want = [stored[f"arr_{k}"] for k in range(len(stored.files))]
    model = fb.load(saved / name)
    got = list(fb.Session(model, backend=backend).run(feeds).values())
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == w.dtype and np.shape(g) == w.shape, (name, g, w)
    assert_close_to_paddle(model, feeds, got, want, f"{name} ({backend})")
