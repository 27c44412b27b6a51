"""The two MXNet model families (fusebridge/models/mxnet_models.py's build_deepspeech: Conv2D +
BatchNorm + clip + 2-layer bidirectional GRU + Dense + softmax over a spectrogram; build_crnn:
conv/relu/pool stack + bidirectional LSTM + Dense + argmax over a line image) at Paddle's
benchmark sizes (fusebridge/models/paddle_families.py's BENCH: 64 frequency bins, convolutions
of 16 and 32 channels, GRU / LSTM of 128, 29 characters), exported by MXNet and loaded by
fusebridge: fusebridge Session (optimized) vs MXNet 1.9.1's hybridized SymbolBlock
(static_alloc) in a process of its own (benchmarks/mxnet_peer.py), on 1 / 16 / 64 inputs drawn
as paddle_families.feeds draws them (the same inputs as benchmarks/paddle_families.py): speech
40..200 frames, lines 32..160 columns, each batch padded to its longest (the first input). The
speech model takes no lengths: both runtimes run the padded frames.

Runs in the MXNet venv (mxnet needs numpy < 1.24):

    python -m benchmarks.run --only mxnet_families [--quick]

also writes benchmarks/results/mxnet_families/mxnet_families{,-quick}.{md,svg}: the table and
a chart of MXNet's time over fusebridge's per family and batch. Outputs are compared and a
difference beyond float32's rounding fails the section (check())."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import markdown_table, missing_peer, timings
from benchmarks.mxnet_peer import export, input_names, run_peer
from benchmarks.paddle_families import chart
from fusebridge.models import mxnet_models
from fusebridge.models.paddle_families import BENCH as Z
from fusebridge.models.paddle_families import feeds as paddle_feeds

TITLE = "MXNet model families"
OUT = Path(__file__).parent / "results" / "mxnet_families"
BATCHES = (1, 16, 64)
# builder, its sizes, the input it is traced with for export.
MODELS = {
    "deepspeech": (
        "build_deepspeech",
        {"freq": Z.freq, "channels": Z.channels[0], "hidden": Z.hidden, "chars": Z.chars},
        (2, 1, 12, Z.freq),
    ),
    "crnn": (
        "build_crnn",
        {"channels": Z.channels, "hidden": Z.hidden, "chars": Z.chars},
        (2, 1, mxnet_models.LINE_HEIGHT, 12),
    ),
}
# Speech: |probability difference|; float32 rounding through two GRU layers of 100 steps stays
# orders of magnitude under it (measured: ~1e-6). Crnn: MXNet's top two logits closer than
# this are a tie either runtime may break its own way.
PROB_TOL = 1e-4
TIE_TOL = 1e-4


def _inputs(name: str, n: int) -> tuple[np.ndarray, str]:
    """One batch (float32, as the exported models take it) and its length for the table: the
    frames or columns of its inputs before padding, summed, and the length padded to."""
    feeds = paddle_feeds(name, n, seed=n, sizes=Z)
    if name == "deepspeech":
        audio = feeds["audio"]
        return audio, f"{int(feeds['lens'].sum())} frames (padded to {audio.shape[2]})"
    image = feeds["image"]  # paddle_families draws the widths but makes one image of the widest
    return image, f"{image.shape[0] * image.shape[-1]} columns (padded to {image.shape[-1]})"


def check(name: str, ours: np.ndarray, theirs: dict[str, np.ndarray]) -> str:
    """Raises AssertionError where fusebridge's output and MXNet's differ beyond float32's
    rounding: speech probabilities by more than PROB_TOL, crnn characters other than where
    MXNet's own top two logits are within TIE_TOL. Returns the difference for the table."""
    mx_out = theirs["batched"]
    if ours.shape != mx_out.shape:
        raise AssertionError(f"{name}: shape {ours.shape}, MXNet's {mx_out.shape}")
    if name == "deepspeech":
        err = float(np.abs(ours - mx_out).max())
        if not err <= PROB_TOL:
            raise AssertionError(f"{name}: max |difference| {err:.2e} > {PROB_TOL:g}")
        return f"max diff {err:.1e}"
    if not np.array_equal(np.argmax(theirs["logits"], axis=-1), mx_out):
        raise AssertionError(f"{name}: MXNet's logits do not give MXNet's characters")
    top2 = np.sort(theirs["logits"], axis=-1)[..., -2:]
    tie = top2[..., 1] - top2[..., 0] < TIE_TOL
    differ = ours != mx_out
    if (differ & ~tie).any():
        raise AssertionError(
            f"{name}: {int((differ & ~tie).sum())} of {ours.size} characters differ where "
            f"MXNet's top two logits are {TIE_TOL:g} or more apart"
        )
    return f"{int(differ.sum())} of {ours.size} differ ({int(tie.sum())} ties)"


