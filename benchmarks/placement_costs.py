"""The constants of the Session's placement cost model (fusebridge/ops/gru.py GRU_COSTS and
fusebridge/runtime/placement.py PARTITION_CALL_US): `python -m benchmarks.placement_costs
[--quick] [--threads 2]`, then paste the printed lines over the modules' own. Run it on a
quiet machine.

Over a grid of steps T, batch N, input size I, hidden H and directions D, with equal and
unequal lengths: an ONNX GRU model run by a fusebridge Session with the GRU on our kernel
(FusionGRU), and by an ONNX Runtime session of the same file, taking turns; and the cost of
one more ONNX Runtime partition (call_us: a chain of small GRUs between MatMuls, all on our
kernels against all in ONNX Runtime). Each engine's time is fitted by least squares as
fixed + step * D * T + mac * D * rows * 3H(I + H) / 1e6 (microseconds; rows = sum(lengths) on
our kernel, N * T in ONNX Runtime); ONNX Runtime's fixed part is its `run`, which a GRU inside a
partition shares, so only its step and mac are kept."""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from benchmarks.common import best_time, machine

GRID_T = (1, 8, 32)
GRID_N = (1, 16)
GRID_IH = ((16, 16), (64, 64), (128, 256), (256, 512))
GRID_D = (1, 2)


def gru_file(path: Path, i: int, h: int, d: int, lengths: bool) -> None:
    """An ONNX GRU (layout 0), sequence_lens an input when `lengths`."""
    rng = np.random.default_rng(0)
    weights = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
        for n, s in (("W", (d, 3 * h, i)), ("R", (d, 3 * h, h)), ("B", (d, 6 * h)))
    ]
    direction = "bidirectional" if d == 2 else "forward"
    inputs = ["x", "W", "R", "B"] + (["lens"] if lengths else [])
    node = helper.make_node(
        "GRU", inputs, ["y"], hidden_size=h, direction=direction, linear_before_reset=1
    )
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", i])]
    if lengths:
        feeds.append(helper.make_tensor_value_info("lens", TensorProto.INT32, ["N"]))
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "gru", feeds, out, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, path)


CHAIN = 4  # GRUs in the call_us chain


