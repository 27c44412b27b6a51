"""The `fusebridge` command."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx_ir as ir

import fusebridge
from fusebridge import cuda, kernels
from fusebridge.cli import output_files
from fusebridge.errors import ArgumentError, Error
from fusebridge.fuse_passes import PIPELINES, PRECISIONS
from fusebridge.integrations.onnx.load import LOAD_REPORT

DEMO_RUNS = 20  # timed runs of each demo variant


def info() -> dict[str, object]:
    return {
        "version": fusebridge.__version__,
        "engines": {"cpu": "available", "cuda": cuda.status()},
        "isa": {"selected": kernels.isa(), "available": list(kernels.available_isas())},
        "blas": kernels.blas_info(),
        "threads": kernels.get_num_threads(),
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


def _op_counts(nodes: Iterable[ir.Node]) -> str:
    counts = Counter(n.op_type for n in nodes)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def optimize_command(
    model_path: str,
    out: str,
    pipeline: str | None,
    explain: bool,
    portable: bool,
    precision: str = "float32",
) -> int:
    if portable:  # the older spelling of --pipeline portable
        if pipeline not in (None, "portable"):
            raise ArgumentError(
                f"optimize: --portable is --pipeline portable, but --pipeline {pipeline} was given"
            )
        pipeline = "portable"
    pipeline = pipeline or "inference"
    model = fusebridge.load(model_path)
    optimized, report = fusebridge.optimize(model, pipeline, precision)
    print(f"before: {_op_counts(model.graph)}")
    print(f"after:  {_op_counts(optimized.graph)}")
    if explain:
        loaded = model.meta.get(LOAD_REPORT)
        if loaded is not None:  # an ONNX file: what its import did
            print(loaded.text())
        print(report.text())
    fusebridge.save_onnx(optimized, out)
    standard = pipeline in ("portable", "lowering")
    print(f"wrote {out}" + (" (standard ONNX ops only)" if standard else ""))
    return 0


def _random_state(model: ir.Model, seed: int | None) -> fusebridge.random.Key | None:
    """The key for Session.run from --seed. A model with training dropout draws from graph
    inputs that explicit_rng adds (`optimize --pipeline training` did, or it is done here), and
    --seed is what the Python API's `rng=fusebridge.random.key(seed)` is on the command line."""
    from fusebridge.fuse_passes import explicit_rng

    names = {v.name for v in model.graph.inputs}
    draws = {fusebridge.random.SEED_INPUT, fusebridge.random.OFFSET_INPUT} <= names
    draws = draws or explicit_rng(model).count > 0
    if draws and seed is None:
        raise ArgumentError("run: the model has training dropout, which needs --seed N")
    if seed is not None and not draws:
        raise ArgumentError("run: --seed given, but the model draws no random numbers")
    return None if seed is None else fusebridge.random.key(seed)


def run_command(
    model_path: str,
    inputs: list[str],
    lods: list[str],
    out_dir: str | None,
    backend: str,
    seed: int | None = None,
    explain: bool = False,
) -> int:
    from fusebridge.runtime.placement import explain_text

    model = fusebridge.load(model_path)
    rng = _random_state(model, seed)
    session = fusebridge.Session(model, backend=backend)
    # The file names before the run: a name that cannot be written fails before any work.
    stems = output_files.stems(session.output_names, _OUTPUT_SUFFIXES, "run") if out_dir else {}
    feeds = _feeds(inputs, lods)
    if explain:
        print(explain_text(session.explain(feeds, rng=rng)))
    outputs = session.run(feeds, rng=rng)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    for name, value in outputs.items():
        data = value.data if isinstance(value, fusebridge.LoDTensor) else value
        lod = (
            f" lengths={value.lengths.tolist()}" if isinstance(value, fusebridge.LoDTensor) else ""
        )
        shown = name if name.isprintable() else repr(name)  # no control characters to the tty
        with np.printoptions(threshold=20, edgeitems=5, precision=4, suppress=True):
            print(f"{shown}: {data.dtype}{list(data.shape)}{lod}\n{data.reshape(-1)}")
        if out_dir:
            path = _write_output(Path(out_dir), stems[name], data, value)
            if stems[name] != name:
                print(f"(written as {path})")
    return 0


_OUTPUT_SUFFIXES = (".npy", ".lengths.txt")


