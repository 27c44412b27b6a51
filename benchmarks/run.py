"""Run the benchmarks and write one Markdown report:
`python -m benchmarks.run [--quick] [--only SECTION]`.

Each section's tables are appended to the report (and printed) as soon as the section is done,
so a long run that is stopped keeps what it finished. A section that fails becomes its error
in the report, the others still run, and the exit status is 1."""

from __future__ import annotations

import argparse
import datetime
import importlib
import sys
import traceback
from pathlib import Path

from benchmarks.common import machine
from fusebridge.bench.progress import Progress

# Section name -> module with run(quick, threads) -> Markdown; imported only when it runs.
SECTIONS = {
    "dropout": "benchmarks.dropout",
    "fused_dropout": "benchmarks.fused_dropout",
    "gemm": "benchmarks.gemm",
    "gru": "benchmarks.gru",
    "quantized_gru": "benchmarks.quantized_gru",
    "dot_throughput": "benchmarks.dot_throughput",
    "paddle_models": "benchmarks.paddle_models",
    "paddle_families": "benchmarks.paddle_families",
    "lac_tagger": "benchmarks.lac_tagger",
    "lac_breakdown": "benchmarks.lac_breakdown",
    "paddle_training": "benchmarks.paddle_training",
    "paddle_dygraph": "benchmarks.paddle_dygraph",
    "mxnet_models": "benchmarks.mxnet_models",
    "mxnet_families": "benchmarks.mxnet_families",
    "load_scaling": "benchmarks.load_scaling",
    "onnx_models": "benchmarks.onnx_models",
}


def run_sections(names: list[str], out: Path, quick: bool, threads: int) -> list[str]:
    """Runs the sections in turn, appending each one's text to `out` when it is done; returns
    the names of the sections that failed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"Machine: {machine()}\nDate: {datetime.date.today()}\n")
    failed = []
    with Progress(len(names), "benchmarks") as progress:
        for name in names:
            progress.step(name)
            try:
                text = importlib.import_module(SECTIONS[name]).run(quick=quick, threads=threads)
            except Exception:  # one broken section must not cost the others' results
                failed.append(name)
                text = f"### {name}: failed\n\n```\n{traceback.format_exc().strip()}\n```"
            with out.open("a") as f:
                f.write(f"\n{text}\n")
            progress.write(text)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer repetitions (minutes on 2 cores)"
    )
    parser.add_argument("--threads", type=int, default=2, help="threads for every runtime")
    parser.add_argument(
        "--out",
        type=Path,
        help="default benchmarks/results/latest.md (latest-SECTION.md with --only)",
    )
    parser.add_argument("--only", choices=sorted(SECTIONS), help="run this section alone")
    args = parser.parse_args(argv)
    if args.out is None:
        suffix = f"-{args.only}" if args.only else ""
        args.out = Path(f"benchmarks/results/latest{suffix}.md")
    names = [args.only] if args.only else list(SECTIONS)
    failed = run_sections(names, args.out, args.quick, args.threads)
    print(f"wrote {args.out}", file=sys.stderr)
    if failed:
        print(f"benchmarks: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
