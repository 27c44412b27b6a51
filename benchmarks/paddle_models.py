"""Paddle models end to end: the bundled tagger and sentiment classifier, and a Paddle 3 tagger
saved with PIR (benchmarks/paddle3_tagger.py; fed lengths, and fed none with every sentence
padded to 60 words), 1 / 16 / 64 sentences of 5..60 words,
fusebridge Session (optimized) vs Paddle's Executor on the unfused program vs Paddle Inference
with ir_optim (and with oneDNN), each Paddle peer in a subprocess
(fusebridge.bench.paddle_comparison). Best and median ms per batch; a peer's outputs are checked
against fusebridge's; "x fusebridge time" > 1 means the peer is slower."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import paddle3_tagger
from benchmarks.common import missing_peer
from fusebridge import kernels
from fusebridge.bench.paddle_comparison import (
    MAX_WORDS,
    PEERS,
    SAVED_BACK,
    compare_with_paddle,
    failed,
    table,
)
from fusebridge.models import assets

PADDLE3_TITLE = "Paddle 3 tagger (PIR)"


def ratios(rows: list[dict[str, object]], fast: set[str], slow: str) -> str:
    """Per batch size, the fastest of the `fast` runtimes that ran and agreed against `slow`'s
    time as a multiple, best against best and median against median."""
    base = {r["sentences"]: r for r in rows if r["runtime"] == slow and not failed(r)}
    peers: dict[object, list[dict[str, object]]] = {}
    for r in rows:
        if r["runtime"] in fast and not failed(r) and r["sentences"] in base:
            peers.setdefault(r["sentences"], []).append(r)
    return (
        ", ".join(
            f"{n}: {min(p['ms'] for p in ps) / base[n]['ms']:.2f}x "
            f"(median {min(p['median_ms'] for p in ps) / base[n]['median_ms']:.2f}x)"
            for n, ps in peers.items()
        )
        or "none ran"
    )


def _fastest_paddle(rows: list[dict[str, object]]) -> str:
    """The fastest Paddle configuration (of the original files) against fusebridge, and
    against Paddle Inference on the model written back with our ops when that peer ran."""
    lines = [
        "Fastest Paddle configuration / fusebridge, by sentences per batch: "
        f"{ratios(rows, set(PEERS), 'fusebridge')} (target >= 1.5x)."
    ]
    if any(r["runtime"] == SAVED_BACK for r in rows):
        lines.append(
            f"Fastest Paddle configuration / Paddle Inference with our ops ({SAVED_BACK}): "
            f"{ratios(rows, set(PEERS), SAVED_BACK)} (target >= 1.5x)."
        )
    return "\n\n".join(lines)


def _paddle3_section(repeat: int, lengths: bool) -> str:
    title = PADDLE3_TITLE + ("" if lengths else ", no lengths fed")
    missing = missing_peer("paddle", title, "pip install -e '.[bench]'")
    if missing is not None:
        return missing
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model = paddle3_tagger.save(Path(tmp), lengths=lengths)
        except RuntimeError as exc:  # Paddle could not save it: the bundled models' tables stay
            return f"### {title}: failed\n\n```\n{exc}\n```"
        rows = compare_with_paddle(model, (1, 16, 64), repeat=repeat, peers=(*PEERS, SAVED_BACK))
    t = paddle3_tagger
    fed = (
        "fed ids [N, T] right-padded with zeros and lens [N]"
        if lengths
        else f"nn.GRU without sequence_length, fed ids [N, {MAX_WORDS}] alone (every sentence "
        "runs all the padded steps, in Paddle and here)"
    )
    return "\n".join(
        [
            f"### {title}",
            "",
            f"Embedding {t.VOCAB} x {t.EMBED}, {t.LAYERS}-layer bidirectional nn.GRU (hidden "
            f"{t.HIDDEN}), Dropout, Linear to {t.TAGS} tags; saved by paddle.jit.save with PIR "
            f"on, {fed}. Paddle Inference on the new IR; {SAVED_BACK}: Paddle Inference "
            "(ir_optim) on the model as fusebridge optimizes it, written back by fb.save_paddle "
            "with our GRU as a Paddle custom operator.",
            "",
            table(rows),
            "",
            _fastest_paddle(rows),
        ]
    )


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(threads)
    repeat = 10 if quick else 40
    parts = [
        "## Paddle models end to end",
        "",
        f"{threads} thread(s) for every runtime (the kernels' pool / Paddle's math library). "
        "Session overhead = time per run outside kernels and ONNX Runtime calls.",
    ]
    for name in assets.NAMES:
        rows = compare_with_paddle(assets.path(name), (1, 16, 64), repeat=repeat)
        parts += ["", f"### {name}", "", table(rows)]
    parts += ["", _paddle3_section(repeat, lengths=True), "", _paddle3_section(repeat, False)]
    return "\n".join(parts)