def chain_file(path: Path, i: int, chain: int) -> None:
    """MatMul -> GRU -> MatMul -> GRU ... -> MatMul (`chain` GRUs, input = hidden = i): with the
    GRUs on our kernel, the one ONNX Runtime session is cut into chain + 1 partitions."""
    rng = np.random.default_rng(1)
    nodes, weights, x = [], [], "x"
    for k in range(chain + 1):
        weights.append(
            onnx.numpy_helper.from_array(
                (rng.standard_normal((i, i)) * 0.1).astype(np.float32), f"m{k}"
            )
        )
        nodes.append(helper.make_node("MatMul", [x, f"m{k}"], [f"p{k}"]))
        x = f"p{k}"
        if k == chain:
            break
        for name, shape in (
            (f"W{k}", (1, 3 * i, i)),
            (f"R{k}", (1, 3 * i, i)),
            (f"B{k}", (1, 6 * i)),
        ):
            data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
            weights.append(onnx.numpy_helper.from_array(data, name))
        nodes.append(
            helper.make_node("GRU", [x, f"W{k}", f"R{k}", f"B{k}"], [f"y{k}"], hidden_size=i)
        )
        nodes.append(helper.make_node("Squeeze", [f"y{k}", "axis1"], [f"g{k}"]))
        x = f"g{k}"
    weights.append(onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", i])]
    out = [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "chain", feeds, out, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, path)


def call_us(threads: int, repeat: int, tmp: Path, kernel: tuple, ort_: tuple) -> float:
    """One more ONNX Runtime partition: a chain of CHAIN GRUs between MatMuls run by a Session
    with the GRUs on our kernel (2 * CHAIN cuts) and in ONNX Runtime (one session), less the
    GRUs' own difference between the engines (from the fitted `kernel` and `ort_` constants, as
    the placement estimates it), per cut: ONNX Runtime's `run`, the arrays crossing, the kernels'
    threads waking after a partition ran (partitions beside kernels run on the calling thread).
    Medians of interleaved rounds."""
    import fusebridge as fb

    # Small GRUs: the cut's cost matters where the GRUs' own times are small, and there an
    # error in their estimated difference weighs least.
    t, n, i = 1, 1, 8
    chain_file(tmp / "chain.onnx", i, CHAIN)
    x = {"x": np.random.default_rng(2).standard_normal((t, n, i)).astype(np.float32)}
    chain = fb.load(tmp / "chain.onnx")
    sessions = {p: fb.Session(chain, placement=p) for p in ("kernels", "onnxruntime")}
    times: dict[str, list[float]] = {p: [] for p in sessions}
    for r in range(15):
        order = list(sessions.items())
        for p, s in order if r % 2 else order[::-1]:
            times[p].append(best_time(lambda s=s: s.run(x), repeat))
    med = {p: 1e6 * float(np.median(v)) for p, v in times.items()}
    work = t * n * 3 * i * (2 * i) / 1e6
    per_gru = (kernel[0] + kernel[1] * t + kernel[2] * work) - (ort_[1] * t + ort_[2] * work)
    cut = (med["kernels"] - med["onnxruntime"] - CHAIN * per_gru) / (2 * CHAIN)
    return max(cut, 0.0)


def fit(rows: list[tuple[float, float, float]], times: list[float]) -> tuple[float, ...]:
    """(fixed, step, mac) >= 0 by least squares; rows are (1, D*T, work)."""
    a, b = np.array(rows, np.float64), np.array(times, np.float64)
    # Relative error matters (small runs decide most placements): rows weighted by 1 / time.
    w = 1.0 / b
    coef = np.linalg.lstsq(a * w[:, None], b * w, rcond=None)[0]
    return tuple(float(max(c, 0.0)) for c in coef)


def measure(threads: int, repeat: int) -> tuple[str, list[str]]:
    import fusebridge as fb

    fb.kernels.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    kernel_rows, kernel_t, ort_rows, ort_t, lines = [], [], [], [], []
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        for (i, h), d, unequal in itertools.product(GRID_IH, GRID_D, (False, True)):
            path = Path(tmp) / f"gru_{i}_{h}_{d}_{unequal}.onnx"
            gru_file(path, i, h, d, unequal)
            ours = fb.Session(fb.load(path), placement="kernels")
            theirs = ort.InferenceSession(str(path), options)
            for t, n in itertools.product(GRID_T, GRID_N):
                if unequal and n == 1:
                    continue
                x = rng.standard_normal((t, n, i)).astype(np.float32)
                feeds = {"x": x}
                filled = t * n
                if unequal:
                    lens = rng.integers(1, t + 1, n).astype(np.int32)
                    lens[0] = t
                    feeds["lens"] = lens
                    filled = int(lens.sum())
                # Our kernel's step alone (a Cast of the lengths before it is no part of it).
                env = dict(feeds)
                ours._program.run(env)
                step = next(s for s in ours._program.steps if s.kind == "fusebridge")
                args = step.args(env)
                # Ours and the peer take turns, the best of each kept.
                best_k = best_o = float("inf")
                for _ in range(3):
                    best_k = min(best_k, best_time(lambda a=args, s=step: s.run(a), repeat))
                    peer = best_time(lambda f=feeds, o=theirs: o.run(None, f), repeat)
                    best_o = min(best_o, peer)
                per_row = d * 3 * h * (i + h) / 1e6
                kernel_rows.append((1.0, d * t, filled * per_row))
                ort_rows.append((1.0, d * t, n * t * per_row))
                kernel_t.append(1e6 * best_k)
                ort_t.append(1e6 * best_o)
                lines.append(
                    f"| {t} | {n} | {i} | {h} | {d} | {filled} | {1e6 * best_k:.1f} | "
                    f"{1e6 * best_o:.1f} |"
                )
        k, o = fit(kernel_rows, kernel_t), fit(ort_rows, ort_t)
        call = call_us(threads, repeat, Path(tmp), k, o)
    costs = (
        f"GRU_COSTS = GRUCosts(\n    kernel_fixed={k[0]:.2f},\n    kernel_step={k[1]:.3f},\n"
        f"    kernel_mac={k[2]:.3f},\n    ort_step={o[1]:.3f},\n    ort_mac={o[2]:.3f},\n)\n"
        f"PARTITION_CALL_US = {call:.2f}"
    )
    return costs, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    costs, lines = measure(args.threads, 5 if args.quick else 30)
    print(f"Machine: {machine()}; {args.threads} thread(s)")
    print("| T | N | I | H | D | rows (sum of lengths) | kernel us | ONNX Runtime us |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print(f"\n# python -m benchmarks.placement_costs --threads {args.threads}\n{costs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