def run(quick: bool = False, threads: int = 2) -> str:
    import fusebridge as fb

    install = "runs in the MXNet venv (pip install '.[mxnet]'; --only mxnet_families)"
    missing = missing_peer("mxnet", TITLE, install)
    if missing:
        return missing

    fb.kernels.set_num_threads(threads)
    repeat = 10 if quick else 30
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (builder, kwargs, sample) in MODELS.items():
            prefix = os.path.join(tmp, name)
            export(prefix, builder, kwargs, [sample])
            session = fb.Session(fb.optimize(fb.load(f"{prefix}-symbol.json"))[0])
            results[name] = {}
            for n in BATCHES:
                data, length = _inputs(name, n)
                theirs = run_peer(prefix, [data], repeat, threads, tmp)
                feeds = dict(zip(input_names(1), [data]))
                ours = session.run(feeds)[session.output_names[0]]
                same = check(name, ours, theirs)
                times = timings(functools.partial(session.run, feeds), repeat)
                ms = 1e3 * min(times), 1e3 * float(np.median(times))
                mx_ms = 1e3 * float(theirs["seconds"]), 1e3 * float(theirs["median"])
                results[name][n] = mx_ms[0] / ms[0]
                rows.append(
                    [
                        name,
                        str(n),
                        length,
                        f"{ms[0]:.2f}",
                        f"{ms[1]:.2f}",
                        f"{mx_ms[0]:.2f}",
                        f"{mx_ms[1]:.2f}",
                        f"{mx_ms[0] / ms[0]:.2f}x",
                        f"{mx_ms[1] / ms[1]:.2f}x",
                        same,
                    ]
                )
    header = [
        "model",
        "inputs",
        "length",
        "fusebridge best ms",
        "fusebridge median ms",
        "MXNet best ms",
        "MXNet median ms",
        "MXNet / fusebridge (best)",
        "(median)",
        "outputs",
    ]
    per_batch = "; ".join(
        f"{name}: " + ", ".join(f"{n}: {r:.2f}x" for n, r in per.items())
        for name, per in results.items()
    )
    text = "\n".join(
        [
            f"## {TITLE}",
            "",
            f"{threads} thread(s) (OMP_NUM_THREADS for MXNet, set_num_threads for fusebridge); "
            f"best and median of {repeat}; MXNet 1.9.1 hybridized with static_alloc, in its "
            f"own process. Sizes: spectrogram {Z.freq} bins, convolutions {Z.channels[0]} "
            f"(crnn also {Z.channels[1]}) channels, GRU / LSTM {Z.hidden}, {Z.chars} characters; "
            f"speech {Z.frames[0]}..{Z.frames[1]} frames, lines {mxnet_models.LINE_HEIGHT} x "
            f"{Z.columns[0]}..{Z.columns[1]} columns, a batch padded to its longest (its first "
            f"input, drawn at {Z.frames[1]} frames / {Z.columns[1]} columns, as "
            "paddle_families.feeds draws them; the images are drawn whole at that width).",
            "",
            markdown_table(header, rows),
            "",
            f"MXNet / fusebridge (best), by inputs per batch: {per_batch}.",
            "",
            f"Outputs: speech probabilities within {PROB_TOL:g} of MXNet's; crnn characters "
            f"equal but where MXNet's top two logits are within {TIE_TOL:g} (ties).",
        ]
    )
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "mxnet_families-quick" if quick else "mxnet_families"
    (OUT / f"{stem}.md").write_text(text + "\n")
    title = f"MXNet model families: MXNet / fusebridge ({threads} threads)"
    note = "MXNet 1.9.1 time / fusebridge time (best of the runs)"
    (OUT / f"{stem}.svg").write_text(chart(results, title, note))
    print(f"wrote {OUT / stem}.{{md,svg}}", file=sys.stderr)
    return text
