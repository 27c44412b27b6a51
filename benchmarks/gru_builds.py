"""Two builds of fusebridge side by side: the fusebridge columns of benchmarks/gru.py (the same
cases, weights and timing rule) on this checkout's build and on another one, e.g. the last
release or the commit before a kernel change, to show what a change costs.

    python -m benchmarks.gru_builds --base /path/to/other/venv/bin/python [--quick] [--rounds 5]
    python -m benchmarks.gru_builds --base ... --models   # the bundled tagger and sentiment

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
# The bundled Paddle models end to end (load, optimize, Session.run), with --models.
MODEL_VARIANT = "session"
MODEL_BATCHES = (1, 16, 64)


def model_cases(quick: bool) -> tuple[list[str], list[dict]]:
    """Keys and runners of the bundled models' Session runs: batches of 5..60 words a sentence
    (ids below 100, in every model's vocabulary), the same seed in both builds."""
    import numpy as np

    import fusebridge as fb
    from fusebridge.models import assets

    keys, runners = [], []
    for name in assets.NAMES:
        session = fb.Session(fb.optimize(fb.load(assets.path(name)))[0])
        for n in MODEL_BATCHES:
            rng = np.random.default_rng(n)
            lengths = rng.integers(5, 61, n).tolist()
            ids = rng.integers(0, 100, (sum(lengths), 1)).astype(np.int64)
            feeds = {session.input_names[0]: fb.LoDTensor(ids, lengths=lengths)}
            keys.append(f"{name}, {n} sentences")
            runners.append({MODEL_VARIANT: lambda s=session, f=feeds: s.run(f)})
    repeat, budget = (20, 1.0) if quick else (60, 3.0)
    return keys, [(r, repeat, budget) for r in runners]


def worker(quick: bool, threads: int, models: bool) -> None:
    """Answers one JSON line per request read from stdin: {"case": i, "variant": v}."""
    from benchmarks import gru  # imported here: fusebridge is this interpreter's

    gru.set_num_threads(threads)
    if models:
        keys, entries = model_cases(quick)
    else:
        cases = gru.make_cases(quick)
        keys = [c.key for c in cases]
        entries = [
            (gru.fusebridge_runners(c.arrays, c.direction), c.repeat, c.budget_s) for c in cases
        ]
    print(json.dumps({"cases": keys}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        runners, repeat, budget = entries[req["case"]]
        ms = 1e3 * gru.best_within(runners[req["variant"]], repeat, budget)
        print(json.dumps({"ms": ms}), flush=True)


class Child:
    def __init__(self, python: str, quick: bool, threads: int, path: Path, models: bool):
        # The child sees only this checkout's benchmarks package (a link in `path`), never the
        # source tree of fusebridge, so it imports the build installed for `python`.
        env = {**os.environ, "PYTHONPATH": str(path)}
        args = [python, "-m", "benchmarks.gru_builds", "--worker", "--threads", str(threads)]
        self.proc = subprocess.Popen(
            [*args, *(["--quick"] if quick else []), *(["--models"] if models else [])],
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


def run(
    base: str, quick: bool, rounds: int, threads: int, variants: tuple[str, ...], models: bool
) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "benchmarks").symlink_to(Path(__file__).resolve().parent)
        children = {"base": Child(base, quick, threads, path, models)}
        children["this"] = Child(sys.executable, quick, threads, path, models)
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
    parser.add_argument(
        "--models", action="store_true", help="the bundled Paddle models' Session runs instead"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.quick, args.threads, args.models)
    if not args.base:
        parser.error("--base is required")
    variants = (MODEL_VARIANT,) if args.models else tuple(args.variant or VARIANTS)
    print(run(args.base, args.quick, args.rounds, args.threads, variants, args.models))


if __name__ == "__main__":
    main()
