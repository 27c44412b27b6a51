"""The deterministic GEMM against NumPy's: `kernels.matmul` (tiles cut by the shapes alone, one
single-threaded OpenBLAS call each, so the bits never depend on the thread count) and
`matmul_dropout` against np.matmul (NumPy's own threaded OpenBLAS) at the shapes of issue 41,
interleaved medians. Targets: matmul >= 0.95x np.matmul's speed, matmul_dropout <= 1.1x its
time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from benchmarks.common import markdown_table, medians_in_blocks
from fusebridge import kernels

P = 0.1
SEED = 20261121
SHAPES = [((64, 512), (512, 2048)), ((512, 512), (512, 512)), ((1024, 1024), (1024, 1024))]


def _cases(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> list[tuple[str, Callable]]:
    return [
        ("np.matmul (NumPy's threaded OpenBLAS)", lambda: np.matmul(a, b, out=y)),
        ("fusebridge matmul", lambda: kernels.matmul(a, b, out=y)),
        ("fusebridge matmul_dropout", lambda: kernels.matmul_dropout(a, b, P, seed=SEED, out=y)),
    ]


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(threads)
    blocks, repeat = (3, 10) if quick else (7, 20)
    rng = np.random.default_rng(0)
    table = []
    for a_shape, b_shape in SHAPES:
        a = rng.standard_normal(a_shape, dtype=np.float32)
        b = rng.standard_normal(b_shape, dtype=np.float32)
        y = np.empty((a_shape[0], b_shape[1]), np.float32)
        prim = kernels.fused_dropout._matmul_primitive(
            "gemm", a, b, None, False, False, P, "upscale_in_train", True, None
        )[0]
        timed = medians_in_blocks(_cases(a, b, y), blocks, repeat)
        (_, np_t, np_mixed) = timed[0]
        flops = 2.0 * a_shape[0] * a_shape[1] * b_shape[1]
        shape = f"{list(a_shape)} x {list(b_shape)}"
        tiles = f"{prim.tile_rows} x {prim.tile_cols}"
        for name, secs, mixed in timed:
            table.append(
                [
                    shape,
                    name,
                    tiles if name.startswith("fusebridge") else "-",
                    f"{secs * 1e3:.3f}",
                    f"{flops / secs / 1e9:.0f}",
                    f"{secs / np_t:.3f}",
                    f"{mixed / np_mixed:.3f}",
                ]
            )
    title = (
        f"GEMM, float32, {threads} threads, {kernels.isa()}: median of {blocks} interleaved "
        f"blocks of {repeat} calls"
    )
    header = [
        "shape",
        "variant",
        "tiles",
        "ms",
        "GFLOP/s",
        "time / np.matmul (targets: matmul <= 1.053, matmul_dropout <= 1.1)",
        "same, back to back",
    ]
    return f"### {title}\n\n" + markdown_table(header, table)


if __name__ == "__main__":
    print(run(quick=True))
