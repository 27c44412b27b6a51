"""Two builds of fusebridge side by side on one job: the Paddle 3 tagger
(benchmarks/paddle3_tagger.py) saved back with fb.save_paddle and run in Paddle Inference (the
paddle_inference_fusebridge_ops peer of benchmarks/paddle_models.py), timed on this checkout's
build and on another one in the same run, to show what a change costs.

    python -m benchmarks.paddle_saved_back_builds --base /path/to/other/venv/bin/python \\
        [--rounds 5] [--quick] [--threads 2]

The tagger is saved once, by this interpreter. Each build then runs in a child process of its
own interpreter (importing its own fusebridge, with this checkout's benchmarks package on its
path, as benchmarks/gru_builds.py does): it optimizes the tagger, writes it back with its own
fb.save_paddle, registers its own op library and runs the result in a Paddle Inference
predictor (ir_optim on, no oneDNN). The two take turns: for every batch (1, 16, 64 sentences
of 5..60 words, the same seeded batches in both), round after round, base then this. Each
round is a warm call and then REPEAT timed calls; "best" is the best call of all rounds and
"median" the median over rounds of each round's median. The ratio is this / base (below 1:
faster). Both builds' outputs for every batch are compared with each other.

Each child builds its op library into fusebridge's default cache, whose folder name hashes the
build's kernels library: $FUSEBRIDGE_PADDLE_CACHE is not passed on, since one folder for both
builds would hand one build's library to the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import paddle3_tagger
from benchmarks.common import BuildChild, machine, markdown_table

MODULE = "benchmarks.paddle_saved_back_builds"

BATCHES = (1, 16, 64)
SEED = 0  # paddle_comparison.compare_with_paddle's default: the batches benchmarks report
# Outputs of the two builds count as equal within these (paddle_comparison._same's, float32
# sums in another order).
RTOL, ATOL = 1e-4, 1e-5


def worker(model: str, workdir: str, threads: int, repeat: int) -> None:
    """One build: reads {"batch": n} lines from stdin, answers each with one JSON line
    {"ms": best, "median_ms": median} of `repeat` calls after a warm one."""
    # The JSON lines keep the real stdout to themselves: whatever else writes to file
    # descriptor 1 (Paddle's C++ side, a compiler) goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    # Imported here, not at the top: the parent never imports fusebridge, and a child must
    # import the one installed for its own interpreter.
    import fusebridge
    from fusebridge import kernels
    from fusebridge.bench.paddle_comparison import _batch, _feeds, best_and_median_ms, save_feeds
    from fusebridge.bench.paddle_peer import _saved_back

    folder = Path(workdir)
    print(
        f"paddle_saved_back_builds {folder.name}: {sys.executable} imports fusebridge from "
        f"{fusebridge.__file__}",
        file=sys.stderr,
        flush=True,
    )
    # fb.optimize(fb.load(model)), fb.save_paddle into `folder`, op_library.register() and a
    # Paddle Inference predictor on `threads` math-library threads: the SAVED_BACK peer.
    runner = _saved_back(model, folder, threads)
    # After register(): Paddle's import sets OMP_NUM_THREADS=1 where it is unset, and each copy
    # of the kernels (fusebridge's, the op library's) starts with that variable;
    # set_num_threads sets both to the same count whatever the environment held.
    kernels.set_num_threads(threads)
    feeds, words = {}, {}
    for n in BATCHES:
        ids, lengths = _batch(paddle3_tagger.VOCAB, n, SEED)
        # "ids" and "lens": the names of the tagger's InputSpecs.
        feeds[n] = _feeds("ids", "lens", ids, lengths)
        words[n] = sum(lengths)
        # The parent checks that both builds were fed the same batches and gave equal outputs.
        save_feeds(folder / f"feed-{n}.npz", feeds[n])
        np.savez(folder / f"out-{n}.npz", **runner.run(feeds[n]))
    ready = {"fusebridge": fusebridge.__file__, "threads": kernels.get_num_threads()}
    print(json.dumps(ready | {"words": words}), file=answers)
    for line in sys.stdin:
        n = json.loads(line)["batch"]
        best, median = best_and_median_ms(lambda: runner.run(feeds[n]), repeat)  # noqa: B023
        print(json.dumps({"ms": best, "median_ms": median}), file=answers)


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def compare_outputs(base: Path, this: Path) -> tuple[float, bool]:
    """(max abs difference, whether equal within RTOL / ATOL) of two builds' outputs in the
    .npz files `base` and `this`; inf and False when their names or shapes differ."""
    a, b = _arrays(base), _arrays(this)
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        return float("inf"), False
    diff = max(float(np.abs(a[k].astype(np.float64) - b[k]).max(initial=0.0)) for k in a)
    return diff, all(np.allclose(b[k], a[k], rtol=RTOL, atol=ATOL) for k in a)


def same_feeds(base: Path, this: Path) -> bool:
    a, b = _arrays(base), _arrays(this)
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def run(base: str, quick: bool, rounds: int, threads: int) -> str:
    repeat = 10 if quick else 40  # calls per round, as benchmarks/paddle_models.py
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "benchmarks").symlink_to(Path(__file__).resolve().parent)
        (path / "tagger").mkdir()
        model = paddle3_tagger.save(path / "tagger")
        # One after the other: two first runs of the same build would build its op library
        # into the same cache folder at once.
        # Paddle Inference's math library takes its count from the predictor's config; OpenMP
        # libraries loaded beside it start with this one (paddle_comparison's peers do the same).
        env = {"OMP_NUM_THREADS": str(threads)}
        args = [str(model), str(threads), str(repeat)]
        children = {"base": BuildChild("base", base, path, MODULE, args, env)}
        children["this"] = BuildChild("this", sys.executable, path, MODULE, args, env)
        rows = []
        try:
            for n in BATCHES:
                files = {name: c.folder for name, c in children.items()}
                if not same_feeds(files["base"] / f"feed-{n}.npz", files["this"] / f"feed-{n}.npz"):
                    raise RuntimeError(f"the two builds made different batches of {n} sentences")
                diff, same = compare_outputs(
                    files["base"] / f"out-{n}.npz", files["this"] / f"out-{n}.npz"
                )
                times: dict[str, list[tuple[float, float]]] = {name: [] for name in children}
                for _ in range(rounds):
                    for name, child in children.items():  # base, then this
                        answer = child.ask({"batch": n})
                        times[name].append((answer["ms"], answer["median_ms"]))
                best = {name: min(t[0] for t in ts) for name, ts in times.items()}
                median = {name: statistics.median(t[1] for t in ts) for name, ts in times.items()}
                rows.append(
                    [
                        str(n),
                        str(children["this"].ready["words"][str(n)]),
                        f"{best['base']:.3f}",
                        f"{median['base']:.3f}",
                        f"{best['this']:.3f}",
                        f"{median['this']:.3f}",
                        f"{best['this'] / best['base']:.3f}",
                        f"{median['this'] / median['base']:.3f}",
                        f"{diff:.2e}",
                        "yes" if same else "no",
                    ]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        finally:
            for child in children.values():
                child.close()
    header = [
        "sentences",
        "words",
        "base best ms",
        "base median ms",
        "this best ms",
        "this median ms",
        "this / base (best)",
        "this / base (median)",
        "max abs diff",
        f"same output (rtol {RTOL:g}, atol {ATOL:g})",
    ]
    builds = "\n".join(
        f"{name}: {c.python} (fusebridge {c.ready['fusebridge']}, {c.ready['threads']} threads)"
        for name, c in children.items()
    )
    summary = (
        f"\n{machine()}; {threads} kernel and Paddle threads in each build, {rounds} rounds of "
        f"{repeat} calls; Paddle Inference (ir_optim) on the tagger saved back by each build\n"
        f"{builds}\n"
    )
    return markdown_table(header, rows) + summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="python of the environment holding the other build")
    parser.add_argument("--quick", action="store_true", help="fewer calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="turns per batch and build")
    parser.add_argument("--threads", type=int, default=2, help="threads in both builds")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        workdir, model, threads, repeat = args.worker
        return worker(model, workdir, int(threads), int(repeat))
    if not args.base:
        parser.error("--base is required")
    print(run(args.base, args.quick, args.rounds, args.threads))


if __name__ == "__main__":
    main()
