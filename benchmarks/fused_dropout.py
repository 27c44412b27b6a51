"""Fused dropout, side by side in one run: softmax_dropout against our softmax then our
dropout and against torch's softmax + F.dropout on attention probabilities; matmul_dropout
against the bare GEMM of the same shape (our tiled `matmul`, `sgemm`, np.matmul) and the
unfused pair; and the memory the recompute path saves (the packed mask it never stores).
fusebridge writes into preallocated outputs (out=); torch allocates its results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.common import markdown_table, timed_in_turns
from fusebridge import kernels

P = 0.1
SEED = 20261121
ATTENTION = (16, 8, 128, 128)
GEMMS = [((64, 512), (512, 2048)), ((8, 128, 64), (8, 64, 128))]


def _torch(threads: int) -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def _fast_isas() -> list[str]:
    # scalar is the portable fallback: its numbers say nothing about the fusion.
    return [i for i in reversed(kernels.available_isas()) if i != "scalar"] or ["scalar"]


def _on(isa: str, fn: Callable[[], object]) -> Callable[[], object]:
    """fn run with primitives for `isa` (the ISA current at a call picks the primitive)."""

    def run() -> object:
        kernels.set_isa(isa)
        return fn()

    return run


def _softmax_cases(x: np.ndarray, torch: Any) -> list[tuple[str, Callable[[], object]]]:
    y, tmp = np.empty_like(x), np.empty_like(x)
    cases: list[tuple[str, Callable[[], object]]] = []
    for isa in _fast_isas():
        cases += [
            (
                f"fusebridge {isa}: softmax_dropout (fused)",
                _on(isa, lambda: kernels.softmax_dropout(x, P, seed=SEED, out=y)),
            ),
            (
                f"fusebridge {isa}: softmax, then dropout",
                _on(isa, lambda: kernels.dropout(kernels.softmax(x, out=tmp), P, seed=SEED, out=y)),
            ),
            (f"fusebridge {isa}: softmax alone", _on(isa, lambda: kernels.softmax(x, out=y))),
        ]
    if torch is not None:
        t = torch.from_numpy(x)

        def pair() -> object:
            with torch.no_grad():
                return torch.nn.functional.dropout(torch.softmax(t, -1), P, training=True)

        cases += [
            (f"torch {torch.__version__}: softmax + F.dropout", pair),
            (f"torch {torch.__version__}: softmax alone", lambda: torch.softmax(t, -1)),
        ]
    return cases


def _softmax_section(repeat: int, torch: Any) -> str:
    x = np.random.default_rng(0).standard_normal(ATTENTION, dtype=np.float32) * 3
    start_isa = kernels.isa()
    rows = timed_in_turns(_softmax_cases(x, torch), repeat)
    kernels.set_isa(start_isa)
    fused = rows[0][1]
    table = [[name, f"{secs * 1e3:.3f}", f"{secs / fused:.2f}"] for name, secs in rows]
    title = (
        f"softmax + dropout, attention probabilities {list(ATTENTION)} float32, last axis, p = {P}"
    )
    header = ["variant", "ms", f"time / fused ({_fast_isas()[0]})"]
    return f"### {title}\n\n" + markdown_table(header, table)


def _gemm_cases(a: np.ndarray, b: np.ndarray, torch: Any) -> list[tuple[str, Callable]]:
    y = kernels.matmul(a, b)
    tmp = np.empty_like(y)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("fusebridge matmul (bare GEMM, the same tiles)", lambda: kernels.matmul(a, b, out=y)),
        (
            "fusebridge matmul_dropout (fused)",
            lambda: kernels.matmul_dropout(a, b, P, seed=SEED, out=y),
        ),
        (
            "fusebridge matmul, then dropout",
            lambda: kernels.dropout(kernels.matmul(a, b, out=tmp), P, seed=SEED, out=y),
        ),
        ("np.matmul (NumPy's OpenBLAS)", lambda: np.matmul(a, b, out=y)),
    ]
    if a.ndim == 2:
        cases.insert(
            1, ("fusebridge sgemm (bare GEMM, one slice per thread)", lambda: kernels.sgemm(a, b))
        )
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        cases.append(
            (
                f"torch {torch.__version__}: matmul + F.dropout",
                lambda: torch.nn.functional.dropout(torch.matmul(ta, tb), P, training=True),
            )
        )
    return cases


def _gemm_section(repeat: int, torch: Any) -> str:
    rng = np.random.default_rng(1)
    table = []
    for a_shape, b_shape in GEMMS:
        a = rng.standard_normal(a_shape, dtype=np.float32)
        b = rng.standard_normal(b_shape, dtype=np.float32)
        timed = timed_in_turns(_gemm_cases(a, b, torch), repeat)
        bare = timed[0][1]
        shape = f"{list(a_shape)} x {list(b_shape)}"
        for name, secs in timed:
            table.append([shape, name, f"{secs * 1e3:.3f}", f"{secs / bare:.2f}"])
    title = f"matmul + dropout, float32, p = {P}, {kernels.isa()}"
    header = ["shape", "variant", "ms", "time / bare GEMM (matmul)"]
    return f"### {title}\n\n" + markdown_table(header, table)


def _memory_section(repeat: int) -> str:
    """Backward from the stored mask vs recomputed from (seed, offset): the recompute path
    keeps no mask, at the cost of generating the bits again."""
    rng = np.random.default_rng(2)
    table = []
    x = rng.standard_normal(ATTENTION, dtype=np.float32)
    dy = rng.standard_normal(ATTENTION, dtype=np.float32)
    dx = np.empty_like(x)
    _, mask = kernels.softmax_dropout(x, P, seed=SEED, return_mask=True)
    cases = [
        (
            f"softmax_dropout {list(ATTENTION)}",
            x.nbytes,
            mask.nbytes,
            lambda: kernels.softmax_dropout_backward(dy, P, x=x, mask=mask, out=dx),
            lambda: kernels.softmax_dropout_backward(dy, P, x=x, seed=SEED, out=dx),
        ),
    ]
    for a_shape, b_shape in GEMMS:
        a = rng.standard_normal(a_shape, dtype=np.float32)
        b = rng.standard_normal(b_shape, dtype=np.float32)
        y, m = kernels.matmul_dropout(a, b, P, seed=SEED, return_mask=True)
        g = rng.standard_normal(y.shape, dtype=np.float32)
        cases.append(
            (
                f"matmul_dropout {list(a_shape)} x {list(b_shape)}",
                y.nbytes,
                m.nbytes,
                lambda a=a, b=b, g=g, m=m: kernels.matmul_dropout_backward(g, a, b, P, mask=m),
                lambda a=a, b=b, g=g: kernels.matmul_dropout_backward(g, a, b, P, seed=SEED),
            )
        )
    for name, out_bytes, mask_bytes, from_mask, recompute in cases:
        cases_timed = timed_in_turns(
            [("fusebridge mask", from_mask), ("fusebridge re", recompute)], repeat
        )
        (_, t_mask), (_, t_re) = cases_timed
        table.append(
            [
                name,
                f"{out_bytes / 2**20:.2f}",
                f"{mask_bytes / 2**10:.0f}",
                f"{mask_bytes / out_bytes:.3f}",
                f"{t_mask * 1e3:.3f}",
                f"{t_re * 1e3:.3f}",
                f"{t_re / t_mask:.2f}",
            ]
        )
    header = [
        "op",
        "output MiB",
        "mask KiB not stored",
        "mask / output",
        "backward from mask ms",
        "backward recomputed ms",
        "recomputed / from mask",
    ]
    return "### Backward: memory the recompute path saves\n\n" + markdown_table(header, table)


BREAKDOWN_SHAPES = [(1, 2, 128, 128), (2, 8, 128, 128), ATTENTION]  # 128 KiB, 1 MiB, 8 MiB


def _breakdown_cases(x: np.ndarray) -> list[tuple[str, Callable[[], object]]]:
    y, tmp = np.empty_like(x), np.empty_like(x)
    return [
        ("fusebridge copy (np.copyto)", lambda: np.copyto(y, x)),
        ("fusebridge keep bits alone", lambda: kernels.dropout_mask(x.shape, P, seed=SEED)),
        ("fusebridge softmax", lambda: kernels.softmax(x, out=y)),
        ("fusebridge dropout", lambda: kernels.dropout(x, P, seed=SEED, out=y)),
        (
            "fusebridge softmax, then dropout",
            lambda: kernels.dropout(kernels.softmax(x, out=tmp), P, seed=SEED, out=y),
        ),
        (
            "fusebridge softmax_dropout, p = 0 with mask",
            lambda: kernels.softmax_dropout(x, 0.0, seed=SEED, out=y, return_mask=True),
        ),
        ("fusebridge softmax_dropout", lambda: kernels.softmax_dropout(x, P, seed=SEED, out=y)),
    ]


def _breakdown_section(repeat: int) -> str:
    """Where softmax_dropout's time goes, one thread, ns per element: memory alone (a copy),
    the keep bits alone, each op alone, the fused op without Philox (p = 0, mask kept) and
    with it, at a size in L2, one in L3 and the attention size."""
    threads = kernels.get_num_threads()
    kernels.set_num_threads(1)
    table = []
    for shape in BREAKDOWN_SHAPES:
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32) * 3
        for name, secs in timed_in_turns(_breakdown_cases(x), repeat):
            what = name.removeprefix("fusebridge ")
            table.append([f"{x.nbytes >> 10} KiB", what, f"{secs / x.size * 1e9:.3f}"])
    kernels.set_num_threads(threads)
    title = f"softmax_dropout, where the time goes: 1 thread, ns per element, p = {P}"
    return f"### {title}\n\n" + markdown_table(["float32 x", "what", "ns / element"], table)


def run(quick: bool = False, threads: int = 2) -> str:
    repeat = 10 if quick else 40
    kernels.set_num_threads(threads)
    torch = _torch(threads)
    sections = [
        _softmax_section(repeat, torch),
        _gemm_section(repeat, torch),
        _memory_section(max(3, repeat // 4)),
        _breakdown_section(repeat),
    ]
    return f"## Fused dropout, {threads} threads\n\n" + "\n\n".join(sections)


if __name__ == "__main__":
    print(run(quick=True))
