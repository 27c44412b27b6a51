"""ONNX models as exporters ship them: fusebridge (load -> optimize -> Session, placement by
cost) vs plain `onnxruntime.InferenceSession(the original file)`, same threads, same process,
the two taking turns: `python -m benchmarks.run --only onnx_models`.

Rows per model: batch 1 (one sequence of STEPS steps), per frame (a streaming model called
once per step, its state fed back: the frames of one sequence per timed call) and a batch of
16 sequences of unequal lengths (padded to STEPS; sequence_lens fed where the model takes them).
The ratio is ORT's median over rounds / fusebridge's (> 1: fusebridge faster); the target is
>= 0.95 on every row and >= 1.5 on unequal lengths fed as sequence_lens. The last column is
what the Session adds per run to ONNX Runtime's own `run` where every node stays in ORT.

Models: tests/fixtures/onnx/shipped/manifest.json when present (each entry: "file", optional
"batch_axes"/"steps_axes" {input: axis}, "state" [[input, output], ...], "lengths" input),
else the older fixtures of tests/fixtures/onnx and a GRU written here with sequence_lens."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from benchmarks.common import markdown_table

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "onnx"
STEPS, BATCH = 50, 16
# The older fixtures: file -> (batch axis, steps axis) of each input, state pairs.
FALLBACK = {
    "torch_gru.onnx": {
        "batch_axes": {"x": 1, "h0": 1},
        "steps_axes": {"x": 0},
        "state": [["h0", "hn"]],
    },
    "torch_linear_gru.onnx": {"batch_axes": {"x": 1}, "steps_axes": {"x": 0}},
    "torch_bigru_2layer.onnx": {"batch_axes": {"x": 0}, "steps_axes": {"x": 1}},
    "paddle2onnx_gru.onnx": {"batch_axes": {"x": 0}, "steps_axes": {"x": 1}},
}


def models(tmp: Path) -> list[tuple[Path, dict]]:
    manifest = FIXTURES / "shipped" / "manifest.json"
    if manifest.exists():
        entries = json.loads(manifest.read_text())
        entries = entries.get("models", entries) if isinstance(entries, dict) else entries
        if isinstance(entries, dict):
            entries = [{"file": k, **v} for k, v in entries.items()]
        return [(manifest.parent / e["file"], e) for e in entries]
    found = [(FIXTURES / name, spec) for name, spec in FALLBACK.items()]
    spec = {"batch_axes": {"x": 1}, "steps_axes": {"x": 0}, "lengths": "lens"}
    return [*found, (lengths_gru(tmp), spec)]


def lengths_gru(tmp: Path) -> Path:
    """An ONNX GRU (input 64, hidden 128) that takes sequence_lens, as a padded-batch tagger."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    i, h = 64, 128
    weights = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
        for n, s in (("W", (1, 3 * h, i)), ("R", (1, 3 * h, h)), ("B", (1, 6 * h)))
    ]
    node = helper.make_node("GRU", ["x", "W", "R", "B", "lens"], ["y"], hidden_size=h)
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", i]),
        helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch"]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "gru_lengths", inputs, out, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    path = tmp / "gru_sequence_lens.onnx"
    onnx.save(model, path)
    return path


