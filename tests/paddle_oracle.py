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


def assert_close_to_scale(
    got: list[np.ndarray], want: list[np.ndarray], where: str, tolerance: float = 1e-5
) -> None:
    """Each output within `tolerance` of the largest |value| Paddle gave for it."""
    assert len(got) == len(want), where
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{where} output {k}"
        scale = max(float(np.abs(w).max()), 1e-6)
        err = float(np.abs(g - w).max()) / scale
        assert err <= tolerance, f"{where} output {k}: error {err:.2e} of the output scale"


__all__ = [
    "assert_close_to_scale",
    "legacy_static",
    "paddle_or_skip",
    "run_executor",
    "run_inference",
]
