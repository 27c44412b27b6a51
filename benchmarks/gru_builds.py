"""Two builds of fusebridge side by side: the fusebridge columns of benchmarks/gru.py (the same
cases, weights and timing rule) on this checkout's build and on another one, e.g. the last
release or the commit before a kernel change, to show what a change costs.

    python -m benchmarks.gru_builds --base /path/to/other/venv/bin/python [--quick] [--rounds 5]

Each build runs in a child process of its own interpreter (importing its own fusebridge, with
this checkout's benchmarks package on its path), and the two take turns: for every case and
variant, round after round, base then this. A table entry is the median over rounds of each
round's best call (benchmarks.gru.best_within); the ratio is this / base (below 1: faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import machine, markdown_table

VARIANTS = ("fb_lod", "fb_tnc", "fb_paddle")


def worker(quick: bool, threads: int) -> None:
    """Answers one JSON line per request read from stdin: {"case": i, "variant": v}."""
    from benchmarks import gru  # imported here: fusebridge is this interpreter's

    gru.set_num_threads(threads)
    cases = gru.make_cases(quick)
    runners = [gru.fusebridge_runners(c.arrays, c.direction) for c in cases]
    print(json.dumps({"cases": [c.key for c in cases]}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        case = cases[req["case"]]
        fn = runners[req["case"]][req["variant"]]
        ms = 1e3 * gru.best_within(fn, case.repeat, case.budget_s)
        print(json.dumps({"ms": ms}), flush=True)


class Child:
    def __init__(self, python: str, quick: bool, threads: int, path: Path):
        # The child sees only this checkout's benchmarks package (a link in `path`), never the
        # source tree of fusebridge, so it imports the build installed for `python`.
        env = {**os.environ, "PYTHONPATH": str(path)}
        args = [python, "-m", "benchmarks.gru_builds", "--worker", "--threads", str(threads)]
        self.proc = subprocess.Popen(
            [*args, *(["--quick"] if quick else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=path,
            env=env,
        )
        self.cases = self._read()["cases"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark child exited with {self.proc.wait()}")
        return json.loads(line)

    def time(self, case: int, variant: str) -> float:
        self.proc.stdin.write(json.dumps({"case": case, "variant": variant}) + "\n")
        self.proc.stdin.flush()
        return self._read()["ms"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def run(base: str, quick: bool, rounds: int, threads: int, variants: tuple[str, ...]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "benchmarks").symlink_to(Path(__file__).resolve().parent)
        children = {"base": Child(base, quick, threads, path)}
        children["this"] = Child(sys.executable, quick, threads, path)
        cases = children["this"].cases
        rows = []
        try:
            for i, key in enumerate(cases):
                for variant in variants:
                    times = {name: [] for name in children}
                    for _ in range(rounds):
                        for name, child in children.items():
                            times[name].append(child.time(i, variant))
                    base_ms, this_ms = (statistics.median(times[n]) for n in ("base", "this"))
                    rows.append(
                        [
                            key,
                            variant,
                            f"{base_ms:.3f}",
                            f"{this_ms:.3f}",
                            f"{this_ms / base_ms:.3f}",
                        ]
                    )
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        finally:
            for child in children.values():
                child.close()
    header = ["case", "variant", "base ms", "this ms", "this / base"]
    ratios = [float(r[-1]) for r in rows]
    summary = (
        f"\n{machine()}, {threads} threads, {rounds} rounds; base: {base}\n"
        f"ratio this / base: median {statistics.median(ratios):.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}\n"
    )
    return markdown_table(header, rows) + summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="python of the environment holding the other build")
    parser.add_argument("--quick", action="store_true", help="fewer calls per entry")
    parser.add_argument("--rounds", type=int, default=5, help="turns per case and build")
    parser.add_argument("--threads", type=int, default=2, help="kernel threads in both builds")
    parser.add_argument(
        "--variant", action="append", choices=VARIANTS, help="time only these (default: all)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.quick, args.threads)
    if not args.base:
        parser.error("--base is required")
    print(run(args.base, args.quick, args.rounds, args.threads, tuple(args.variant or VARIANTS)))


if __name__ == "__main__":
    main()
