"""Timing and table helpers shared by the benchmarks."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def timings(fn: Callable[[], object], repeat: int, warmup: int = 1) -> list[float]:
    """Wall times of `repeat` calls after `warmup` untimed ones, in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def best_time(fn: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Best wall time of `repeat` calls (the least disturbed by the noisy 2-core machine)."""
    return min(timings(fn, repeat, warmup))


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


def medians_in_blocks(
    cases: list[tuple[str, Callable[[], object]]], blocks: int, repeat: int, settle: float = 0.3
) -> list[tuple[str, float, float]]:
    """(name, median of the block medians, back-to-back median) of each case, in seconds.
    The cases take turns in `blocks` rounds; before each case's block the process sleeps
    `settle` seconds, so the spinning pool of the case before (OpenBLAS's, torch's, ours) has
    gone quiet and the VM's drift meets every case alike. Back-to-back: the cases called in
    turn, one call each, with no pause, as a program mixing them would."""
    per_block: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(blocks):
        for name, fn in cases:
            time.sleep(settle)
            per_block[name].append(statistics.median(timings(fn, repeat)))
    mixed: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repeat):
        for name, fn in cases:
            t0 = time.perf_counter()
            fn()
            mixed[name].append(time.perf_counter() - t0)
    return [
        (name, statistics.median(per_block[name]), statistics.median(mixed[name]))
        for name, _ in cases
    ]


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


class BuildChild:
    """One fusebridge build's worker for the two-build benchmarks: `python -m module --worker
    FOLDER *args`, in `python`'s environment, answering one JSON request line with one JSON line.
    It sees only this checkout's benchmarks package (a link in `path`), never fusebridge's
    source tree, so it imports the build installed for `python`. Its first line (`ready`) says
    what it loaded."""

    def __init__(
        self, name: str, python: str, path: Path, module: str, args: list[str], env: dict
    ) -> None:
        self.python = python
        self.folder = path / name  # what the child writes (outputs, saved models)
        self.folder.mkdir()
        environ = {**os.environ, "PYTHONPATH": str(path), "GLOG_minloglevel": "3", **env}
        # One op-library cache folder for both builds would hand one build's library to the
        # other; without the variables each build keeps its own (the folder hashes its kernels).
        for var in ("FUSEBRIDGE_PADDLE_CACHE", "FUSEBRIDGE_MXNET_CACHE"):
            environ.pop(var, None)
        cmd = [python, "-m", module, "--worker", str(self.folder), *args]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=path, env=environ
        )
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark child exited with {self.proc.wait()}")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()
