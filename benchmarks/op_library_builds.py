"""Two builds of fusebridge side by side on the framework ops: the Paddle or MXNet op library's
fusebridge_fusion_gru and fusebridge_dropout, called from Python, on this checkout's build and
on another one, to show what each call saves (or costs) after a change to the op libraries.
`--framework core` makes the same calls through fusebridge.kernels (_C), the front door the
op libraries now share their kernels with.

    python -m benchmarks.op_library_builds --framework paddle --base /path/to/venv/bin/python \\
        [--this PYTHON] [--rounds 7] [--quick] [--threads 2]

Before the kernels became one shared library the GRU op took canonical weights and packed
them, and built a new primitive, on every call; now it takes the weights packed once
(fusebridge.kernels.pack_gru_weights) and its primitives come from the process's cache. A
build with the new API (fusebridge.kernels.core._C.pack_gru_weights) is given packed weights,
packed once at setup; an older one canonical weights, which it packs per call: that per-call
work is what the table measures. The dropout op shows the cost of the descriptor/primitive
path alone.

Each build runs in a child process of its own interpreter (with this checkout's benchmarks
package on its path, as benchmarks/gru_builds.py does), on inputs the parent writes once, so
both see the same seeded data. The two take turns: for every case, round after round, base
then this. Each round is a warm call and then REPEAT timed calls of the op plus what forces
its completion (Paddle's dygraph runs CPU ops synchronously: the call alone; MXNet's engine is
asynchronous: the call and wait_to_read). "best" is the best call of all rounds, "median" the
median over rounds of each round's median; the ratio is this / base and the saving base -
this, per call. Both builds' outputs of every case are compared (same kernels: bit-equal).

$FUSEBRIDGE_PADDLE_CACHE and $FUSEBRIDGE_MXNET_CACHE are not passed on: each build keeps its
op library in the default cache folder, whose name hashes the build's kernels, where one folder
for both builds would hand one build's library to the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import BuildChild, machine, markdown_table

MODULE = "benchmarks.op_library_builds"

# (T, N, IC, OC): the case of benchmarks/paddle_ops_threads.py, one sentence, a wider one.
GRU_SHAPES = ((50, 16, 128, 128), (20, 1, 128, 128), (30, 4, 256, 256))
DROPOUT_SHAPE, P, SEED = (64, 300), 0.3, 1


def write_inputs(folder: Path) -> list[str]:
    """Writes each case's seeded inputs to folder/case-i.npz; returns the cases' names."""
    rng = np.random.default_rng(0)
    names = []
    for i, (t, n, ic, oc) in enumerate(GRU_SHAPES):
        arrays = {
            "x": rng.standard_normal((t, n, ic)),
            "lens": rng.integers(1, t + 1, n),  # unequal lengths: padding in the batch
            "wx": rng.standard_normal((2, ic, 3 * oc)) * 0.1,
            "wh": rng.standard_normal((2, oc, 3 * oc)) * 0.1,
            "bias": rng.standard_normal((2, 3 * oc)) * 0.1,
            "bias_h": rng.standard_normal((2, 3 * oc)) * 0.1,
        }
        arrays = {k: v.astype(np.int64 if k == "lens" else np.float32) for k, v in arrays.items()}
        if n > 1:
            arrays["lens"][0] = t  # the longest sentence fills the batch
        np.savez(folder / f"case-{i}.npz", **arrays)
        names.append(f"GRU T {t}, N {n}, {ic}/{oc}")
    x = rng.standard_normal(DROPOUT_SHAPE).astype(np.float32)
    np.savez(folder / f"case-{len(GRU_SHAPES)}.npz", x=x)
    return [*names, f"dropout {DROPOUT_SHAPE[0]}x{DROPOUT_SHAPE[1]}, p {P}"]


def _gru_weights(a: dict, packed: bool) -> list[np.ndarray]:
    from fusebridge import kernels

    if not packed:  # the older op's inputs: canonical weights, packed by every call
        return [a["wx"], a["wh"], a["bias"], a["bias_h"]]
    w = kernels.pack_gru_weights(a["wx"], a["wh"], a["bias"], a["bias_h"])
    return [np.array(v) for v in (w.wx, w.wh, w.bias_x, w.bias_hc)]


def _paddle_calls(cases: list[dict], packed: bool) -> tuple[list, str]:
    import paddle

    from fusebridge.integrations.paddle import op_library

    ops = op_library.register()
    calls = []
    for a in cases[:-1]:
        args = [paddle.to_tensor(v) for v in (a["x"], a["lens"], *_gru_weights(a, packed))]
        # direction, layout, linear_before_reset, origin_mode, activation, gate_activation
        attrs = ("bidirectional", "tnc", True, True, "tanh", "sigmoid")
        calls.append(lambda args=args, attrs=attrs: ops.fusebridge_fusion_gru(*args, None, *attrs))
    x = paddle.to_tensor(cases[-1]["x"])
    key = paddle.to_tensor(np.array([SEED, 0], np.int64))  # (seed, offset)
    calls.append(lambda: ops.fusebridge_dropout(x, key, P, "upscale_in_train", False, [], True)[0])
    return calls, f"paddle {paddle.__version__}"


def _mxnet_calls(cases: list[dict], packed: bool) -> tuple[list, str]:
    import mxnet as mx

    from fusebridge.integrations import mxnet as fb_mxnet

    fb_mxnet.register()
    attrs = dict(direction="bidirectional", layout="tnc", linear_before_reset=True)

    def done(y):  # MXNet's engine runs the op asynchronously: wait for it inside the timing
        y.wait_to_read()
        return y

    calls = []
    for a in cases[:-1]:
        arrays = (a["x"], a["lens"], *_gru_weights(a, packed))  # seq_lens as float32, as MXNet's
        args = [mx.nd.array(v, dtype="float32") for v in arrays]
        calls.append(lambda args=args: done(mx.nd.fusebridge_fusion_gru(*args, **attrs)))
    x = mx.nd.array(cases[-1]["x"], dtype="float32")
    calls.append(lambda: done(mx.nd.fusebridge_dropout(x, p=P, seed=SEED)[0]))
    return calls, f"mxnet {mx.__version__}"


def _core_calls(cases: list[dict], packed: bool) -> tuple[list, str]:
    """The same calls through fusebridge.kernels: weights packed once in both builds (its
    pack_gru_weights is older than the op libraries' packed inputs)."""
    from fusebridge import kernels

    attrs = dict(layout="tnc", direction="bidirectional", linear_before_reset=True)
    calls = []
    for a in cases[:-1]:
        w = kernels.pack_gru_weights(a["wx"], a["wh"], a["bias"], a["bias_h"])
        x, lens = a["x"], a["lens"]
        calls.append(lambda x=x, w=w, lens=lens: kernels.fusion_gru(x, w, seq_lens=lens, **attrs))
    x = cases[-1]["x"]
    calls.append(lambda: kernels.dropout(x, P, seed=SEED))
    return calls, "fusebridge.kernels (_C)"


_CALLS = {"paddle": _paddle_calls, "mxnet": _mxnet_calls, "core": _core_calls}


def worker(framework: str, workdir: str, threads: int, repeat: int) -> None:
    """One build: reads {"case": i} lines from stdin, answers each with one JSON line
    {"best_us": ..., "median_us": ...} of `repeat` calls after a warm one."""
    # The JSON lines keep the real stdout to themselves: whatever else writes to file
    # descriptor 1 (the framework's C++ side, the op library's compiler) goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # Imported here: the parent never imports fusebridge, and a child must import the one
    # installed for its own interpreter.
    import fusebridge
    from fusebridge import kernels

    folder = Path(workdir)
    # Through _C every build takes packed weights; an older op library canonical ones.
    packed = framework == "core" or hasattr(kernels.core._C, "pack_gru_weights")
    count = len(GRU_SHAPES) + 1
    cases = [dict(np.load(folder.parent / f"case-{i}.npz")) for i in range(count)]
    calls, version = _CALLS[framework](
        cases, packed
    )  # registers the build's op library (built once)
    # After registering: Paddle's import sets OMP_NUM_THREADS=1 where it is unset, and the
    # kernels start with that count; set_num_threads sets the process's (and, in builds with
    # a copy of the kernels in the op library, that copy's) count whatever it held.
    kernels.set_num_threads(threads)
    for i, call in enumerate(calls):  # the parent compares the two builds' outputs
        y = call()
        np.save(
            folder / f"out-{i}.npy",
            np.asarray(y)
            if framework == "core"
            else y.numpy()
            if framework == "paddle"
            else y.asnumpy(),
        )
    ready = {"fusebridge": fusebridge.__file__, "threads": kernels.get_num_threads()}
    print(json.dumps(ready | {"packed": packed, "framework": version}), file=answers)
    for line in sys.stdin:
        call = calls[json.loads(line)["case"]]
        call()  # warm: caches filled, the pool's threads awake
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        best, median = 1e6 * min(times), 1e6 * float(np.median(times))
        print(json.dumps({"best_us": best, "median_us": median}), file=answers)


def run(framework: str, base: str, this: str, quick: bool, rounds: int, threads: int) -> str:
    repeat = 10 if quick else 50  # timed calls per round
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "benchmarks").symlink_to(Path(__file__).resolve().parent)
        names = write_inputs(path)
        args = ["--framework", framework, "--threads", str(threads), "--repeat", str(repeat)]
        # One after the other: two first runs of one build (an A/A run) would build its op
        # library into the same cache folder at once.
        children = {"base": BuildChild("base", base, path, MODULE, args, {})}
        children["this"] = BuildChild("this", this, path, MODULE, args, {})
        try:
            for i, name in enumerate(names):
                a, b = (np.load(c.folder / f"out-{i}.npy") for c in children.values())
                diff = float(np.abs(a.astype(np.float64) - b).max()) if a.shape == b.shape else None
                times: dict[str, list[tuple[float, float]]] = {n: [] for n in children}
                for _ in range(rounds):
                    for n, child in children.items():  # base, then this
                        answer = child.ask({"case": i})
                        times[n].append((answer["best_us"], answer["median_us"]))
                best = {n: min(t[0] for t in ts) for n, ts in times.items()}
                med = {n: statistics.median(t[1] for t in ts) for n, ts in times.items()}
                rows.append(
                    [
                        name,
                        f"{best['base']:.1f}",
                        f"{med['base']:.1f}",
                        f"{best['this']:.1f}",
                        f"{med['this']:.1f}",
                        f"{med['this'] / med['base']:.3f}",
                        f"{med['base'] - med['this']:.1f}",
                        f"{best['base'] - best['this']:.1f}",
                        "shapes differ" if diff is None else f"{diff:.1e}",
                        "yes" if diff is not None and np.array_equal(a, b) else "no",
                    ]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        finally:
            for child in children.values():
                child.close()
    header = ["case", "base best us", "base median us", "this best us", "this median us"]
    header += ["this / base (median)", "saving us (median)", "saving us (best)"]
    header += ["max abs diff", "bit-equal"]
    builds = "\n".join(
        f"{n}: {c.python} (fusebridge {c.ready['fusebridge']}, {c.ready['threads']} threads, "
        f"{'packed' if c.ready['packed'] else 'canonical'} GRU weights)"
        for n, c in children.items()
    )
    summary = (
        f"\n{children['this'].ready['framework']} ops, {threads} kernel threads, {rounds} rounds "
        f"of {repeat} calls (a warm call before each round); {machine()}\n{builds}\n"
    )
    return markdown_table(header, rows) + summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=tuple(_CALLS), default="paddle")
    parser.add_argument("--base", help="python of the environment holding the other build")
    parser.add_argument("--this", default=sys.executable, help="python of this build's venv")
    parser.add_argument("--quick", action="store_true", help="fewer calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="turns per case and build")
    parser.add_argument("--threads", type=int, default=2, help="kernel threads in both builds")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a child's output folder
    parser.add_argument("--repeat", type=int, default=50, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.framework, args.worker, args.threads, args.repeat)
    if not args.base:
        parser.error("--base is required")
    print(run(args.framework, args.base, args.this, args.quick, args.rounds, args.threads))


if __name__ == "__main__":
    main()
