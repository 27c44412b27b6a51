"""The four model families beyond taggers (fusebridge/models/paddle_families.py at BENCH sizes: a
DeepSpeech2-style speech model, a CRNN-style recogniser, an ERNIE-style encoder, a GRU text
classifier), saved by Paddle 3.3 (paddle.jit.save with PIR on; the speech model also as a legacy
.pdmodel, the one family Paddle can still save with PIR off), 1 / 16 / 64 inputs of unequal
length: fusebridge Session (optimized) vs Paddle's Executor, Paddle Inference with ir_optim and
with oneDNN, each peer in its own process (fusebridge.bench.paddle_comparison). Best and median
ms per batch; every peer's outputs are checked against fusebridge's.

    python -m benchmarks.run --only paddle_families [--quick]

also writes benchmarks/results/paddle_families/paddle_families{,-quick}.{md,svg}: the table and
a chart of the fastest Paddle configuration's time over fusebridge's, per family and batch."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import missing_peer
from benchmarks.paddle_models import ratios
from fusebridge import kernels
from fusebridge.bench.paddle_comparison import PEERS, compare_batches, failed, table
from fusebridge.models import paddle_families as families

TITLE = "Paddle model families"
OUT = Path(__file__).parent / "results" / "paddle_families"
BATCHES = (1, 16, 64)
# The targets of the issue: never slower than Paddle's fastest; 1.5x where the model has GRUs.
TARGETS = {"deepspeech": 1.5, "crnn": 1.0, "ernie": 1.0, "classifier": 1.5}


def _batches(name: str) -> list[tuple[int, int, dict]]:
    """(inputs, their total length in tokens / frames / columns, the peer feeds) per batch."""
    out = []
    for n in BATCHES:
        feeds = families.feeds(name, n, seed=n, sizes=families.BENCH)
        first = next(iter(feeds.values()))
        if "lens" in feeds:
            length = int(feeds["lens"].sum())
        elif name == "ernie":
            length = int(np.count_nonzero(feeds["ids"]))
        else:
            length = first.shape[0] * first.shape[-1]
        out.append((n, length, {k: (v, None) for k, v in feeds.items()}))
    return out


def _fastest_over_ours(rows: list[dict]) -> dict[int, float]:
    """Per batch size: the fastest Paddle peer that ran and agreed, over fusebridge (best)."""
    ours = {r["sentences"]: r["ms"] for r in rows if r["runtime"] == "fusebridge"}
    fastest: dict[int, float] = {}
    for r in rows:
        if r["runtime"] in PEERS and not failed(r):
            fastest[r["sentences"]] = min(fastest.get(r["sentences"], np.inf), r["ms"])
    return {n: fastest[n] / ours[n] for n in fastest}


def chart(
    results: dict[str, dict[int, float]],
    title: str,
    note: str = "fastest Paddle configuration time / fusebridge time (best of the runs)",
) -> str:
    """Horizontal bars: a peer's time / fusebridge's per model and batch size (by default the
    fastest Paddle configuration's; `note`, under the bars, says which), lines at 1x and
    1.5x."""
    width, left, right, bar, gap, top = 720, 190, 60, 13, 10, 44
    rows = [(label, n, r) for label, per in results.items() for n, r in per.items()]
    height = top + len(rows) * bar + len(results) * gap + 40
    most = max([2.0, *(r for _, _, r in rows)]) * 1.05
    x = lambda v: left + (width - left - right) * v / most  # noqa: E731
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{title}</text>',
    ]
    y = top
    for label, per in results.items():
        for n, ratio in per.items():
            color = "#4878a8" if ratio >= 1 else "#c04040"
            parts += [
                f'<text x="{left - 8}" y="{y + bar - 2}" text-anchor="end">{label}, {n}</text>',
                f'<rect x="{left}" y="{y}" width="{x(ratio) - left:.1f}" height="{bar - 2}" '
                f'fill="{color}"/>',
                f'<text x="{x(ratio) + 4:.1f}" y="{y + bar - 3}">{ratio:.2f}x</text>',
            ]
            y += bar
        y += gap
    for mark in (1.0, 1.5):
        parts.append(
            f'<line x1="{x(mark):.1f}" x2="{x(mark):.1f}" y1="{top - 6}" y2="{y}" '
            'stroke="#888" stroke-dasharray="4 3"/>'
            f'<text x="{x(mark):.1f}" y="{top - 10}" text-anchor="middle">{mark:g}x</text>'
        )
    parts.append(
        f'<text x="{left}" y="{y + 18}" fill="#555">{note}; label: model, inputs per batch'
        "</text></svg>"
    )
    return "\n".join(parts) + "\n"


def run(quick: bool = False, threads: int = 2) -> str:
    missing = missing_peer("paddle", TITLE, "pip install -e '.[bench]'")
    if missing is not None:
        return missing
    kernels.set_num_threads(threads)
    repeat = 10 if quick else 30
    parts = [f"## {TITLE}", "", __doc__.split("\n\n")[0], ""]
    results: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reported = families.save_all(root, families.BENCH, ways=("jit", "legacy"))
        for saved in sorted(root.glob("*/*")):
            name, way = saved.parent.name, saved.name
            rows = compare_batches(saved, _batches(name), repeat=repeat, peers=PEERS)
            results[f"{name} ({way})"] = _fastest_over_ours(rows)
            parts += [
                f"### {name} ({'paddle.jit.save, PIR' if way == 'jit' else 'legacy .pdmodel'})",
                "",
                table(rows),
                "",
                f"Fastest Paddle configuration / fusebridge, by inputs per batch: "
                f"{ratios(rows, set(PEERS), 'fusebridge')} (target >= {TARGETS[name]}x).",
                "",
            ]
    if reported:
        parts += ["Not saved (Paddle cannot):", "", "```", reported, "```", ""]
    text = "\n".join(parts)
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "paddle_families-quick" if quick else "paddle_families"
    (OUT / f"{stem}.md").write_text(text + "\n")
    title = f"Paddle model families: fastest Paddle / fusebridge ({threads} threads)"
    (OUT / f"{stem}.svg").write_text(chart(results, title))
    print(f"wrote {OUT / stem}.{{md,svg}}", file=sys.stderr)
    return text
