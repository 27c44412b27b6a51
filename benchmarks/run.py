"""Run the benchmarks and write one Markdown report:
`python -m benchmarks.run [--quick] [--only SECTION]`."""

from __future__ import annotations

import argparse
import datetime
import importlib
from pathlib import Path

from benchmarks.common import machine

# Section name -> module with run(quick, threads) -> Markdown; imported only when it runs.
SECTIONS = {
    "dropout": "benchmarks.dropout",
    "fused_dropout": "benchmarks.fused_dropout",
    "gru": "benchmarks.gru",
    "paddle_models": "benchmarks.paddle_models",
    "paddle_training": "benchmarks.paddle_training",
    "mxnet_models": "benchmarks.mxnet_models",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions (minutes on 2 cores)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out",
        type=Path,
        help="default benchmarks/results/latest.md (latest-SECTION.md with --only)",
    )
    parser.add_argument("--only", choices=sorted(SECTIONS), help="run this section alone")
    args = parser.parse_args()
    if args.out is None:
        suffix = f"-{args.only}" if args.only else ""
        args.out = Path(f"benchmarks/results/latest{suffix}.md")
    names = [args.only] if args.only else list(SECTIONS)
    sections = [
        importlib.import_module(SECTIONS[name]).run(quick=args.quick, threads=args.threads)
        for name in names
    ]
    report = f"Machine: {machine()}\nDate: {datetime.date.today()}\n\n" + "\n\n".join(sections)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
