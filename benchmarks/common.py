"""Timing and table helpers shared by the benchmarks."""

from __future__ import annotations

import importlib.util
import os
import platform
import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Best wall time of `repeat` calls (the least disturbed by the noisy 2-core machine)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def timed_in_turns(
    cases: list[tuple[str, Callable[[], object]]], repeat: int
) -> list[tuple[str, float]]:
    """Best time of each case, the cases taking turns over several rounds: this VM's speed
    drifts by tens of percent within a minute, and taking turns exposes every case to it.
    Peers (names not starting with "fusebridge") take turns among themselves afterwards:
    their thread pools (torch's OpenMP, NumPy's OpenBLAS) spin after each call and would take
    the two cores from the next case."""
    ours = [c for c in cases if c[0].startswith("fusebridge")]
    peers = [c for c in cases if c not in ours]
    best: dict[str, float] = {}
    for group in (ours, peers):
        time.sleep(0.5)  # let the last group's spinning threads go to sleep
        for _ in range(5):
            for name, fn in group:
                best[name] = min(best.get(name, float("inf")), best_time(fn, max(1, repeat // 5)))
    return [(name, best[name]) for name, _ in cases]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def missing_peer(module: str, title: str, install: str) -> str | None:
    """The section `title` as one row saying that the peer `module` is not installed (and how
    to get it), or None when it is: a missing peer is a result, not a crash."""
    if importlib.util.find_spec(module) is not None:
        return None
    row = [module, f"not installed: {install}"]
    return f"### {title}\n\n" + markdown_table(["peer", "status"], [row])
