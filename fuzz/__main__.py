"""The long fuzz run, by hand: `python -m fuzz [--size long] [--out fuzz/results/latest.md]`.

Prints a table of outcomes per input class (the figures docs/reliability.md quotes) and every
case that failed, and writes both to --out. Exits 1 when a case failed."""

from __future__ import annotations

import argparse
import collections
import platform
import sys
import tempfile
import time
from pathlib import Path

from fuzz import cases
from fuzz.harness import OUTCOMES, TIMEOUT_S, Outcome, run_case


def table(outcomes: list[Outcome]) -> str:
    counts = collections.Counter((o.input_class, o.kind) for o in outcomes)
    failed = collections.Counter(o.input_class for o in outcomes if o.failed)
    classes = list(dict.fromkeys(o.input_class for o in outcomes))
    lines = [
        "| input class | cases | " + " | ".join(OUTCOMES) + " | failed |",
        "|---|---:|" + "---:|" * len(OUTCOMES) + "---:|",
    ]
    for c in [*classes, "all"]:
        row = [o for o in outcomes if c in ("all", o.input_class)]
        cells = [
            str(sum(counts[(k, kind)] for k in ([c] if c != "all" else classes)))
            for kind in OUTCOMES
        ]
        bad = failed[c] if c != "all" else sum(failed.values())
        lines.append(f"| {c} | {len(row)} | " + " | ".join(cells) + f" | {bad} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--size", choices=("quick", "long"), default="long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "latest.md"))
    args = parser.parse_args(argv)
    import fusebridge.integrations.mxnet.load
    import fusebridge.integrations.onnx.load
    import fusebridge.integrations.paddle.load  # noqa: F401

    chosen = cases.generate(args.size, args.seed)
    start = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="fusebridge-fuzz-") as root:
        for k, case in enumerate(chosen):
            outcomes.append(run_case(case, Path(root), TIMEOUT_S))
            print(f"\r{k + 1}/{len(chosen)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    seconds = time.perf_counter() - start
    slowest = max(outcomes, key=lambda o: o.seconds)
    report = [
        f"# fuzz: {args.size} run, seed {args.seed}",
        "",
        f"{len(outcomes)} cases in {seconds:.0f} s on {platform.machine()} "
        f"(Python {platform.python_version()}); each in a child with a "
        f"{TIMEOUT_S:.0f} s timeout and a 4 GiB address-space limit; slowest case "
        f"{slowest.seconds:.2f} s ({slowest.name}).",
        "",
        table(outcomes),
        "",
        "## Failed cases",
        "",
        *(
            f"- [{o.input_class}] {o.name}: {o.kind}: {o.detail[:300]}"
            for o in outcomes
            if o.failed
        ),
    ]
    text = "\n".join(report) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
