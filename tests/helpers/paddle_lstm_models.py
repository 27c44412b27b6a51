"""Programs around Paddle's legacy LoD `lstm` op, built with block.append_op in legacy static
mode and saved by save_inference_model (the files fluid-era models such as Baidu LAC's ranking
model ship), and a NumPy reference of the op written from its formula.

    python -m tests.helpers.paddle_lstm_models OUT_DIR

writes the committed fixture, OUT_DIR/lac_lstm: ids (LoD) -> embedding -> fc -> lstm forward
and fc -> lstm reverse -> concat -> fc, peepholes on (Paddle's default)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

LAC = {"vocab": 50, "embed": 8, "hidden": 6, "tags": 5}


def _act(name: str, x: np.ndarray) -> np.ndarray:
    return {
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "tanh": np.tanh,
        "relu": lambda v: np.maximum(v, 0),
        "identity": lambda v: v,
    }[name](x)


def reference_lstm(
    x, lengths, weight, bias, h0=None, c0=None, *, use_peepholes=True, is_reverse=False,
    gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh",
):  # fmt: skip
    """Paddle's lstm op from its formula, in float64: x [words, 4H] the projected gates (c, i,
    f, o) of the sentences in order; weight [H, 4H]; bias [1, 4H] or [1, 7H] (then W_ic, W_fc,
    W_oc); each sentence from its first word (its last with is_reverse), from h0[n], c0[n]."""
    x, weight = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    hidden = weight.shape[0]
    bias = np.asarray(bias, np.float64).reshape(-1)
    w_ic, w_fc, w_oc = np.split(bias[4 * hidden :], 3) if use_peepholes else (0, 0, 0)
    out = np.zeros((x.shape[0], hidden))
    start = 0
    for n, length in enumerate(lengths):
        h = np.zeros(hidden) if h0 is None else np.asarray(h0[n], np.float64)
        c = np.zeros(hidden) if c0 is None else np.asarray(c0[n], np.float64)
        steps = range(start, start + length)
        for t in reversed(steps) if is_reverse else steps:
            gc, gi, gf, go = np.split(x[t] + h @ weight + bias[: 4 * hidden], 4)
            i = _act(gate_activation, gi + w_ic * c)
            f = _act(gate_activation, gf + w_fc * c)
            c = f * c + i * _act(candidate_activation, gc)
            o = _act(gate_activation, go + w_oc * c)
            h = out[t] = o * _act(cell_activation, c)
        start += length
    return out


def _lstm(paddle, block, proj, name: str, hidden: int, h0=None, c0=None, **attrs):
    """append_op of an lstm over `proj` with new parameters; returns Hidden and Cell."""
    peepholes = attrs.get("use_peepholes", True)
    weight = paddle.static.create_parameter([hidden, 4 * hidden], "float32", name=f"{name}.w")
    bias = paddle.static.create_parameter(
        [1, (7 if peepholes else 4) * hidden], "float32", name=f"{name}.b"
    )
    inputs = {"Input": [proj], "Weight": [weight], "Bias": [bias]}
    if h0 is not None:
        inputs |= {"H0": [h0], "C0": [c0]}
    outs = {
        slot: [block.create_var(name=f"{name}.{slot.lower()}", dtype="float32")]
        for slot in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")
    }
    block.append_op(type="lstm", inputs=inputs, outputs=outs, attrs=attrs)
    return outs["Hidden"][0], outs["Cell"][0]


def _seeded(paddle, main, exe, startup, seed: int) -> None:
    exe.run(startup)
    rng = np.random.default_rng(seed)
    scope = paddle.static.global_scope()
    for p in main.all_parameters():
        tensor = scope.find_var(p.name).get_tensor()
        tensor.set(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32), paddle.CPUPlace())


def save_lstm(
    path: Path, *, projection: str | None = "fc", in_size=5, hidden=4, states=False, seed=0,
    read_cell=False, **attrs,
):  # fmt: skip
    """x float32 LoD [words, in_size] -> projection (fc: with a bias; mul: without; None: x is
    the projected gates, in_size = 4H) -> lstm(attrs) [-> its Cell too when read_cell]; with
    states, h0 and c0 [N, hidden] are feeds. Saved as path/inference.pdmodel + .pdiparams."""
    from .paddle_oracle import legacy_static, paddle_or_skip

    paddle = paddle_or_skip()
    with legacy_static(paddle), paddle.utils.unique_name.guard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, in_size], "float32", lod_level=1)
            block = main.global_block()
            feeds = [x]
            if projection == "fc":
                proj = paddle.static.nn.fc(x, 4 * hidden)
            elif projection == "mul":
                w = paddle.static.create_parameter([in_size, 4 * hidden], "float32", name="proj.w")
                proj = block.create_var(name="proj", dtype="float32", lod_level=1)
                block.append_op(
                    type="mul",
                    inputs={"X": [x], "Y": [w]},
                    outputs={"Out": [proj]},
                    attrs={"x_num_col_dims": 1, "y_num_col_dims": 1},
                )
            else:
                proj = x
            h0 = c0 = None
            if states:
                h0 = paddle.static.data("h0", [-1, hidden], "float32")
                c0 = paddle.static.data("c0", [-1, hidden], "float32")
                feeds += [h0, c0]
            hidden_out, cell = _lstm(paddle, block, proj, "lstm", hidden, h0, c0, **attrs)
            fetch = [hidden_out]
            if read_cell:
                fetch.append(paddle.scale(cell, 2.0))
        exe = paddle.static.Executor(paddle.CPUPlace())
        _seeded(paddle, main, exe, startup, seed)
        paddle.static.save_inference_model(
            str(Path(path) / "inference"), feeds, fetch, exe, program=main
        )


def save_lac(path: Path, seed: int = 0) -> None:
    """The committed fixture: a LAC-style tagger of two lstm ops (forward and reverse)."""
    from .paddle_oracle import legacy_static, paddle_or_skip

    paddle = paddle_or_skip()
    v, e, h, tags = LAC["vocab"], LAC["embed"], LAC["hidden"], LAC["tags"]
    with legacy_static(paddle), paddle.utils.unique_name.guard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ids = paddle.static.data("words", [-1, 1], "int64", lod_level=1)
            emb = paddle.static.nn.embedding(ids, [v, e], param_attr="word_emb")
            block = main.global_block()
            forward, _ = _lstm(paddle, block, paddle.static.nn.fc(emb, 4 * h), "fwd", h)
            backward, _ = _lstm(
                paddle, block, paddle.static.nn.fc(emb, 4 * h), "bwd", h, is_reverse=True
            )
            both = paddle.concat([forward, backward], axis=1)
            scores = paddle.static.nn.fc(both, tags)
        exe = paddle.static.Executor(paddle.CPUPlace())
        _seeded(paddle, main, exe, startup, seed)
        paddle.static.save_inference_model(
            str(Path(path) / "inference"), [ids], [scores], exe, program=main
        )


if __name__ == "__main__":
    save_lac(Path(sys.argv[1]) / "lac_lstm")
