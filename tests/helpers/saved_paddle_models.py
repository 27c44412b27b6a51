"""The checks every set of Paddle-saved model fixtures gets (tests/fixtures/paddle3 and
tests/fixtures/paddle_families): each loads without paddle, equals Paddle Inference on the same
files within both error bounds (as loaded and optimized), its portable export runs in plain ONNX
Runtime with our outputs, and regenerating the fixtures writes the same programs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

import fusebridge as fb

from .error_bounds import ONNXRUNTIME
from .graph_bounds import SESSION, check_outputs, output_bounds
from .paddle_oracle import assert_close_to_paddle, run_inference
from .python_under_test import run_python


def saved_forms(root: Path) -> list[str]:
    """ "model/way" of every saved model below root."""
    return sorted(f"{p.parent.name}/{p.name}" for p in root.glob("*/*") if p.is_dir())


def assert_load_without_paddle(paths: list[Path]) -> None:
    code = (
        "import sys; sys.modules['paddle'] = None\n"
        "import fusebridge as fb\n"
        "for path in sys.argv[1:]:\n"
        "    fb.Session(fb.optimize(fb.load(path))[0])\n"
        "print(sorted(m for m, v in sys.modules.items() if m.startswith('paddle') and v))\n"
    )
    done = run_python(code, *map(str, paths))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def assert_equals_paddle_inference(model_dir: Path, feeds: dict[str, np.ndarray]) -> None:
    want = run_inference(model_dir, feeds)
    model = fb.load(model_dir)
    for label, graph in (("as loaded", model), ("optimized", fb.optimize(model)[0])):
        got = list(fb.Session(graph).run(feeds).values())
        assert_close_to_paddle(model, feeds, got, want, f"{model_dir} {label}")


def assert_portable_export_runs(model_dir: Path, feeds: dict, tmp_path: Path) -> None:
    model = fb.load(model_dir)
    want = fb.Session(fb.optimize(model)[0]).run(feeds)
    path = tmp_path / "portable.onnx"
    fb.save_onnx(fb.optimize(fb.load(model_dir), "portable")[0], path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = dict(zip(want, session.run(None, feeds)))
    bounds = output_bounds(model, feeds, (SESSION, ONNXRUNTIME))
    check_outputs(got, want, bounds, f"{model_dir} portable")


def assert_same_programs(fresh: Path, committed: Path) -> None:
    """The models below `fresh` (just regenerated) have the committed ones' op types, in
    order."""
    for saved in saved_forms(committed):
        new, old = fb.load(fresh / saved), fb.load(committed / saved)
        assert [n.op_type for n in new.graph] == [n.op_type for n in old.graph], saved
