"""A training step (forward + backward) of the Paddle attention program
(fusebridge.models.paddle_training), side by side in one run: Paddle's Executor on the
program, and fb.Session on it unfused (explicit_rng only, masks kept), with the training
fusions, and with the fusions and recompute_dropout_mask. Needs paddlepaddle (the test extra).

Paddle draws its own masks, so its numbers are a peer's timing, not the same computation bit
for bit (the tests compare gradients with a masked twin program)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from benchmarks.common import markdown_table, missing_peer, timed_in_turns
from fusebridge import Session, kernels, load, random
from fusebridge.fuse_passes import Pipeline, explicit_rng, optimize
from fusebridge.fuse_passes.pipelines import TRAINING_FUSIONS
from fusebridge.integrations.paddle.legacy import import_paddle

SIZES = [(16, 128, 64), (64, 64, 64)]  # batch, steps, hidden


def _variants(directory: str) -> list[tuple[str, object]]:
    """(name, model) of each fusebridge variant of the saved program."""
    model = load(directory)
    explicit_rng(model)
    fused, _ = optimize(model, Pipeline("fusions", TRAINING_FUSIONS))
    recomputed, _ = optimize(model, "training")  # explicit_rng (done), fusions, recompute
    return [
        ("fusebridge unfused (masks kept)", model),
        ("fusebridge training fusions (masks kept)", fused),
        ("fusebridge fusions + recompute_dropout_mask", recomputed),
    ]


def _mask_bytes(model, x: np.ndarray, key) -> int:
    """Bytes of the packed masks the forward hands to the backward in one run."""
    masks = [v.name for n in model.graph for v in n.outputs[1:] if n.op_type.endswith("Dropout")]
    if not masks:
        return 0
    probe = ir.from_proto(ir.to_proto(model))
    probe.graph.outputs.extend(v for n in probe.graph for v in n.outputs if v.name in masks)
    out = Session(probe).run({"x": x}, rng=key)
    return sum(out[name].nbytes for name in masks)


def _step(session: Session, x: np.ndarray, key) -> Callable[[], object]:
    return lambda: session.run({"x": x}, rng=key)


def _paddle_step(program, x: np.ndarray) -> Callable[[], object]:
    from fusebridge.models.paddle_training import run_training_program

    return lambda: run_training_program(program, {"x": x})


def run(quick: bool = False, threads: int = 2) -> str:
    from fusebridge.models import paddle_training

    title = f"Paddle attention training step (forward + backward), {threads} threads"
    # Paddle builds the program every variant runs, so without it nothing of this section runs.
    missing = missing_peer("paddle", title, "pip install -e '.[bench]'")
    if missing:
        return missing
    repeat = 5 if quick else 20
    kernels.set_num_threads(threads)
    key = random.key(0)
    rows, profiles = [], []
    for batch, steps, hidden in SIZES:
        program = paddle_training.build_attention_training(steps=steps, hidden=hidden)
        x = np.random.default_rng(0).standard_normal((batch, steps, hidden), dtype=np.float32)
        with tempfile.TemporaryDirectory() as directory:
            paddle_training.save_training_program(program, directory)
            variants = _variants(directory)
        sessions = [(name, Session(model)) for name, model in variants]
        import_paddle().base.core.set_num_threads(threads)  # its CPU math library's threads
        cases = [(name, _step(session, x, key)) for name, session in sessions]
        cases.append(("Paddle 3.3.1 Executor (its own masks)", _paddle_step(program, x)))
        masks = [_mask_bytes(model, x, key) for _, model in variants] + [None]
        timed = [(n, secs, m) for (n, secs), m in zip(timed_in_turns(cases, repeat), masks)]
        base = timed[0][1]
        shape = f"{batch} x {steps} x {hidden}"
        for name, secs, masks in timed:
            kept = "-" if masks is None else f"{masks / 2**10:.0f}"
            rows.append([shape, name, f"{secs * 1e3:.2f}", f"{base / secs:.2f}", kept])
        for name, session in sessions:
            profiles.append([shape, name, *_profile(session, x, key, repeat)])
    header = ["x (batch x steps x hidden)", "variant", "ms", "speed vs unfused", "mask KiB kept"]
    steps_header = ["x", "variant", "sum of steps ms", "ONNX Runtime ms", "our kernels ms"]
    return (
        f"### {title}\n\n"
        + markdown_table(header, rows)
        + "\n\nEach step's best time over the runs (Session.run(profile=...)):\n\n"
        + markdown_table(steps_header, profiles)
    )


def _profile(session: Session, x: np.ndarray, key, repeat: int) -> list[str]:
    """Sum of the steps' best times, and the ONNX Runtime partitions' share and the rest's (our
    kernels; Identity aliases take no time), each step's best over `repeat` runs."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        profile: dict[str, float] = {}
        session.run({"x": x}, rng=key, profile=profile)
        for label, secs in profile.items():
            best[label] = min(best.get(label, secs), secs)
    onnx = sum(secs for label, secs in best.items() if label.startswith("ONNX partition"))
    total = sum(best.values())
    return [f"{total * 1e3:.2f}", f"{onnx * 1e3:.2f}", f"{(total - onnx) * 1e3:.2f}"]
