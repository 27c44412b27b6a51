"""Run the benchmarks and write one Markdown report: `python -m benchmarks.run [--quick]`."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from benchmarks import dropout
from benchmarks.common import machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions (minutes on 2 cores)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/latest.md"))
    args = parser.parse_args()
    sections = [dropout.run(quick=args.quick, threads=args.threads)]
    report = f"Machine: {machine()}\nDate: {datetime.date.today()}\n\n" + "\n\n".join(sections)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main()
