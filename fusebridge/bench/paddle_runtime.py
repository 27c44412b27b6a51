"""Runs a saved Paddle inference model on Paddle's own runtimes (needs paddlepaddle): the
static Executor on the unfused program (the oracle) and Paddle Inference (with or without its
IR passes and oneDNN), to compare fusebridge against.

A legacy model dir holds inference.pdmodel + inference.pdiparams (combined) or __model__ plus one
file per parameter (fusebridge.models.paddle_models.save_model writes both); a Paddle 3 PIR model
is a model.json + model.pdiparams (paddle.jit.save), run on the new IR.

Feeds map an input name to (array, sentence lengths or None); LoD inputs get one LoD level.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fusebridge.integrations.paddle.legacy import import_paddle, static_mode
from fusebridge.integrations.paddle.params import find_model_files

Feeds = dict[str, tuple[np.ndarray, list[int] | None]]


def _offsets(lengths: list[int]) -> list[int]:
    return [0, *np.cumsum([int(n) for n in lengths]).tolist()]


def _model(model_dir: str | os.PathLike) -> tuple[Path, Path | None, bool, Any]:
    """(model file, combined parameter file or None, whether it is a PIR model, paddle)."""
    model, params = find_model_files(model_dir)
    pir = model.suffix == ".json"
    return model, params, pir, import_paddle(pir)


class ExecutorRunner:
    """The model loaded once into its own scope, run by paddle.static.Executor on CPU."""

    def __init__(self, model_dir: str | os.PathLike):
        model, params, self._pir, paddle = _model(model_dir)
        self._paddle = paddle
        self._place = paddle.CPUPlace()
        # Own scope: two models with the same parameter names (word_emb, fc_0.w_0) must not
        # overwrite each other in the global scope.
        self.scope = paddle.static.Scope()
        with static_mode(paddle, self._pir):
            self._exe = paddle.static.Executor(self._place)
            with paddle.static.scope_guard(self.scope):
                # The pre-2.0 call (a directory and file names) reads either layout: no params
                # file = one file per variable.
                loaded = paddle.static.load_inference_model(
                    os.fspath(model.parent),
                    self._exe,
                    model_filename=model.name,
                    params_filename=params.name if params else None,
                )
        self.program, self.feed_names, self._fetch_vars = loaded
        if self._pir:  # PIR values have no names: the fetch ops name the outputs
            ops = self.program.global_block().ops
            self.fetch_names = [op.attrs()["name"] for op in ops if op.name() == "pd_op.fetch"]
        else:
            self.fetch_names = [v.name for v in self._fetch_vars]

    def run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Fetch name -> array (LoD outputs come back flat, e.g. [words, 1])."""
        paddle = self._paddle
        with static_mode(paddle, self._pir):
            feed = {}
            for name, (array, lengths) in feeds.items():
                tensor = paddle.base.core.DenseTensor()
                tensor.set(np.ascontiguousarray(array), self._place)
                if lengths is not None:
                    tensor.set_recursive_sequence_lengths([[int(n) for n in lengths]])
                feed[name] = tensor
            # return_numpy=True refuses LoD outputs; np.array drops the LoD.
            outs = self._exe.run(
                self.program,
                feed=feed,
                fetch_list=self._fetch_vars,
                scope=self.scope,
                return_numpy=False,
            )
        return {name: np.array(out) for name, out in zip(self.fetch_names, outs)}


class InferenceRunner:
    """The model in a Paddle Inference predictor (CPU). ir_optim runs Paddle's fuse passes
    (fc_gru_fuse_pass turns mul + elementwise_add + gru into fusion_gru, fc_fuse_pass the
    other mul + elementwise_add into fc); onednn switches to the oneDNN kernels. With both,
    3.3.1's oneDNN fusion_gru returns garbage (even NaN) on a call with more sentences than an
    earlier call of as many words (its cache ignores the sentence count): use a fresh runner per
    batch shape when the numbers matter, and a subprocess, as it may also crash."""

    def __init__(
        self, model_dir: str | os.PathLike, *, ir_optim: bool, onednn: bool, threads: int = 1
    ):
        model, params, pir, paddle = _model(model_dir)
        if params is None:
            config = paddle.inference.Config(os.fspath(model.parent))
        else:
            config = paddle.inference.Config(os.fspath(model), os.fspath(params))
        config.disable_gpu()
        # A legacy model on the legacy pipeline whatever FLAGS_enable_pir_api was at import: with
        # the new IR, 3.3.1 runs the legacy passes, translates to PIR, then fails ("Tensor holds
        # no memory"). A PIR model (.json) takes the new IR.
        config.enable_new_ir(pir)
        config.switch_ir_optim(ir_optim)
        if onednn:
            config.enable_onednn()
        else:
            config.disable_onednn()
        config.set_cpu_math_library_num_threads(threads)
        self.config = config
        self.predictor = paddle.inference.create_predictor(config)
        self.feed_names: list[str] = list(self.predictor.get_input_names())
        self.fetch_names: list[str] = list(self.predictor.get_output_names())

    def run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Fetch name -> array, as ExecutorRunner.run."""
        for name, (array, lengths) in feeds.items():
            handle = self.predictor.get_input_handle(name)
            array = np.ascontiguousarray(array)
            handle.reshape(list(array.shape))
            handle.copy_from_cpu(array)
            if lengths is not None:
                handle.set_lod([_offsets(lengths)])
        self.predictor.run()
        return {
            name: self.predictor.get_output_handle(name).copy_to_cpu() for name in self.fetch_names
        }
