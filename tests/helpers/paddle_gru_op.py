"""Paddle's own unfused `gru` op (mul + gru) run in a legacy static program: the oracle of the
GRU kernels and of the Paddle frontend's WeightH layout (docs/gru.md)."""

from __future__ import annotations

import functools

import numpy as np

from .paddle_oracle import legacy_static, paddle_or_skip


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


@functools.cache
def _paddle_program(ic, oc, has_h0, is_reverse, origin_mode, activation, gate_activation):
    """mul (X [words, IC] x WeightX) then gru, built once per configuration."""
    paddle = paddle_or_skip()
    with legacy_static(paddle):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [-1, ic], "float32", lod_level=1)
            wx = paddle.static.data("weight_x", [ic, 3 * oc], "float32")
            weight = paddle.static.data("weight", [oc, 3 * oc], "float32")
            bias = paddle.static.data("bias", [1, 3 * oc], "float32")
            block = main.global_block()
            proj = block.create_var(name="proj", dtype="float32", lod_level=1)
            block.append_op(
                type="mul",
                inputs={"X": [x], "Y": [wx]},
                outputs={"Out": [proj]},
                attrs={"x_num_col_dims": 1, "y_num_col_dims": 1},
            )
            inputs = {"Input": [proj], "Weight": [weight], "Bias": [bias]}
            if has_h0:
                inputs["H0"] = [paddle.static.data("h0", [-1, oc], "float32")]
            # The work buffers must exist as variables or the op does not run.
            outs = {
                name: [block.create_var(name=name.lower(), dtype="float32")]
                for name in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")
            }
            block.append_op(
                type="gru",
                inputs=inputs,
                outputs=outs,
                attrs={
                    "activation": activation,
                    "gate_activation": gate_activation,
                    "is_reverse": is_reverse,
                    "origin_mode": origin_mode,
                },
            )
        return main, outs["Hidden"][0], paddle.static.Executor(paddle.CPUPlace())


def paddle_gru(
    x,
    lengths,
    weight_x,
    weight,
    bias,
    h0=None,
    *,
    is_reverse,
    origin_mode,
    activation,
    gate_activation,
) -> np.ndarray:
    """Hidden [words, OC] of Paddle's gru op on LoD x [words, IC] (sentence lengths in order),
    fed WeightX [IC, 3*OC], Weight in Paddle's own flat layout, Bias [1, 3*OC], H0 [N, OC]."""
    paddle = paddle_or_skip()
    main, hidden, exe = _paddle_program(
        x.shape[1],
        weight.shape[0],
        h0 is not None,
        is_reverse,
        origin_mode,
        activation,
        gate_activation,
    )
    with legacy_static(paddle):
        lod_x = paddle.base.core.DenseTensor()
        lod_x.set(np.ascontiguousarray(x, np.float32), paddle.CPUPlace())
        lod_x.set_recursive_sequence_lengths([[int(n) for n in lengths]])
        feed = {"x": lod_x, "weight_x": weight_x, "weight": weight, "bias": bias}
        if h0 is not None:
            feed["h0"] = h0
        # Hidden keeps its LoD, so it comes back as a DenseTensor.
        (out,) = exe.run(main, feed=feed, fetch_list=[hidden], return_numpy=False)
        return np.array(out)


def canonical_to_paddle_weight_h(wh: np.ndarray) -> np.ndarray:
    """Plain [OC, 3*OC] -> Paddle's Weight(H) memory, shaped [OC, 3*OC] as Paddle declares it: a
    row-major [OC, 2*OC] (update, reset) block, then a row-major [OC, OC] candidate block. The
    inverse of fusebridge's paddle_weight_h_to_canonical, written from Paddle's layout (docs/gru.md)
    to feed Paddle canonical weights."""
    wh = np.asarray(wh)
    if wh.ndim != 2 or wh.shape[1] != 3 * wh.shape[0]:
        raise ValueError(
            f"canonical_to_paddle_weight_h: wh must have shape [OC, 3*OC], got {wh.shape}"
        )
    oc = wh.shape[0]
    flat = np.concatenate([wh[:, : 2 * oc].reshape(-1), wh[:, 2 * oc :].reshape(-1)])
    return flat.reshape(oc, 3 * oc)
