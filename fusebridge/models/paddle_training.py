"""A Paddle training program of the kind recompute_dropout_mask is for: a small attention block
built op by op in a legacy static program, its backward added by paddle.static.append_backward,
saved as `__model__` + one file per parameter (what fb.load reads).

    x -> q, k, v projections (mul + elementwise_add) -> softmax(q k^T / sqrt(H)) -> dropout
      -> @ v -> mul + elementwise_add -> dropout -> + q -> tanh -> dropout (fix_seed) -> mean

Three dropouts: the attention dropout (upscale_in_train), the output dropout
(downgrade_in_infer, Paddle's default) and one with fix_seed (its own seed attribute). q feeds
both the scores and the residual, so append_backward sums its gradient (`sum`).

`masks=` builds the oracle's twin: each dropout becomes elementwise_mul by a fed tensor
`<dropout output>.keep` (the keep mask times the dropout's scale), so Paddle's own backward ops
give the gradients for a mask chosen outside Paddle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebridge.integrations.paddle.legacy import import_paddle, legacy_static
from fusebridge.models.paddle_models import (
    _Builder,
    scope_with_weights,
    write_without_call_stacks,
)

# (output name, p, dropout_implementation, fixed seed or None)
DROPOUTS = (
    ("attn_drop", 0.25, "upscale_in_train", None),
    ("out_drop", 0.3, "downgrade_in_infer", None),
    ("tail_drop", 0.2, "upscale_in_train", 7),
)


@dataclass
class TrainingProgram:
    program: Any  # paddle.static.Program with the backward ops
    scope: Any  # its parameters
    loss: str
    grads: dict[str, str]  # parameter -> its gradient variable
    weights: dict[str, np.ndarray]


def build_attention_training(
    *, steps: int = 8, hidden: int = 16, seed: int = 0, masks: bool = False
) -> TrainingProgram:
    """The block above; x is float32 [batch, steps, hidden]."""
    paddle = import_paddle()
    with legacy_static(paddle), paddle.utils.unique_name.guard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        b = _Builder(paddle, main, np.random.default_rng(seed), 0.5)
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, steps, hidden], "float32")

            def project(src: Any, bias: bool) -> Any:
                return b.fc(src, hidden, hidden, 0, num_flatten_dims=2, bias=bias)

            def dropout(src: Any, name: str, p: float, mode: str, fixed: int | None) -> Any:
                out = b.var(name)
                if masks:
                    keep = paddle.static.data(f"{name}.keep", [-1, *src.shape[1:]], "float32")
                    b.op("elementwise_mul", {"X": [src], "Y": [keep]}, {"Out": [out]}, {"axis": -1})
                    return out
                mask = main.global_block().create_var(name=f"{name}.mask", dtype="uint8")
                attrs = {
                    "dropout_prob": p,
                    "is_test": False,
                    "dropout_implementation": mode,
                    "fix_seed": fixed is not None,
                    "seed": fixed or 0,
                }
                b.op("dropout", {"X": [src]}, {"Out": [out], "Mask": [mask]}, attrs)
                return out

            drops = {d[0]: d for d in DROPOUTS}
            q, k, v = project(x, True), project(x, True), project(x, False)
            scores = b.var("scores")
            b.op("matmul_v2", {"X": [q], "Y": [k]}, {"Out": [scores]}, {"trans_y": True})
            scaled = b.var("scores_scaled")
            b.op("scale", {"X": [scores]}, {"Out": [scaled]}, {"scale": float(hidden) ** -0.5})
            probs = b.var("probs")
            b.op("softmax", {"X": [scaled]}, {"Out": [probs]}, {"axis": -1})
            attn = dropout(probs, *drops["attn_drop"])
            mixed = b.var("mixed")
            b.op("matmul_v2", {"X": [attn], "Y": [v]}, {"Out": [mixed]}, {})
            out = dropout(project(mixed, True), *drops["out_drop"])
            residual = b.var("residual")
            b.op("elementwise_add", {"X": [out], "Y": [q]}, {"Out": [residual]}, {"axis": -1})
            hidden_out = b.var("hidden")
            b.op("tanh", {"X": [residual]}, {"Out": [hidden_out]}, {})
            tail = dropout(hidden_out, *drops["tail_drop"])
            loss = b.var("loss")
            b.op("mean", {"X": [tail]}, {"Out": [loss]}, {})
            pairs = paddle.static.append_backward(loss)
        scope = scope_with_weights(paddle, startup, b.weights)
    grads = {param.name: grad.name for param, grad in pairs}
    return TrainingProgram(main, scope, loss.name, grads, b.weights)


def save_training_program(model: TrainingProgram, dirname: str | os.PathLike) -> None:
    """dirname/__model__ (the program, backward included) + one file per parameter."""
    paddle = import_paddle()
    dirname = os.fspath(dirname)
    os.makedirs(dirname, exist_ok=True)
    with legacy_static(paddle), paddle.static.scope_guard(model.scope):
        if model.weights:
            paddle.static.save_vars(
                paddle.static.Executor(paddle.CPUPlace()),
                dirname,
                model.program,
                vars=[model.program.global_block().var(name) for name in model.weights],
            )
        write_without_call_stacks(model.program.desc, os.path.join(dirname, "__model__"))


def run_training_program(
    model: TrainingProgram, feeds: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Paddle's Executor on the program: the loss and every parameter's gradient by name."""
    paddle = import_paddle()
    names = [model.loss, *model.grads.values()]
    with legacy_static(paddle), paddle.static.scope_guard(model.scope):
        outs = paddle.static.Executor(paddle.CPUPlace()).run(
            model.program, feed=feeds, fetch_list=names
        )
    return dict(zip(names, (np.asarray(o) for o in outs)))
