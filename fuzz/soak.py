"""Soak runs: a Session, or our ops inside Paddle and MXNet, called many times from several
Python threads at once. Each passes when resident memory reaches a plateau (less than 1 MiB of
growth over the last half of the calls), no file descriptor stays open, and every result
equals the one a single-threaded call gave for the same input, bit for bit (the kernels' bits
do not depend on threads or batches: docs/gru.md).

    python -m fuzz.soak                       # 100000 Session runs, 100000 Paddle op calls
    python -m fuzz.soak --only mxnet          # in the MXNet venv: 100000 MXNet op calls
    python -m fuzz.soak --calls 2000          # a shorter run (tests/test_soak.py runs less)

The figures go to fuzz/results/soak.md and docs/reliability.md."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

PLATEAU_MIB = 1.0
# Python objects a soak may leave alive beyond those it found (caches filled by the first
# calls of a shape, the readings themselves); a leak of one object a call leaves thousands.
OBJECTS_KEPT = 200
SAMPLES = 40  # resident-memory readings over a run


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@dataclasses.dataclass
class Soak:
    """One soak run: `calls` calls over `threads` threads; rss: (calls done, MiB) readings."""

    name: str
    calls: int
    threads: int
    seconds: float = 0.0
    rss: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    fds: tuple[int, int] = (0, 0)  # before, after
    objects: tuple[int, int] = (0, 0)  # Python objects the collector tracks, before and after
    mismatches: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    def _lowest(self, start: float, end: float) -> float:
        return min(m for done, m in self.rss if start * self.calls <= done <= end * self.calls)

    @property
    def growth_mib(self) -> float:
        """Resident memory growth over the last half of the calls: the lowest reading of the
        last quarter less the lowest of the quarter before the middle. What stays (a leak, an
        arena that grew) raises every later reading; large batches that happen to run in all
        threads at a reading raise that reading alone (their memory is returned after), and
        the lowest of a stretch leaves them out."""
        return self._lowest(0.75, 1.0) - self._lowest(0.25, 0.5)

    @property
    def peak_mib(self) -> float:
        """The highest reading after the middle less the middle one (transients included)."""
        middle = next(k for k, (done, _) in enumerate(self.rss) if done >= self.calls // 2)
        return max(m for _, m in self.rss[middle:]) - self.rss[middle][1]

    def failures(self, plateau_mib: float = PLATEAU_MIB) -> list[str]:
        """What failed; plateau_mib: the growth allowed over the last half (a short run sees
        the allocators' high-water marks still rising, 1-2 MiB a thousand calls here)."""
        found = [f"result differs: {m}" for m in self.mismatches[:5]] + self.errors[:5]
        if self.growth_mib >= plateau_mib:
            found.append(f"resident memory grew {self.growth_mib:.2f} MiB over the last half")
        if self.objects[1] - self.objects[0] > OBJECTS_KEPT:
            found.append(f"{self.objects[1] - self.objects[0]} more Python objects live")
        if self.fds[1] > self.fds[0]:
            found.append(f"{self.fds[1] - self.fds[0]} file descriptor(s) left open")
        return found

    def row(self) -> str:
        first, last = self.rss[0][1], self.rss[-1][1]
        return (
            f"| {self.name} | {self.calls} | {self.threads} | {self.seconds:.0f} | "
            f"{first:.1f} | {self.rss[len(self.rss) // 2][1]:.1f} | {last:.1f} | "
            f"{self.growth_mib:+.2f} | {self.peak_mib:+.2f} | {self.fds[1] - self.fds[0]:+d} | "
            f"{self.objects[1] - self.objects[0]:+d} | "
            f"{len(self.mismatches)} | {'pass' if not self.failures() else 'FAIL'} |"
        )


HEADER = (
    "| soak | calls | threads | seconds | RSS first (MiB) | RSS half | RSS last | growth over "
    "the last half (MiB) | highest after the half | fds | Python objects | results that differ "
    "| |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def soak(
    name: str,
    cases: list[tuple[Callable[[], object], object]],
    same: Callable[[object, object], bool],
    calls: int,
    threads: int = 4,
    seed: int = 0,
    shuffle: bool = True,
) -> Soak:
    """Calls the cases (call, the result a single-threaded call gave) `calls` times in all from
    `threads` threads, each picking cases at random (else in turn); `same(got, want)`
    compares."""
    result = Soak(name, calls, threads)
    lock = threading.Lock()
    done = [0]
    every = max(1, calls // SAMPLES)

    def worker(k: int) -> None:
        rng = np.random.default_rng([seed, k])
        warm.wait()
        while True:
            with lock:
                if done[0] >= calls:
                    return
                done[0] += 1
                number = done[0]
            pick = int(rng.integers(len(cases))) if shuffle else (number + k) % len(cases)
            call, want = cases[pick]
            try:
                got = call()
            except Exception as exc:  # recorded: a soak reports, it does not stop at one
                with lock:
                    result.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            if not same(got, want):
                with lock:
                    result.mismatches.append(f"call {number}")
            if number % every == 0:
                reading = (number, resident_mib())
                with lock:
                    result.rss.append(reading)

    # Warm-up, not counted: every thread calls every case once, so that what a thread keeps
    # for the largest case (the kernels' per-thread scratch, allocator arenas) is there before
    # the first reading.
    warm = threading.Barrier(threads + 1)
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    warmers = [threading.Thread(target=lambda: [c() for c, _ in cases]) for _ in range(threads)]
    for t in warmers:
        t.start()
    for t in warmers:
        t.join()
    gc.collect()
    fds, objects = open_fds(), len(gc.get_objects())
    result.rss.append((0, resident_mib()))
    start = time.perf_counter()
    warm.wait()
    for t in pool:
        t.join()
    result.seconds = time.perf_counter() - start
    result.rss.sort()
    gc.collect()
    result.fds, result.objects = (fds, open_fds()), (objects, len(gc.get_objects()))
    return result


# -- what is soaked ------------------------------------------------------------------------------


def session_cases(batches: int = 24, seed: int = 0) -> tuple[list, Callable]:
    """The bundled tagger in a Session: batches of 1 to 64 sentences of 1 to 40 words."""
    import fusebridge as fb
    from fusebridge.models import assets

    session = fb.Session(fb.optimize(fb.load(assets.path("tagger")))[0])
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(batches):
        lengths = rng.integers(1, 41, int(rng.integers(1, 65)))
        feeds = {"words": fb.LoDTensor(rng.integers(0, 100, (lengths.sum(), 1)), lengths)}
        (want,) = session.run(feeds).values()  # a single-threaded run of the same batch
        cases.append((lambda feeds=feeds: session.run(feeds), want))

    def same(got: dict, want: fb.LoDTensor) -> bool:
        (tags,) = got.values()
        return np.array_equal(tags.data, want.data) and np.array_equal(tags.offsets, want.offsets)

    return cases, same


def _gru_arrays(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """A padded [T, N, 16] batch of lengths 1..T, and a bidirectional GRU's weights (H 32),
    packed as the framework ops take them (fusebridge.kernels.pack_gru_weights)."""
    from fusebridge import kernels

    lens = rng.integers(1, 21, n)
    x = rng.standard_normal((int(lens.max()), n, 16)).astype(np.float32)
    wx = (rng.standard_normal((2, 16, 96)) * 0.25).astype(np.float32)
    wh = (rng.standard_normal((2, 32, 96)) * 0.18).astype(np.float32)
    b, bh = (rng.standard_normal((2, 2, 96)) * 0.1).astype(np.float32)
    w = kernels.pack_gru_weights(wx, wh, b, bh)
    return x, lens, *(np.array(a) for a in (w.wx, w.wh, w.bias_x, w.bias_hc))


def paddle_cases(seed: int = 0) -> tuple[list, Callable]:
    """Our Paddle custom operators in dygraph: dropout (fusebridge.integrations.paddle) and
    the fused GRU, on tensors of several shapes."""
    import paddle

    import fusebridge as fb
    from fusebridge.integrations import paddle as fb_paddle

    ops = fb_paddle.register()
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(8):
        x = paddle.to_tensor(rng.standard_normal((int(rng.integers(1, 300)), 64)).astype("f4"))
        key = fb.random.key(k)

        def drop(x=x, key=key):
            return fb_paddle.dropout(x, 0.3, key=key).numpy()

        cases.append((drop, drop()))
        args = [paddle.to_tensor(a) for a in _gru_arrays(rng, int(rng.integers(1, 17)))]

        def gru(args=args):
            y = ops.fusebridge_fusion_gru(
                *args, None, "bidirectional", "tnc", True, True, "tanh", "sigmoid"
            )
            return y.numpy()

        cases.append((gru, gru()))
    return cases, np.array_equal


def mxnet_cases(seed: int = 0) -> tuple[list, Callable]:
    """Our MXNet ops through mx.nd: dropout and the fused GRU."""
    import mxnet as mx

    from fusebridge.integrations.mxnet import register

    register()
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(8):
        x = mx.nd.array(rng.standard_normal((int(rng.integers(1, 300)), 64)), dtype="float32")

        def drop(x=x, k=k):
            return mx.nd.fusebridge_dropout(x, p=0.3, seed=k)[0].asnumpy()

        cases.append((drop, drop()))
        x, lens, *weights = _gru_arrays(rng, int(rng.integers(1, 17)))
        args = [mx.nd.array(a, dtype="float32") for a in (x, lens, *weights)]

        def gru(args=args):
            return mx.nd.fusebridge_fusion_gru(
                *args, direction="bidirectional", linear_before_reset=True
            ).asnumpy()

        cases.append((gru, gru()))
    return cases, np.array_equal


SOAKS = {
    "session": (session_cases, 100_000),
    # 100000 calls where the issue asks 10000: 10000 take about a second here, too short for
    # the readings to say anything about a plateau.
    "paddle": (paddle_cases, 100_000),
    "mxnet": (mxnet_cases, 100_000),
}


def run(name: str, calls: int | None = None, threads: int = 4, seed: int = 0) -> Soak:
    make, default = SOAKS[name]
    cases, same = make(seed=seed)
    return soak(name, cases, same, calls or default, threads, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.soak", description=__doc__)
    parser.add_argument("--only", nargs="*", choices=list(SOAKS), default=["session", "paddle"])
    parser.add_argument("--calls", type=int, help="calls per soak (default: 100000)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "soak.md"))
    args = parser.parse_args(argv)
    results = []
    for name in args.only:
        results.append(run(name, args.calls, args.threads, args.seed))
        print(f"{name}: done in {results[-1].seconds:.0f} s", file=sys.stderr, flush=True)
    text = "\n".join(
        [
            f"# soak: {platform.machine()}, Python {platform.python_version()}, seed {args.seed}",
            "",
            HEADER,
            *(r.row() for r in results),
            "",
            *(f"- {r.name}: {f}" for r in results for f in r.failures()),
        ]
    )
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.write(text + "\n\n")
    return 1 if any(r.failures() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
