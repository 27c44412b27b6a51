"""What building the GRU's batch plan per call costs: the plan alone (GruPrimitive.plan_ns,
timed inside the core) against the whole fusion_gru call (packed weights, out= given, as a
Session runs it), at 1, 16 and 64 sentences of 5..60 words.
`python -m benchmarks.gru_plan` writes benchmarks/results/gru_plan.md and prints it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.common import machine, markdown_table, timed_in_turns
from fusebridge import kernels
from fusebridge.kernels import core

SENTENCES = (1, 16, 64)
SIZES = ((128, 128), (256, 256))  # (IC, OC)
LENGTHS = (5, 60)
OUT = Path(__file__).parent / "results" / "gru_plan.md"


def _descriptor(ic: int, oc: int) -> object:
    c = core._C
    return c.GRUDescriptor(
        layout=c.SeqLayout.lod,
        ic=ic,
        oc=oc,
        directions=1,
        reverse=False,
        linear_before_reset=False,
        origin_mode=True,
        act=c.GruAct.tanh,
        gate=c.GruAct.sigmoid,
        projection=True,
        isa=c.Isa[kernels.isa()],
    )


def _row(n: int, ic: int, oc: int, repeat: int) -> list[str]:
    rng = np.random.default_rng(n * 1000 + oc)
    lens = rng.integers(LENGTHS[0], LENGTHS[1] + 1, n).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = rng.standard_normal((int(lens.sum()), ic), dtype=np.float32)
    w = kernels.pack_gru_weights(
        rng.standard_normal((ic, 3 * oc), dtype=np.float32) / np.sqrt(ic),
        rng.standard_normal((oc, 3 * oc), dtype=np.float32) / np.sqrt(oc),
    )
    out = np.empty((x.shape[0], oc), np.float32)
    [(_, call)] = timed_in_turns(
        [("fusebridge fusion_gru", lambda: kernels.fusion_gru(x, w, offsets=offsets, out=out))],
        repeat,
    )
    prim = core._C.GruPrimitive(_descriptor(ic, oc))
    plan = min(prim.plan_ns(lens, 0, 2000) for _ in range(5)) * 1e-9
    return [
        str(n),
        f"{ic} / {oc}",
        str(int(lens.sum())),
        f"{plan * 1e6:.2f}",
        f"{call * 1e6:.1f}",
        f"{plan / call:.3%}",
    ]


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(min(threads, kernels.thread_cap()))
    repeat = 10 if quick else 50
    rows = [_row(n, ic, oc, repeat) for ic, oc in SIZES for n in SENTENCES]
    header = ["sentences", "IC / OC", "words", "plan us", "whole call us", "plan / call"]
    title = (
        f"GRU batch plan per call, lengths {LENGTHS[0]}..{LENGTHS[1]}, forward, lod, "
        f"{kernels.isa()}, {kernels.get_num_threads()} threads"
    )
    return f"### {title}\n\n" + markdown_table(header, rows)


def main() -> None:
    text = f"Machine: {machine()}\n\n{run()}\n"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