def feeds_for(
    sess: ort.InferenceSession, spec: dict, steps: int, batch: int, lengths: np.ndarray | None
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(steps * 1000 + batch)
    out = {}
    for v in sess.get_inputs():
        if v.name == spec.get("lengths"):
            out[v.name] = lengths if lengths is not None else np.full(batch, steps)
            out[v.name] = out[v.name].astype(np.int64 if "int64" in v.type else np.int32)
            continue
        shape = [d if isinstance(d, int) else 1 for d in v.shape]
        for name, size in (("batch_axes", batch), ("steps_axes", steps)):
            if v.name in spec.get(name, {}):
                shape[spec[name][v.name]] = size
        out[v.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def streamed(run: Callable[[dict], dict], frames: list[dict], state: list) -> Callable[[], None]:
    """One sequence frame by frame, each frame's state outputs fed to the next."""

    def go() -> None:
        carried: dict = {}
        for frame in frames:
            out = run({**frame, **carried})
            carried = {i: out[o] for i, o in state}

    return go


def interleaved(ours: Callable, theirs: Callable, rounds: int, calls: int) -> tuple[float, float]:
    """Median seconds per call of each, the two taking turns round by round."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for fn in (ours, theirs):
        fn()  # warm-up
    for _ in range(rounds):
        for k, fn in enumerate((ours, theirs)):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[k].append((time.perf_counter() - t0) / calls)
    return statistics.median(times[0]), statistics.median(times[1])


def run(quick: bool = False, threads: int = 2) -> str:
    import fusebridge as fb

    fb.kernels.set_num_threads(threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    rounds, calls = (5, 3) if quick else (15, 10)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, spec in models(Path(tmp)):
            plain = ort.InferenceSession(str(path), options)
            session = fb.Session(fb.optimize(fb.load(path))[0])
            names = [o.name for o in plain.get_outputs()]

            def ort_run(f: dict, plain=plain, names=names) -> dict:
                return dict(zip(names, plain.run(None, f)))

            cases = [("batch 1", 1, None), (f"batch {BATCH}, lengths 5..{STEPS}", BATCH, True)]
            if spec.get("state"):
                cases.insert(1, ("per frame", 1, False))
            for label, batch, unequal in cases:
                lengths = None
                if unequal:
                    lengths = np.random.default_rng(0).integers(5, STEPS + 1, batch)
                    lengths[0] = STEPS
                if unequal is False:  # per frame
                    frames = [feeds_for(plain, spec, 1, 1, None) for _ in range(STEPS)]
                    state = spec["state"]
                    ours = streamed(session.run, frames, state)
                    theirs = streamed(ort_run, frames, state)
                    placed = session.explain(frames[0])
                else:
                    f = feeds_for(plain, spec, STEPS, batch, lengths)
                    want = plain.run(None, f)
                    got = session.run(f)
                    err = max(
                        float(np.abs(got[n] - w).max() / max(np.abs(w).max(), 1e-12))
                        for n, w in zip(names, want)
                    )
                    assert err < 1e-4, (path.name, label, err)
                    placed = session.explain(f)

                    def ours(f=f, session=session):
                        return session.run(f)

                    def theirs(f=f, plain=plain):
                        return plain.run(None, f)

                t_ours, t_ort = interleaved(ours, theirs, rounds, calls)
                kernels = sum(d.on_kernel for d in placed)
                fed = " (sequence_lens fed)" if unequal and spec.get("lengths") else ""
                rows.append(
                    [
                        path.name,
                        label + fed,
                        f"{kernels}/{len(placed)}",
                        f"{1e3 * t_ours:.3f}",
                        f"{1e3 * t_ort:.3f}",
                        f"{t_ort / t_ours:.2f}x",
                        overhead(session, f) if unequal is None and not kernels else "",
                    ]
                )
    header = [
        "model",
        "row",
        "nodes on our kernels",
        "fusebridge ms",
        "ORT ms",
        "ORT / fusebridge",
        "Session adds (us/run)",
    ]
    return "\n".join(
        [
            "## ONNX models as shipped: fusebridge vs plain ONNX Runtime",
            "",
            f"{threads} thread(s) for both; median of {rounds} interleaved rounds of {calls} "
            f"calls; {STEPS} steps; per frame = one {STEPS}-step sequence, one call a step.",
            "",
            markdown_table(header, rows),
        ]
    )


def overhead(session, feeds: dict) -> str:
    """Microseconds Session.run adds to its one ONNX Runtime session's own run (median)."""
    step = session._program.steps[0]
    env = dict(feeds)
    args = step.args(env)
    t_session, t_step = interleaved(lambda: session.run(feeds), lambda: step.run(args), 15, 200)
    return f"{1e6 * (t_session - t_step):.1f}"
