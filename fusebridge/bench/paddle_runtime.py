"""Runs a saved Paddle inference model on Paddle's own runtimes (needs paddlepaddle): the
static Executor on the unfused program (the oracle) and Paddle Inference (with or without its
IR passes and oneDNN, and with oneDNN int8 on a post-training quantized copy), to compare
fusebridge against.

A legacy model dir holds inference.pdmodel + inference.pdiparams (combined) or __model__ plus one
file per parameter (fusebridge.models.paddle_models.save_model writes both); a Paddle 3 PIR model
is a model.json + model.pdiparams (paddle.jit.save), run on the new IR.

Feeds map an input name to (array, sentence lengths or None); LoD inputs get one LoD level.

Paddle's own int8 path for a legacy model (3.3.1): post_training_int8 (Paddle's
PostTrainingQuantization) writes a copy with fake quantize / dequantize ops around the `mul`
ops, whose scales Paddle Inference's oneDNN int8 passes read (quant_dequant_onednn_pass) when
InferenceRunner gets int8_ops; fc_gru_fuse_pass then makes fusion_gru ops that cpu_quantize_pass
turns int8 (u8 data, s8 weights, oneDNN's int8 GRU). On the float model alone,
enable_onednn_int8 quantizes nothing: without fake quantize ops no op has an input scale.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.integrations.paddle.legacy import import_paddle, static_mode
from fusebridge.integrations.paddle.params import find_model_files

Feeds = dict[str, tuple[np.ndarray, list[int] | None]]
# The op types the oneDNN int8 peer quantizes: the GRUs only. Paddle's default (every op type
# it can quantize) also makes the last fc int8, with an s8 output, which on the LAC tagger
# costs a point of tag agreement for no speed.
INT8_OPS = ("fusion_gru",)


def _offsets(lengths: list[int]) -> list[int]:
    return [0, *np.cumsum([int(n) for n in lengths]).tolist()]


def _model(model_dir: str | os.PathLike) -> tuple[Path, Path | None, bool, Any]:
    """(model file, combined parameter file or None, whether it is a PIR model, paddle)."""
    model, params = find_model_files(model_dir)
    pir = model.suffix == ".json"
    return model, params, pir, import_paddle(pir)


def _dense_tensor(paddle: Any, array: np.ndarray, lengths: list[int] | None, place: Any) -> Any:
    """A feed as a DenseTensor on `place`, with one LoD level when it has lengths."""
    tensor = paddle.base.core.DenseTensor()
    tensor.set(np.ascontiguousarray(array), place)
    if lengths is not None:
        tensor.set_recursive_sequence_lengths([[int(n) for n in lengths]])
    return tensor


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
            feed = {
                name: _dense_tensor(paddle, array, lengths, self._place)
                for name, (array, lengths) in feeds.items()
            }
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
    batch shape when the numbers matter, and a subprocess, as it may also crash.

    int8_ops (with onednn, on post_training_int8's model): oneDNN int8 for these op types
    (config.enable_onednn_int8; empty: every type Paddle can quantize), their scales read
    from the model's fake quantize ops. In 3.3.1 only a process's first int8 predictor gives
    the same outputs every time: a later one's differ from run to run (0.3-0.5% of the LAC
    tagger's tags); another reason for a subprocess."""

    def __init__(
        self,
        model_dir: str | os.PathLike,
        *,
        ir_optim: bool,
        onednn: bool,
        threads: int = 1,
        int8_ops: Collection[str] | None = None,
    ):
        if int8_ops is not None and not (onednn and ir_optim):
            raise ArgumentError("InferenceRunner: int8_ops needs onednn=True and ir_optim=True")
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
            if int8_ops is not None:
                config.enable_onednn_int8(set(int8_ops))
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


def int8_model_dir(model_dir: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """Where post_training_int8's copy of a legacy model is kept in `cache_dir`: a folder named
    for a hash of the model's files (the model file and its parameter file, or every file
    beside a `__model__`), so that a changed model is not run with an old copy."""
    model, params = find_model_files(model_dir)
    files = [model, params] if params else sorted(p for p in model.parent.iterdir() if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
    return Path(cache_dir) / f"int8-{digest.hexdigest()[:16]}"


def post_training_int8(
    model_dir: str | os.PathLike,
    calibration: Sequence[Feeds],
    out_dir: str | os.PathLike,
    *,
    algo: str = "abs_max",
) -> Path:
    """Paddle's post-training quantization of a legacy model (PostTrainingQuantization, on the
    Executor): weights of the `mul` ops per output channel (abs max), their inputs by `algo`
    ('abs_max', 'KL', 'hist', 'avg', 'mse') over the calibration batches. Writes model.pdmodel
    and model.pdiparams, with fake quantize / dequantize ops, into out_dir (replacing it whole:
    written in a folder beside it, then renamed) and returns it; InferenceRunner(...,
    int8_ops=...) runs it. The GRUs' weights take their scales from the weights themselves, in
    Paddle Inference."""
    model, params, pir, paddle = _model(model_dir)
    if pir:
        raise ArgumentError(
            f"post_training_int8: {model} is a PIR model; Paddle's post-training quantization "
            "takes a legacy program"
        )
    if not calibration:
        raise ArgumentError("post_training_int8: give at least one calibration batch")
    from paddle.static.quantization import PostTrainingQuantization

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    place = paddle.CPUPlace()

    def batches():
        for feeds in calibration:
            yield {
                name: _dense_tensor(paddle, array, lengths, place)
                for name, (array, lengths) in feeds.items()
            }

    # Own scope (ExecutorRunner's reason); PostTrainingQuantization loads the parameters into
    # the current one and runs in the one it is given, so both.
    scope = paddle.static.Scope()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    tmp.chmod(0o755)  # mkdtemp's is 0700
    try:
        with static_mode(paddle, False), paddle.static.scope_guard(scope):
            quantizer = PostTrainingQuantization(
                executor=paddle.static.Executor(place),
                model_dir=os.fspath(model.parent),
                model_filename=model.name,
                params_filename=params.name if params else None,
                scope=scope,
                data_loader=batches,
                batch_nums=len(calibration),
                algo=algo,
                quantizable_op_type=["mul"],
                weight_quantize_type="channel_wise_abs_max",
            )
            quantizer.quantize()
            quantizer.save_quantized_model(os.fspath(tmp), model_filename="model.pdmodel")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
