"""Paddle models end to end: the bundled tagger and sentiment classifier, and a Paddle 3 tagger
saved with PIR (benchmarks/paddle3_tagger.py), 1 / 16 / 64 sentences of 5..60 words,
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
from fusebridge.bench.paddle_comparison import compare_with_paddle, failed, table
from fusebridge.models import assets

PADDLE3_TITLE = "Paddle 3 tagger (PIR)"


def _fastest_paddle(rows: list[dict[str, object]]) -> str:
    """Per batch size, the fastest Paddle peer that ran and agreed, as a multiple of
    fusebridge's time, best against best and median against median (the target is >= 1.5x)."""
    ours = {r["sentences"]: r for r in rows if r["runtime"] == "fusebridge"}
    peers: dict[object, list[dict[str, object]]] = {}
    for r in rows:
        if r["runtime"] != "fusebridge" and not failed(r):
            peers.setdefault(r["sentences"], []).append(r)
    cells = ", ".join(
        f"{n}: {min(p['ms'] for p in ps) / ours[n]['ms']:.2f}x "
        f"(median {min(p['median_ms'] for p in ps) / ours[n]['median_ms']:.2f}x)"
        for n, ps in peers.items()
    )
    return (
        "Fastest Paddle configuration / fusebridge, by sentences per batch: "
        f"{cells or 'none ran'} (target >= 1.5x)."
    )


def _paddle3_section(repeat: int) -> str:
    missing = missing_peer("paddle", PADDLE3_TITLE, "pip install -e '.[bench]'")
    if missing is not None:
        return missing
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model = paddle3_tagger.save(Path(tmp))
        except RuntimeError as exc:  # Paddle could not save it: the bundled models' tables stay
            return f"### {PADDLE3_TITLE}: failed\n\n```\n{exc}\n```"
        rows = compare_with_paddle(model, (1, 16, 64), repeat=repeat)
    t = paddle3_tagger
    return "\n".join(
        [
            f"### {PADDLE3_TITLE}",
            "",
            f"Embedding {t.VOCAB} x {t.EMBED}, {t.LAYERS}-layer bidirectional nn.GRU (hidden "
            f"{t.HIDDEN}, sequence_length), Dropout, Linear to {t.TAGS} tags; saved by "
            "paddle.jit.save with PIR on, fed ids [N, T] right-padded with zeros and lens [N]. "
            "Paddle Inference on the new IR.",
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
        f"{threads} thread(s) for every runtime (OpenMP / Paddle's math library). Session "
        "overhead = time per run outside kernels and ONNX Runtime calls.",
    ]
    for name in assets.NAMES:
        rows = compare_with_paddle(assets.path(name), (1, 16, 64), repeat=repeat)
        parts += ["", f"### {name}", "", table(rows)]
    parts += ["", _paddle3_section(repeat)]
    return "\n".join(parts)
