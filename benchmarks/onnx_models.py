"""ONNX models as exporters ship them: fusebridge (load -> optimize -> Session, placement by
cost) vs plain `onnxruntime.InferenceSession(the original file)`, same threads, same process,
the two taking turns: `python -m benchmarks.run --only onnx_models`.

Models: the look-alikes of tests/fixtures/onnx/shipped (manifest.json). Rows, each as the
manifest gives it: batch 1 (one sequence), per frame (a streaming model called once per frame,
its state fed back; one timed call is a sequence of frames), batch 16 (padded; unequal lengths
fed as sequence_lens where the model takes them). Every row's outputs are checked against ONNX
Runtime first. The peers take turns in blocks, each block after SETTLE of idle (`--settle`;
0: back to back, where each block runs against the other's spinning threads); every call is
timed alone. The ratio is ORT's median call / fusebridge's (> 1: fusebridge faster), a block's
first call apart (after idle: pools asleep, caches cooled); the target is >= 0.95 on every row
and >= 1.5 on unequal lengths. The last column is what the Session adds per run to ONNX
Runtime's own `run` where every node stays in ORT."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from benchmarks.common import markdown_table
from tests.helpers import graph_bounds  # the models' error bounds
from tests.helpers import shipped_onnx_fixtures as shipped  # the fixtures' manifest and feeds

BATCH = 16
ROWS = {"batch1": "batch 1", "frame": "per frame", "batch16": "batch 16"}


def streamed(run: Callable[[dict], dict], frames: list[dict], state: list) -> Callable[[], None]:
    """One sequence frame by frame, each frame's state outputs fed to the next."""

    def go() -> None:
        carried: dict = {}
        for frame in frames:
            out = run({**frame, **carried})
            carried = {i: out[o] for i, o in state}

    return go


# Seconds of idle before each timed block: longer than ONNX Runtime's workers spin after a run
# (docs/performance.md) and than the kernels' pool, so neither peer's block runs against the
# other's spinning threads, as each runs on a user's machine. 0: back to back.
SETTLE = 0.1


@dataclasses.dataclass(frozen=True)
class Timing:
    """Median seconds of one call: steady = every call of a block but its first, cold = the
    first call of each block (after SETTLE of idle: pools asleep, caches cooled)."""

    steady: float
    cold: float


# Seconds of calls a block lasts at least: a row of short calls gets hundreds of calls a block,
# not 10 right after the idle (where two ONNX Runtime sessions of the same nodes read ratios far
# from 1 that changed from run to run: docs/performance.md).
MIN_BLOCK = 0.005


def interleaved(
    peers: Sequence[Callable[[], object]], rounds: int, calls: int, settle: float = SETTLE
) -> list[Timing]:
    """Each peer's Timing, the peers taking turns round by round, who goes first rotating: a
    block is `settle` seconds of sleep, then 1 + calls calls, each timed on its own (more calls,
    the same for every peer, where `calls` of the slower peer last less than MIN_BLOCK)."""
    steady: list[list[float]] = [[] for _ in peers]
    cold: list[list[float]] = [[] for _ in peers]
    slowest = 0.0
    for fn in peers:
        fn()  # warm-up
        t0 = time.perf_counter()
        fn()
        slowest = max(slowest, time.perf_counter() - t0)
    calls = max(calls, int(MIN_BLOCK / slowest))
    for r in range(rounds):
        for k in [(r + j) % len(peers) for j in range(len(peers))]:
            if settle:
                time.sleep(settle)
            for c in range(calls + 1):
                t0 = time.perf_counter()
                peers[k]()
                (steady[k] if c else cold[k]).append(time.perf_counter() - t0)
    return [Timing(statistics.median(s), statistics.median(c)) for s, c in zip(steady, cold)]


def timing_cells(ours: Timing, theirs: Timing) -> list[str]:
    """fusebridge ms, ORT ms, ratio; the same for the first call of a block."""
    return [
        f"{1e3 * ours.steady:.3f}",
        f"{1e3 * theirs.steady:.3f}",
        f"{theirs.steady / ours.steady:.2f}x",
        f"{1e3 * ours.cold:.3f} / {1e3 * theirs.cold:.3f}",
        f"{theirs.cold / ours.cold:.2f}x",
    ]


def timing_header(settle: float) -> list[str]:
    first = "first call after idle" if settle else "first call after the other's block"
    return [
        "fusebridge ms",
        "ORT ms",
        "ORT / fusebridge",
        f"{first}: fusebridge / ORT ms",
        "ratio",
    ]


