"""The `fusebridge` command."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx_ir as ir

import fusebridge
from fusebridge import kernels
from fusebridge.errors import ArgumentError, Error


def info() -> dict[str, object]:
    return {
        "version": fusebridge.__version__,
        "engines": {"cpu": "available", "cuda": "not built in this version"},
        "isa": {"selected": kernels.isa(), "available": list(kernels.available_isas())},
        "blas": kernels.blas_info(),
        "openmp_threads": kernels.get_num_threads(),
        "primitive_cache": kernels.cache_stats(),
    }


def dropout_demo(seed: int, p: float) -> int:
    path = files("fusebridge") / "data" / "demo_tensor.npy"
    with path.open("rb") as f:
        x = np.load(f, allow_pickle=False)
    print(f"input: bundled tensor {x.shape} {x.dtype} ({path.name})")
    print(f"dropout p={p} seed={seed} offset=0 mode=upscale_in_train on {kernels.isa()}")
    y, mask = kernels.dropout(x, p, seed=seed, return_mask=True)
    keep = np.unpackbits(mask, bitorder="little", count=x.size).reshape(x.shape).astype(bool)
    with np.printoptions(precision=3, suppress=True, linewidth=120):
        print("y =\n", y)
    print(f"kept {keep.sum()} of {x.size} ({keep.mean():.1%}), scale 1/(1-p) = {1 / (1 - p):.4f}")
    print(f"packed mask: {mask.size} bytes: {mask.tobytes().hex()}")
    shared = kernels.dropout(x, p, seed=seed, axes=(0,))
    print(
        f"axes=(0,): mask shared down each column: {int((shared != 0).any(0).sum())} of "
        f"{x.shape[1]} columns kept"
    )
    dy = np.ones_like(x)
    from_mask = kernels.dropout_backward(dy, p, mask=mask)
    recomputed = kernels.dropout_backward(dy, p, seed=seed)
    same = np.array_equal(from_mask, recomputed)
    print(f"backward from the mask == backward recomputed from the seed: {same}")
    halves = [
        kernels.dropout(x[:, :6], p, seed=seed, shard=(x.shape, (0, 0))),
        kernels.dropout(x[:, 6:], p, seed=seed, shard=(x.shape, (0, 6))),
    ]
    split_same = np.array_equal(np.concatenate(halves, axis=1), y)
    print(f"the tensor run as two shards == the whole: {split_same}")
    return 0 if same and split_same else 1


def _read_lengths(path: str) -> list[int]:
    text = Path(path).read_text()
    try:
        return [int(t) for t in text.split()]
    except ValueError:
        raise ArgumentError(f"--lod {path}: expected whitespace-separated integers") from None


def _feeds(inputs: list[str], lods: list[str]) -> dict[str, object]:
    def pairs(items: list[str], flag: str) -> dict[str, str]:
        out = {}
        for item in items:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                raise ArgumentError(f"{flag} {item!r}: expected NAME=FILE")
            out[name] = path
        return out

    arrays = {n: np.load(p, allow_pickle=False) for n, p in pairs(inputs, "--input").items()}
    lengths = pairs(lods, "--lod")
    unknown = sorted(set(lengths) - set(arrays))
    if unknown:
        raise ArgumentError(f"--lod {unknown}: no --input of that name")
    return {
        n: fusebridge.LoDTensor(a, lengths=_read_lengths(lengths[n])) if n in lengths else a
        for n, a in arrays.items()
    }


def _op_counts(model) -> str:
    counts = Counter(n.op_type for n in model.graph)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def _training(model: ir.Model) -> tuple[ir.Model, str]:
    """A training graph: explicit RNG streams, the dropout fusions, then masks recomputed in
    the backward (what each step did, as text)."""
    from fusebridge.fuse_passes import PIPELINES, explicit_rng, recompute_dropout_mask

    model = ir.from_proto(ir.to_proto(model))  # every step rewrites in place
    streams = explicit_rng(model)
    report = PIPELINES["training"].apply(model)
    masks = recompute_dropout_mask(model)
    return model, "\n".join([streams.text(), report.text(), masks.text()])


def optimize_command(
    model_path: str, out: str, pipeline: str, explain: bool, portable: bool
) -> int:
    model = fusebridge.load(model_path)
    if portable:
        from fusebridge.integrations.onnx.portable import portable as to_portable

        if pipeline != "inference":
            raise ArgumentError("optimize: --portable runs the inference pipeline")
        optimized, report = to_portable(model)
    elif pipeline == "training":
        optimized, report = _training(model)
    else:
        optimized, report = fusebridge.optimize(model, pipeline)
    print(f"before: {_op_counts(model)}")
    print(f"after:  {_op_counts(optimized)}")
    if explain:
        print(report if isinstance(report, str) else report.text())
    fusebridge.save_onnx(optimized, out)
    print(f"wrote {out}" + (" (standard ONNX ops only)" if portable else ""))
    return 0


def run_command(
    model_path: str, inputs: list[str], lods: list[str], out_dir: str | None, backend: str
) -> int:
    session = fusebridge.Session(fusebridge.load(model_path), backend=backend)
    outputs = session.run(_feeds(inputs, lods))
    for name, value in outputs.items():
        data = value.data if isinstance(value, fusebridge.LoDTensor) else value
        lod = (
            f" lengths={value.lengths.tolist()}" if isinstance(value, fusebridge.LoDTensor) else ""
        )
        with np.printoptions(threshold=20, edgeitems=5, precision=4, suppress=True):
            print(f"{name}: {data.dtype}{list(data.shape)}{lod}\n{data.reshape(-1)}")
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            np.save(Path(out_dir) / f"{name}.npy", data)
            if lod:
                (Path(out_dir) / f"{name}.lengths.txt").write_text(
                    " ".join(map(str, value.lengths))
                )
    return 0


def demo() -> int:
    from fusebridge.models import assets

    tagger = assets.path("tagger")
    print(
        f"model: the bundled Paddle lexical-analysis tagger ({tagger.name}/: "
        "inference.pdmodel + .pdiparams)"
    )
    start = time.perf_counter()
    model = fusebridge.load(tagger)
    ms = 1e3 * (time.perf_counter() - start)
    print(f"loaded without paddle in {ms:.0f} ms: {_op_counts(model)}")
    optimized, report = fusebridge.optimize(model)
    print(report.text())
    print(f"optimized: {_op_counts(optimized)}")
    words = np.load(tagger / "example_words.npy", allow_pickle=False)
    lengths = _read_lengths(str(tagger / "example_lengths.txt"))
    feeds = {"words": fusebridge.LoDTensor(words, lengths=lengths)}
    print(
        f"input: {len(lengths)} sentences of {min(lengths)}..{max(lengths)} words "
        f"({words.shape[0]} in all)"
    )
    times = {}
    results = {}
    for label, m in (("unfused", model), ("optimized", optimized)):
        session = fusebridge.Session(m)
        results[label] = session.run(feeds)
        start = time.perf_counter()
        for _ in range(5):
            session.run(feeds)
        times[label] = (time.perf_counter() - start) / 5
    (name,) = results["optimized"]
    tags = results["optimized"][name]
    same = np.array_equal(tags.data, results["unfused"][name].data)
    print(f"tags of sentence 0: {tags.data[: tags.offsets[1], 0].tolist()}")
    print(f"optimized tags == unfused tags: {same}")
    print(
        f"time per batch: unfused {1e3 * times['unfused']:.2f} ms, optimized "
        f"{1e3 * times['optimized']:.2f} ms ({times['unfused'] / times['optimized']:.1f}x) on "
        f"{kernels.get_num_threads()} thread(s), {kernels.isa()}"
    )
    return 0 if same else 1


def bench_command(model_dir: str, sentences: list[int], repeat: int) -> int:
    from fusebridge.integrations.paddle.compare import compare_with_paddle, failed, table

    rows = compare_with_paddle(model_dir, sentences, repeat=repeat)
    print(table(rows))
    bad = [r for r in rows if failed(r)]
    if bad:
        print(
            f"fusebridge: error: {len(bad)} of {len(rows)} rows failed (see the notes below the "
            "table)",
            file=sys.stderr,
        )
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fusebridge", description=fusebridge.__doc__)
    parser.add_argument("--version", action="version", version=fusebridge.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, engines, ISA, BLAS, threads, primitive cache")
    sub.add_parser("demo", help="load, optimize and run the bundled Paddle tagger")
    d = sub.add_parser("dropout-demo", help="the dropout primitive on a bundled tensor")
    d.add_argument("--seed", type=int, default=2024)
    d.add_argument("--p", type=float, default=0.3)
    o = sub.add_parser("optimize", help="load a model, run a fuse pipeline, write ONNX")
    o.add_argument("model", help="Paddle model directory / .pdmodel, or .onnx")
    o.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    o.add_argument("--pipeline", default="inference")
    o.add_argument("--explain", action="store_true", help="what each rule fired, and why not")
    o.add_argument(
        "--portable",
        action="store_true",
        help="standard ONNX ops only (plain ONNX Runtime runs the file)",
    )
    r = sub.add_parser("run", help="run a model on inputs from .npy files")
    r.add_argument("model")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    r.add_argument(
        "--lod",
        action="append",
        default=[],
        metavar="NAME=LENGTHS.txt",
        help="sentence lengths (whitespace-separated) of LoD input NAME",
    )
    r.add_argument("-o", "--output-dir", help="write each output as NAME.npy here")
    r.add_argument("--backend", default="kernels", choices=["kernels", "reference"])
    b = sub.add_parser("bench", help="fusebridge vs Paddle's own runtimes on a Paddle model")
    b.add_argument("model")
    b.add_argument("--sentences", default="1,16,64", help="batch sizes, comma-separated")
    b.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            print(json.dumps(info(), indent=2))
            return 0
        if args.command == "demo":
            return demo()
        if args.command == "dropout-demo":
            return dropout_demo(args.seed, args.p)
        if args.command == "optimize":
            return optimize_command(
                args.model, args.output, args.pipeline, args.explain, args.portable
            )
        if args.command == "run":
            return run_command(args.model, args.input, args.lod, args.output_dir, args.backend)
        sentences = [int(n) for n in args.sentences.split(",")]
        return bench_command(args.model, sentences, args.repeat)
    except (Error, OSError, ValueError) as exc:
        print(f"fusebridge: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
