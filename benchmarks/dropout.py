"""Dropout bandwidth, side by side in one run: a plain copy of the same bytes (the memory
limit), fusebridge's forward/backward variants on every ISA path, and the peers (torch CPU,
a NumPy Philox dropout) when installed. GB/s counts 8 bytes per float32 element (read x,
write y); the ratio is to the copy."""

from __future__ import annotations

import numpy as np

from benchmarks.common import best_time, markdown_table, medians_in_blocks
from fusebridge import kernels
from fusebridge.kernels import reference

P = 0.1
SEED = 20261121


def run(quick: bool = False, threads: int = 2) -> str:
    n = 64 << 20
    repeat = 5 if quick else 15
    kernels.set_num_threads(threads)
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y = np.empty_like(x)
    rows: list[tuple[str, float, int]] = []  # (name, seconds, elements)

    rows.append(
        ("np.copyto (memory limit, 1 thread)", best_time(lambda: np.copyto(y, x), repeat), n)
    )
    start_isa = kernels.isa()
    for isa in reversed(kernels.available_isas()):
        kernels.set_isa(isa)
        _, mask = kernels.dropout(x, P, seed=SEED, return_mask=True)
        cases = {
            "forward, no mask": lambda: kernels.dropout(x, P, seed=SEED, out=y),
            "forward + mask": lambda: kernels.dropout(x, P, seed=SEED, out=y, return_mask=True),
            "backward from mask": lambda m=mask: kernels.dropout_backward(x, P, mask=m, out=y),
            "backward recomputed": lambda: kernels.dropout_backward(x, P, seed=SEED, out=y),
        }
        if isa == "scalar" and quick:
            cases = {"forward + mask": cases["forward + mask"]}
        for name, fn in cases.items():
            rows.append((f"fusebridge {isa}: {name}", best_time(fn, repeat), n))
    kernels.set_isa(start_isa)

    try:
        import torch

        torch.set_num_threads(threads)
        t = torch.from_numpy(x)
        with torch.no_grad():
            secs = best_time(lambda: torch.nn.functional.dropout(t, P, training=True), repeat)
        rows.append((f"torch {torch.__version__} F.dropout (CPU)", secs, n))
    except ImportError:
        rows.append(("torch F.dropout: not installed", float("nan"), n))

    small = x[: 1 << 22]  # the NumPy Philox needs ~100 bytes of temporaries per element
    secs = best_time(lambda: reference.dropout(small, P, SEED), 1 if quick else 3)
    rows.append(("NumPy Philox dropout (reference.py, 4 Mi elements)", secs, small.size))

    copy_bw = 8 * n / rows[0][1] / 1e9
    table = []
    for name, secs, count in rows:
        bw = 8 * count / secs / 1e9
        table.append([name, f"{secs * 1e3:.1f}", f"{bw:.2f}", f"{bw / copy_bw:.3f}"])
    title = f"Dropout, {n >> 20} Mi float32 elements, p = {P}, {threads} threads"
    return (
        _against_copy(x, y, quick, threads)
        + f"\n\n### {title}, best of {repeat}\n\n"
        + markdown_table(["variant", "ms", "GB/s", "ratio to copy"], table)
    )


def _against_copy(x: np.ndarray, y: np.ndarray, quick: bool, threads: int) -> str:
    """The target's measurement: forward with mask against a copy of the same bytes, median of
    7 blocks taken in turns (a settle pause before each), and back to back."""
    blocks, repeat = (3, 3) if quick else (7, 5)
    cases = [
        ("np.copyto (a copy, 1 thread)", lambda: np.copyto(y, x)),
        (
            "fusebridge forward + mask",
            lambda: kernels.dropout(x, P, seed=SEED, out=y, return_mask=True),
        ),
        ("fusebridge forward, no mask", lambda: kernels.dropout(x, P, seed=SEED, out=y)),
        ("fusebridge p = 0 (our copy)", lambda: kernels.dropout(x, 0.0, seed=SEED, out=y)),
    ]
    timed = medians_in_blocks(cases, blocks, repeat)
    copy, copy_mixed = timed[0][1], timed[0][2]
    table = [
        [
            name,
            f"{secs * 1e3:.1f}",
            f"{8 * x.size / secs / 1e9:.2f}",
            f"{copy / secs:.3f}",
            f"{copy_mixed / mixed:.3f}",
        ]
        for name, secs, mixed in timed
    ]
    title = (
        f"Dropout against a copy, {x.size >> 20} Mi float32, p = {P}, {threads} threads, "
        f"{kernels.isa()}: median of {blocks} interleaved blocks of {repeat} calls (target: "
        "forward + mask >= 0.9 of the copy's bandwidth)"
    )
    header = ["variant", "ms", "GB/s", "bandwidth / copy's", "same, back to back"]
    return f"### {title}\n\n" + markdown_table(header, table)


if __name__ == "__main__":
    print(run(quick=True))
