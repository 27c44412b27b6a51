"""What the tests that run Paddle as the oracle share: paddle (or a skip when it is absent), the
legacy static mode (fusebridge.integrations.paddle.legacy) and a saved model run once on
Paddle's static Executor."""

import os

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


__all__ = ["legacy_static", "paddle_or_skip", "run_executor"]