def _write_output(out_dir: Path, stem: str, data: np.ndarray, value: object) -> Path:
    """<stem>.npy, and <stem>.lengths.txt for a LoD output (output_files.py: how names are
    encoded and files written); the .npy's path."""
    path = output_files.write_new(
        out_dir, stem + ".npy", lambda f: np.save(f, data, allow_pickle=False)
    )
    if isinstance(value, fusebridge.LoDTensor):
        text = " ".join(map(str, value.lengths)).encode()
        output_files.write_new(out_dir, stem + ".lengths.txt", lambda f: f.write(text))
    return path


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
    print(f"loaded without paddle in {ms:.0f} ms: {_op_counts(model.graph)}")
    optimized, report = fusebridge.optimize(model)
    print(report.text())
    print(f"optimized: {_op_counts(optimized.graph)}")
    words = np.load(tagger / "example_words.npy", allow_pickle=False)
    lengths = _read_lengths(str(tagger / "example_lengths.txt"))
    feeds = {"words": fusebridge.LoDTensor(words, lengths=lengths)}
    print(
        f"input: {len(lengths)} sentences of {min(lengths)}..{max(lengths)} words "
        f"({words.shape[0]} in all)"
    )
    variants = {"unfused": model, "optimized": optimized}
    sessions = {label: fusebridge.Session(m) for label, m in variants.items()}
    results, ort_calls = {}, {}
    for label, session in sessions.items():  # also the warm-up: primitives built, caches filled
        profile: dict[str, float] = {}
        results[label] = session.run(feeds, profile=profile)
        ort_calls[label] = sum(step.startswith("ONNX partition") for step in profile)
    (name,) = results["optimized"]
    tags = results["optimized"][name]
    same = np.array_equal(tags.data, results["unfused"][name].data)
    print(f"tags of sentence 0: {tags.data[: tags.offsets[1], 0].tolist()}")
    print(f"optimized tags == unfused tags: {same}")
    # One run alone varies many times over on a shared machine: the variants take turns for
    # DEMO_RUNS rounds, and the median and the range show the typical time and the noise.
    times: dict[str, list[float]] = {label: [] for label in sessions}
    for _ in range(DEMO_RUNS):
        for label, session in sessions.items():
            start = time.perf_counter()
            session.run(feeds)
            times[label].append(1e3 * (time.perf_counter() - start))
    print(
        f"time per batch over {DEMO_RUNS} runs each after a warm-up run, the variants taking "
        f"turns, on {kernels.get_num_threads()} thread(s), {kernels.isa()}:"
    )
    for label, m in variants.items():
        q1, median, q3 = np.percentile(times[label], [25, 50, 75])
        # Identity is an alias in Session, not an ONNX Runtime op.
        ort = _op_counts(n for n in m.graph if n.domain == "" and n.op_type != "Identity")
        ours = _op_counts(n for n in m.graph if n.domain == "fusebridge")
        print(
            f"  {label + ':':<10} median {median:.2f} ms (IQR {q1:.2f}-{q3:.2f}, min-max "
            f"{min(times[label]):.2f}-{max(times[label]):.2f})\n"
            f"  {'':<10} ran on ONNX Runtime, {ort_calls[label]} call(s) ({ort}) + fusebridge "
            f"kernels ({ours})"
        )
    speedup = np.median(times["unfused"]) / np.median(times["optimized"])
    print(f"  optimized is {speedup:.1f}x faster (ratio of the medians)")
    return 0 if same else 1


