"""Paddle's GRU peers for benchmarks/gru.py, run in a child process (Paddle's oneDNN GRU can
crash a process): `python benchmarks/gru_paddle_peer.py THREADS INPUTS.npz`.

Requests come one JSON line at a time on stdin, answers one JSON line each on stdout (flushed;
the parent skips lines that are not JSON). After import the child says {"event": "ready",
"paddle": version}. Requests:
- {"op": "run", "job": {...}}: build one legacy static program and time it (or save its output)
  -> {"event": "done", "seconds": best} or {"event": "done", "output": path}, or
  {"event": "error", "error": "..."} when Paddle raises. A crash answers nothing: the parent
  sees the end of stdout and the exit status.
- {"op": "overhead"}: best time of Executor.run on a one-op program -> {"event": "done",
  "seconds": best}.
- {"op": "quit"}.

A job names a case (its arrays in INPUTS.npz under "<case>/x", "<case>/lengths", "<case>/wx",
"<case>/wh", "<case>/bias", canonical layout: wx [D, IC, 3*OC], wh [D, OC, 3*OC], bias [D, 3*OC],
gates update, reset, candidate), a peer ("gru": mul + gru per direction; "fusion_gru_onednn":
fusion_gru per direction with use_onednn), a direction, origin_mode, a unique "index", and either
"repeat" and "budget_s" (timing: best of at least `repeat` calls after one warm-up call, more
while they fit in budget_s, at most 200) or "output" (an .npy path for the hidden state).

Each job builds its own program with its own variable names and its own Scope (Paddle's oneDNN
fusion_gru caches primitives by variable names and shapes, not by batch size). Weights are
persistable variables set once in the scope, outside the timing; the LoD input tensor is built
once; a timed call is one `Executor.run` (feed, run, fetch of the hidden state without
conversion to NumPy).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

os.environ["FLAGS_enable_pir_api"] = "0"  # legacy programs: must precede `import paddle`

import numpy as np


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def paddle_weight_h(wh: np.ndarray) -> np.ndarray:
    """Canonical [OC, 3*OC] recurrent weight -> Paddle's flat layout ([OC, 2*OC] block of the
    update and reset columns, then the [OC, OC] candidate block), shaped [OC, 3*OC]."""
    oc = wh.shape[0]
    flat = np.concatenate([wh[:, : 2 * oc].ravel(), wh[:, 2 * oc :].ravel()])
    return np.ascontiguousarray(flat.reshape(oc, 3 * oc), dtype=np.float32)


def build(paddle, job: dict, arrays: dict, prefix: str):
    """The program, its persistable weights {name: array}, the feed and the output var."""
    from paddle.base import core

    peer, direction = job["peer"], job["direction"]
    wx, wh, bias = arrays["wx"], arrays["wh"], arrays["bias"]
    ic, oc = wx.shape[1], wh.shape[1]
    main, startup = paddle.static.Program(), paddle.static.Program()
    weights: dict[str, np.ndarray] = {}
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        x = paddle.static.data(f"{prefix}x", [-1, ic], "float32", lod_level=1)

        def param(name: str, value: np.ndarray):
            weights[prefix + name] = np.ascontiguousarray(value, dtype=np.float32)
            return block.create_var(
                name=prefix + name, shape=value.shape, dtype="float32", persistable=True
            )

        def var(name: str, lod_level: int = 0):
            return block.create_var(name=prefix + name, dtype="float32", lod_level=lod_level)

        hiddens = []
        for d, reverse in enumerate([False] if direction == "forward" else [False, True]):
            attrs = {
                "activation": "tanh",
                "gate_activation": "sigmoid",
                "is_reverse": reverse,
                "origin_mode": bool(job["origin_mode"]),
            }
            w_x = param(f"wx{d}", wx[d])
            w_h = param(f"wh{d}", paddle_weight_h(wh[d]))
            b = param(f"b{d}", bias[d].reshape(1, 3 * oc))
            hidden = var(f"hidden{d}", 1)
            if peer == "gru":
                proj = var(f"proj{d}", 1)
                block.append_op(
                    type="mul",
                    inputs={"X": [x], "Y": [w_x]},
                    outputs={"Out": [proj]},
                    attrs={"x_num_col_dims": 1, "y_num_col_dims": 1},
                )
                block.append_op(
                    type="gru",
                    inputs={"Input": [proj], "Weight": [w_h], "Bias": [b]},
                    outputs={
                        "Hidden": [hidden],
                        "BatchGate": [var(f"bgate{d}")],
                        "BatchResetHiddenPrev": [var(f"breset{d}")],
                        "BatchHidden": [var(f"bhidden{d}")],
                    },
                    attrs={**attrs, "is_test": True},
                )
            elif peer == "fusion_gru_onednn":
                block.append_op(
                    type="fusion_gru",
                    inputs={"X": [x], "WeightX": [w_x], "WeightH": [w_h], "Bias": [b]},
                    outputs={
                        "Hidden": [hidden],
                        "ReorderedH0": [var(f"rh0{d}")],
                        "XX": [var(f"xx{d}")],
                        "BatchedInput": [var(f"bin{d}")],
                        "BatchedOut": [var(f"bout{d}")],
                    },
                    attrs={**attrs, "use_seq": True, "use_onednn": True, "use_mkldnn": True},
                )
            else:
                raise ValueError(f"unknown peer {peer!r}")
            hiddens.append(hidden)
        out = hiddens[0]
        if len(hiddens) == 2:
            out = var("out", 1)
            block.append_op(
                type="concat", inputs={"X": hiddens}, outputs={"Out": [out]}, attrs={"axis": 1}
            )
    tensor = core.DenseTensor()
    tensor.set(np.ascontiguousarray(arrays["x"], dtype=np.float32), paddle.CPUPlace())
    tensor.set_recursive_sequence_lengths([[int(n) for n in arrays["lengths"]]])
    return main, weights, {x.name: tensor}, out


def best_of(call, repeat: int, budget_s: float = 0.0, warmup: int = 1) -> float:
    """Best of at least `repeat` calls, more while they fit in budget_s (at most 200), after
    `warmup` calls; as benchmarks/gru.py times the others."""
    for _ in range(warmup):
        call()
    best, calls, t_start = float("inf"), 0, time.perf_counter()
    while calls < repeat or (time.perf_counter() - t_start < budget_s and calls < 200):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
        calls += 1
    return best


def run_job(paddle, exe, job: dict, data) -> dict:
    case = job["case"]
    arrays = {k: data[f"{case}/{k}"] for k in ("x", "lengths", "wx", "wh", "bias")}
    main, weights, feed, out = build(paddle, job, arrays, f"j{job['index']}_{job['peer']}_")
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        for name, value in weights.items():
            scope.var(name).get_tensor().set(value, paddle.CPUPlace())

        def call():
            return exe.run(main, feed=feed, fetch_list=[out], return_numpy=False)

        if job.get("output"):
            np.save(job["output"], np.array(call()[0]))
            return {"output": job["output"]}
        return {"seconds": best_of(call, job["repeat"], job.get("budget_s", 0.0))}


def overhead(paddle, exe, repeat: int = 50) -> float:
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("overhead_x", [1, 128], "float32")
        y = paddle.scale(x, 2.0)
    feed = {"overhead_x": np.ones((1, 128), np.float32)}
    with paddle.static.scope_guard(paddle.static.Scope()):
        return best_of(lambda: exe.run(main, feed=feed, fetch_list=[y], return_numpy=False), repeat)


def main() -> None:
    threads, data_path = int(sys.argv[1]), sys.argv[2]
    import paddle
    from paddle.base import core

    paddle.enable_static()
    core.set_num_threads(threads)
    exe = paddle.static.Executor(paddle.CPUPlace())
    data = np.load(data_path)
    emit(event="ready", paddle=paddle.__version__)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "quit":
            break
        try:
            if request["op"] == "overhead":
                emit(event="done", seconds=overhead(paddle, exe))
            else:
                emit(event="done", **run_job(paddle, exe, request["job"], data))
        except Exception as exc:  # an error is a table entry, not a failed benchmark
            last = traceback.format_exception_only(type(exc), exc)[-1]
            emit(event="error", error=" ".join(last.split())[:300])


if __name__ == "__main__":
    main()
