"""Paddle models end to end: the bundled tagger and sentiment classifier, 1 / 16 / 64
sentences of 5..60 words, fusebridge Session (optimized) vs Paddle's Executor on the unfused
program vs Paddle Inference with ir_optim (and with oneDNN), each Paddle peer in a subprocess
(fusebridge.bench.paddle_comparison). Best and median ms per batch; a peer's outputs are checked
against fusebridge's; "x fusebridge time" > 1 means the peer is slower."""

from __future__ import annotations

from fusebridge import kernels
from fusebridge.bench.paddle_comparison import compare_with_paddle, table
from fusebridge.models import assets


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(threads)
    parts = [
        "## Paddle models end to end",
        "",
        f"{threads} thread(s) for every runtime (OpenMP / Paddle's math library). Session "
        "overhead = time per run outside kernels and ONNX Runtime calls.",
    ]
    for name in assets.NAMES:
        rows = compare_with_paddle(assets.path(name), (1, 16, 64), repeat=10 if quick else 40)
        parts += ["", f"### {name}", "", table(rows)]
    return "\n".join(parts)