def bench_command(model_dir: str, sentences: list[int], repeat: int) -> int:
    from fusebridge.bench.paddle_comparison import compare_with_paddle, failed, table

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusebridge", description=fusebridge.__doc__)
    parser.add_argument("--version", action="version", version=fusebridge.__version__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")

    command("info", "print the version, engines, detected ISA, BLAS, threads and primitive cache")
    command(
        "demo",
        "load the bundled Paddle tagger without Paddle, optimize it, check the optimized tags "
        "against the unfused model and time both",
    )
    d = command("dropout-demo", "the dropout primitive on a bundled tensor")
    d.add_argument("--seed", type=int, default=2024, help="Philox seed (default 2024)")
    d.add_argument("--p", type=float, default=0.3, help="drop probability in [0, 1] (default 0.3)")
    o = command("optimize", "load a model, run a fuse pipeline, write ONNX")
    o.add_argument("model", help="Paddle model directory / .pdmodel, MXNet -symbol.json, or .onnx")
    o.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    o.add_argument(
        "--pipeline",
        choices=sorted(PIPELINES),
        help="; ".join(f"{name}: {p.doc}" for name, p in PIPELINES.items()),
    )
    o.add_argument(
        "--explain",
        action="store_true",
        help="every pass in order: how often it fired (or whether it changed the model), what "
        "it did where, and why it refused where it came close",
    )
    o.add_argument("--portable", action="store_true", help="the same as --pipeline portable")
    o.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help="int8 or bf16: quantize every GRU's constant weights once, here; the file keeps "
        "them quantized and runs them on the quantized kernel (docs/gru.md). Default float32",
    )
    r = command("run", "run a model on inputs from .npy files")
    r.add_argument("model", help="a model fusebridge loads: Paddle directory, .onnx, MXNet json")
    r.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="the array for input NAME (repeat for each input)",
    )
    r.add_argument(
        "--lod",
        action="append",
        default=[],
        metavar="NAME=LENGTHS.txt",
        help="sentence lengths (whitespace-separated) of LoD input NAME",
    )
    r.add_argument(
        "--seed",
        type=int,
        help="random seed, required by a model with training dropout (what rng=fusebridge.random"
        ".key(SEED) is to Session.run)",
    )
    r.add_argument(
        "-o",
        "--output-dir",
        help="write each output as NAME.npy (a LoD output also NAME.lengths.txt) here; NAME is "
        "the output's name with every byte outside [A-Za-z0-9._-], a leading '.' and the first "
        "letter of a Windows device name (CON, NUL, ...) percent-encoded as %%XX of its UTF-8 "
        "(so '../x' is written as %%2E.%%2Fx.npy); names that would differ only in case are "
        "refused; an existing file of that name is replaced, never written through",
    )
    r.add_argument(
        "--explain",
        action="store_true",
        help="say where each fusebridge node runs for these inputs (our kernel or ONNX "
        "Runtime), with the cost estimates behind it",
    )
    r.add_argument(
        "--backend",
        default="kernels",
        choices=["kernels", "reference"],
        help="kernels: ONNX Runtime + compiled kernels (default); reference: NumPy oracles",
    )
    r = command(
        "batch",
        "run a model over a Parquet file or folder on Ray Data (local or --address), Parquet "
        "out, one sentence a row",
    )
    r.add_argument("model", help="a model fusebridge loads: Paddle directory, .onnx, MXNet json")
    r.add_argument("--input", required=True, help="a Parquet file or a folder of them")
    r.add_argument("--output", required=True, help="a new or empty folder for the Parquet out")
    r.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=COLUMN|COLUMN",
        help="model input NAME reads COLUMN (default: the column named as the input); a bare "
        "COLUMN feeds the model's only list input",
    )
    r.add_argument(
        "--address",
        help="an existing Ray cluster (ray://HOST:PORT or HOST:PORT); default: a "
        "local Ray started for the call",
    )
    r.add_argument("--actors", type=int, default=1, help="actors, one Session each (default 1)")
    r.add_argument("--threads", type=int, default=1, help="kernel threads an actor (default 1)")
    r.add_argument("--batch-size", type=int, default=256, help="rows a block (default 256)")
    r = command(
        "serve",
        "serve a model over the Open Inference Protocol (KServe v2 REST) on Ray Serve, requests "
        "batched dynamically, until Ctrl-C",
    )
    r.add_argument("model", help="a model fusebridge loads: Paddle directory, .onnx, MXNet json")
    r.add_argument("--name", help="the model's name in URLs (default: the file's stem)")
    r.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    r.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    r.add_argument(
        "--address",
        help="an existing Ray cluster (HOST:PORT); default: a local Ray started for the call",
    )
    r.add_argument(
        "--max-batch-size", type=int, default=16, help="requests a batch holds (default 16)"
    )
    r.add_argument(
        "--batch-wait-ms",
        type=float,
        default=5.0,
        help="how long a batch's first request waits for more (default 5)",
    )
    r.add_argument("--replicas", type=int, default=1, help="replicas, one Session each")
    r.add_argument("--threads", type=int, default=1, help="kernel threads a replica (default 1)")
    r.add_argument(
        "--max-queued",
        type=int,
        default=1024,
        help="requests waiting past which the server answers 503 (default 1024)",
    )
    r.add_argument(
        "--request-timeout-s",
        type=float,
        default=60.0,
        help="Serve's proxy answers 408 to a request unanswered this long (default 60)",
    )
    b = command("bench", "fusebridge vs Paddle's own runtimes on a Paddle model (needs Paddle)")
    b.add_argument("model", help="Paddle model directory")
    b.add_argument("--sentences", default="1,16,64", help="batch sizes, comma-separated")
    b.add_argument("--repeat", type=int, default=20, help="timed runs per batch (default 20)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
                args.model, args.output, args.pipeline, args.explain, args.portable,
                args.precision,
            )  # fmt: skip
        if args.command == "run":
            return run_command(
                args.model,
                args.input,
                args.lod,
                args.output_dir,
                args.backend,
                args.seed,
                args.explain,
            )
        if args.command == "batch":
            from fusebridge.cli.batch_command import batch_command

            return batch_command(
                args.model,
                args.input,
                args.output,
                args.column,
                args.address,
                args.actors,
                args.threads,
                args.batch_size,
            )
        if args.command == "serve":
            from fusebridge.cli.serve_command import serve_command

            return serve_command(
                args.model,
                name=args.name,
                host=args.host,
                port=args.port,
                address=args.address,
                max_batch_size=args.max_batch_size,
                batch_wait_ms=args.batch_wait_ms,
                replicas=args.replicas,
                threads=args.threads,
                max_queued=args.max_queued,
                request_timeout_s=args.request_timeout_s,
            )
        sentences = [int(n) for n in args.sentences.split(",")]
        return bench_command(args.model, sentences, args.repeat)
    except (Error, OSError, ValueError) as exc:
        print(f"fusebridge: error: {exc}", file=sys.stderr)
        return 2
