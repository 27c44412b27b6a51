"""What the tests that run Paddle as the oracle share: paddle (or a skip when it is absent), the
legacy static mode (fusebridge.integrations.paddle.legacy) and a saved model run once on
Paddle's static Executor."""

import os

import numpy as np
import pytest

from fusebridge.integrations.paddle.legacy import import_paddle, legacy_static


def paddle_or_skip():
    pytest.importorskip("paddle")
    return import_paddle()


def run_executor(model_dir: str | os.PathLike, feeds: dict) -> dict:
    """The saved model loaded and run once on the static Executor (CPU, unfused): fetch name ->
    array; feeds map an input name to (array, sentence lengths or None)."""
    from fusebridge.bench.paddle_runtime import ExecutorRunner

    return ExecutorRunner(model_dir).run(feeds)


def run_inference(model_dir: str | os.PathLike, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Paddle Inference's predictor (no IR passes: the program as saved) on the saved files,
    a PIR model.json or a legacy .pdmodel: its outputs in order."""
    paddle = paddle_or_skip()
    from fusebridge.integrations.paddle.params import find_model_files

    model, params = find_model_files(model_dir)
    config = paddle.inference.Config(str(model), str(params))
    config.disable_gpu()
    config.enable_new_ir(model.suffix == ".json")
    config.switch_ir_optim(False)
    config.set_cpu_math_library_num_threads(1)
    predictor = paddle.inference.create_predictor(config)
    for name, array in feeds.items():
        handle = predictor.get_input_handle(name)
        handle.reshape(list(array.shape))
        handle.copy_from_cpu(array)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


def assert_close_to_paddle(
    model, feeds: dict, got: list, want: list, where: str, ours=None
) -> None:
    """Each output (in order) within ours (`ours`: the library model of our side, a Session's
    by default) and Paddle's error bounds of `model` on `feeds` (tests/helpers/graph_bounds.py)."""
    from .error_bounds import PADDLE, assert_within
    from .graph_bounds import SESSION, output_bounds

    bounds = list(output_bounds(model, feeds, (ours or SESSION, PADDLE)).values())
    assert len(got) == len(want) == len(bounds), where
    for k, (g, w, b) in enumerate(zip(got, want, bounds)):
        assert_within(g, w, b, f"{where} output {k}")


__all__ = [
    "assert_close_to_paddle",
    "legacy_static",
    "paddle_or_skip",
    "run_executor",
    "run_inference",
]