def run(quick: bool = False, threads: int = 2, settle: float = SETTLE) -> str:
    import fusebridge as fb

    fb.kernels.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    rounds, calls = (5, 3) if quick else (15, 10)
    rows = []
    rng = np.random.default_rng(0)
    for name, entry in shipped.load_manifest(shipped.DEFAULT_OUT_DIR).items():
        path = shipped.DEFAULT_OUT_DIR / entry["file"]
        plain = ort.InferenceSession(str(path), options)
        model = fb.load(path)
        session = fb.Session(fb.optimize(model)[0])
        names = [o.name for o in plain.get_outputs()]

        def ort_run(f: dict, plain=plain, names=names) -> dict:
            return dict(zip(names, plain.run(None, f)))

        for row, label in ROWS.items():
            if row not in entry["rows"]:
                continue
            f = shipped.row_feeds(entry, row, rng)
            graph_bounds.assert_outputs_within(
                model, f, session.run(f), ort_run(f), where=f"{name} {row}"
            )
            placed = session.explain(f)
            if row == "frame":  # one sequence of `steps` frames, the state fed back
                steps = shipped.BATCH16_LENGTHS[0]
                frames = [shipped.row_feeds(entry, row, rng) for _ in range(steps)]
                state = [(i, o) for o, i in entry["states"].items()]
                ours = streamed(session.run, frames, state)
                theirs = streamed(ort_run, frames, state)
                label = f"per frame ({steps} frames)"
            else:

                def ours(f=f, session=session):
                    return session.run(f)

                def theirs(f=f, plain=plain):
                    return plain.run(None, f)

                if row == "batch16" and entry.get("lengths"):
                    label += ", unequal lengths (sequence_lens)"
            t_ours, t_ort = interleaved([ours, theirs], rounds, calls, settle)
            kernels = sum(d.on_kernel for d in placed)
            all_ort = not kernels and row != "frame"
            rows.append(
                [
                    name,
                    label,
                    f"{kernels}/{len(placed)}",
                    *timing_cells(t_ours, t_ort),
                    overhead(session, f) if all_ort else "",
                ]
            )
    header = [
        "model",
        "row",
        "nodes on our kernels",
        *timing_header(settle),
        "Session adds (us/run)",
    ]
    return "\n".join(
        [
            "## ONNX models as shipped: fusebridge vs plain ONNX Runtime",
            "",
            f"{threads} thread(s) for both; {_method(rounds, calls, settle)}; batch rows of "
            f"{shipped.BATCH16_LENGTHS[0]} steps.",
            "",
            markdown_table(header, rows),
        ]
    )


def full_size(threads: int = 2, quick: bool = False, settle: float = SETTLE) -> str:
    """The speech look-alike at the shipped sizes (257 bins, GRUs of hidden 256 and 512, 100
    frames), exported by torch's legacy exporter at opset 12 into a temporary folder (torch
    needed: the bench extra): `python -m benchmarks.onnx_models --full-size`."""
    import tempfile

    import torch

    import fusebridge as fb

    fb.kernels.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    rounds, calls = (5, 2) if quick else (11, 4)
    steps, bins = 100, 257
    rng = np.random.default_rng(0)
    lengths = np.array([steps, *rng.integers(10, steps + 1, BATCH - 1)], np.int64)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for packed in (False, True):
            torch.manual_seed(0)
            module = shipped._torch_modules()["SpeechMask"](packed, bins, (256, 512)).eval()
            path = Path(tmp) / f"speech_{packed}.onnx"
            names = ["x", "lengths"] if packed else ["x"]
            example = (torch.zeros(2, steps, bins),) + (
                (torch.tensor([steps, 3]),) if packed else ()
            )
            axes = {"x": {0: "batch", 1: "time"}, "mask": {0: "batch", 1: "time"}}
            axes |= {"lengths": {0: "batch"}} if packed else {}
            torch.onnx.export(
                module,
                example,
                str(path),
                input_names=names,
                output_names=["mask"],
                dynamic_axes=axes,
                opset_version=12,
                dynamo=False,
            )
            plain = ort.InferenceSession(str(path), options)
            model = fb.load(path)
            session = fb.Session(fb.optimize(model)[0])
            for batch in (1, BATCH):
                f = {"x": rng.standard_normal((batch, steps, bins)).astype(np.float32)}
                label = f"batch {batch}"
                if packed:
                    f["lengths"] = lengths[:batch]
                    label += ", unequal lengths (sequence_lens)" if batch > 1 else ", lengths"
                graph_bounds.assert_outputs_within(
                    model, f, session.run(f), {"mask": plain.run(None, f)[0]}, where=label
                )
                t_ours, t_ort = interleaved(
                    [lambda f=f, s=session: s.run(f), lambda f=f, p=plain: p.run(None, f)],
                    rounds,
                    calls,
                    settle,
                )
                kernels = sum(d.on_kernel for d in session.explain(f))
                rows.append([label, f"{kernels}/2", *timing_cells(t_ours, t_ort)])
    header = ["row", "GRUs on our kernels", *timing_header(settle)]
    return "\n".join(
        [
            "## The speech look-alike at shipped sizes (hidden 256 and 512, 257 bins, 100 frames)",
            "",
            f"{threads} thread(s) for both; {_method(rounds, calls, settle)}.",
            "",
            markdown_table(header, rows),
        ]
    )


def overhead(session, feeds: dict) -> str:
    """Microseconds Session.run adds to its one ONNX Runtime session's own `run` (median)."""
    step = session._program.steps[0]
    sess, args = step.session, dict(zip(step.inputs, step.args(dict(feeds))))
    # Both are ONNX Runtime sessions with pools of their own: settled, as the peers above.
    t_session, t_ort = interleaved(
        [lambda: session.run(feeds), lambda: sess.run(None, args)], 9, 200, settle=SETTLE
    )
    return f"{1e6 * (t_session.steady - t_ort.steady):.1f}"


def _method(rounds: int, calls: int, settle: float) -> str:
    idle = (
        f"{1e3 * settle:.0f} ms of idle before each block"
        if settle
        else "blocks back to back (each runs against the other's spinning threads)"
    )
    return (
        f"{rounds} interleaved rounds, a block of 1 + {calls} calls each (more where they last "
        f"under {1e3 * MIN_BLOCK:.0f} ms), {idle}; medians of single calls, the first of a block "
        "apart"
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--full-size", action="store_true", help="the speech look-alike at shipped sizes"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE,
        help="seconds of idle before each timed block, so that the other peer's threads have "
        "stopped spinning (0: back to back)",
    )
    args = parser.parse_args()
    if args.full_size:
        print(full_size(args.threads, args.quick, args.settle))
    else:
        print(run(args.quick, args.threads, args.settle))
