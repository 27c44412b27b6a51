"""Dropout bandwidth, side by side in one run: a plain copy of the same bytes (the memory
limit), fusebridge's forward/backward variants on every ISA path, and the peers (torch CPU,
a NumPy Philox dropout) when installed. GB/s counts 8 bytes per float32 element (read x,
write y); the ratio is to the copy."""

from __future__ import annotations

import numpy as np

from benchmarks.common import best_time, markdown_table
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
    return f"### {title}\n\n" + markdown_table(["variant", "ms", "GB/s", "ratio to copy"], table)


if __name__ == "__main__":
    print(run(quick=True))
