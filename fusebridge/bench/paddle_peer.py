"""One Paddle runtime timed on one batch, in its own process (paddle_comparison.py starts it), so
a Paddle crash ends only this process.

    python -m fusebridge.bench.paddle_peer \\
        MODEL_DIR PEER FEED.npz OUT.npz REPEAT THREADS

reads the inputs from FEED.npz (paddle_comparison.save_feeds), prints {"ms": best, "median_ms":
median ms per batch} and writes the outputs to OUT.npz."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from fusebridge.bench.paddle_comparison import (
    INT8_CACHE_ENV,
    ONEDNN_INT8,
    SAVED_BACK,
    best_and_median_ms,
    load_feeds,
)
from fusebridge.bench.paddle_runtime import (
    INT8_OPS,
    ExecutorRunner,
    InferenceRunner,
    int8_model_dir,
)
from fusebridge.errors import ArgumentError


def _saved_back(model_dir: str, folder: Path, threads: int) -> InferenceRunner:
    """Paddle Inference on the model as fusebridge optimizes it, written back by
    fb.save_paddle with our GRU custom operator (registered in this process)."""
    import fusebridge as fb
    from fusebridge.integrations.paddle import register

    fb.save_paddle(fb.optimize(fb.load(model_dir))[0], folder / "model")
    register()
    return InferenceRunner(folder, ir_optim=True, onednn=False, threads=threads)


def _onednn_int8(model_dir: str, threads: int) -> InferenceRunner:
    """Paddle Inference with oneDNN int8 GRUs on the post-training quantized copy of the model
    that the folder $FUSEBRIDGE_PADDLE_INT8_CACHE holds (paddle_runtime.int8_model_dir)."""
    make = (
        "paddle_runtime.post_training_int8 into paddle_runtime.int8_model_dir(MODEL, CACHE), or "
        "fusebridge.bench.lac.paddle_int8_model(CACHE) for the LAC tagger"
    )
    cache = os.environ.get(INT8_CACHE_ENV)
    if not cache:
        raise ArgumentError(
            f"peer {ONEDNN_INT8}: set {INT8_CACHE_ENV} to the folder of Paddle's post-training "
            f"int8 models ({make})"
        )
    quantized = int8_model_dir(model_dir, cache)
    if not (quantized / "model.pdmodel").is_file():
        raise ArgumentError(
            f"peer {ONEDNN_INT8}: {cache} has no post-training int8 copy of {model_dir} (looked "
            f"for {quantized}); make it with {make}"
        )
    return InferenceRunner(
        quantized, ir_optim=True, onednn=True, threads=threads, int8_ops=INT8_OPS
    )


def main(argv: list[str]) -> None:
    model_dir, peer, feed_file, out_file, repeat, threads = argv
    if peer == "paddle_executor":
        runner = ExecutorRunner(model_dir)
    elif peer == SAVED_BACK:
        runner = _saved_back(model_dir, Path(out_file).with_suffix(""), int(threads))
    elif peer == ONEDNN_INT8:
        runner = _onednn_int8(model_dir, int(threads))
    else:
        onednn = peer == "paddle_inference_onednn"
        runner = InferenceRunner(model_dir, ir_optim=True, onednn=onednn, threads=int(threads))
    feeds = load_feeds(feed_file)
    outputs = runner.run(feeds)
    best, median = best_and_median_ms(lambda: runner.run(feeds), int(repeat))
    np.savez(out_file, **outputs)
    print(json.dumps({"ms": best, "median_ms": median}))


if __name__ == "__main__":
    main(sys.argv[1:])
