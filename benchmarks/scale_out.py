"""Scale-out: rows per second of the bundled tagger over 100,000 sentences from one Parquet
file, Ray Data (fusebridge.ray.map_batches: 1 actor x 1 thread, 1 x 2, 2 x 1) against one
process running the same Session over the same file (1 and 2 kernel threads); the target is
Ray >= 0.8x one process at equal total threads. Peak memory per actor and per process.

    python -m benchmarks.scale_out [--quick] [--rounds R] [--sentences N]

writes benchmarks/results/scale_out/scale_out.{md,json,svg} (--quick: scale_out-quick.*, 10,000
sentences, fewer rounds: a smoke run) and prints the Markdown.

The input: N sentences of 1..40 word ids in 0..99 (the ids the bundled models embed), fixed
seed, one Parquet file (`id` int64, `words` list<int64>), as pyarrow writes it (one row group).
The model: one BatchModel of fusebridge/models/assets/tagger (loaded and optimized once, in the
driver), pickled to every process that runs it, as Ray ships it to its actors.

- One process: a child process (`python -m benchmarks.scale_out --one-process ...`, so that
  the driver's memory does not mix into its peak RSS) unpickles the model, builds its Session
  at `threads` kernel threads, reads the file with pyarrow in batches of 256 rows, calls the
  BatchModel on each (the output column added, as Ray's actors do) and writes the rows to a
  Parquet file.
- Ray Data: a local Ray per run, `ray.init(num_cpus=actors x threads + 1)` (one CPU left for
  reading and writing, as `fusebridge batch` does), DataContext.target_max_block_size = 1 MiB
  (without it Ray 2.60 reads the file as one block, which one actor runs alone: the "block
  splitting" table), `read_parquet` -> `fusebridge.ray.map_batches(actors, threads,
  batch_size=256)` -> `write_parquet` to a temporary folder. The actors' callable is
  fusebridge.ray.Predictor plus a probe (six scalar columns a row: the actor's pid, its peak
  RSS, when the call began and ended, when the actor's constructor began and ended), from
  which the actors' timeline and memory are read back.

Times (wall clock; the processes share one clock):
- steady: from the first block's call to the last block's end (one process: the first and
  last call of the model); the fixed costs excluded. The headline ratio is steady rows/s.
- without Ray's start: from the dataset's creation to the written output (one process: from
  the child's start, interpreter and imports included, to the written output).
- with Ray's start: ray.init included.
Peers take turns in rounds (the order rotating), each run after SETTLE seconds of idle; a
ratio is taken within a round (Ray's run / the one-process run of the same round at the same
total threads), then the median and min-max over rounds. Every configuration's outputs are
checked to equal the one-process output, row by row (sorted by id); a difference fails the run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import machine, markdown_table

SENTENCES, QUICK_SENTENCES = 100_000, 10_000
ROUNDS, QUICK_ROUNDS = 4, 2
START_REPEATS, QUICK_START_REPEATS = 2, 1
START_SENTENCES = 2_000  # the start-cost probe: few rows, the fixed costs alone
LONGEST, VOCAB, SEED = 40, 100, 20_240
BATCH = 256  # rows a call, as fusebridge.ray.BATCH_SIZE
BLOCK_BYTES = 1 << 20  # DataContext.target_max_block_size, as `fusebridge batch` sets it
FLUSH_ROWS = 8_192  # the one process writes a row group of this many rows
SETTLE = 3.0  # seconds of idle before each run: Ray's last processes gone, the cores idle
ONE_PROCESS = (1, 2)  # kernel threads
RAY = ((1, 1), (1, 2), (2, 1))  # (actors, threads an actor)
FOOTER_ENV = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"
OUT = Path(__file__).parent / "results" / "scale_out"
ROOT = Path(__file__).resolve().parents[1]
PROBE = ("_pid", "_rss_kb", "_t0", "_t1", "_born", "_ctor0", "_ctor1")


# -- the input -----------------------------------------------------------------------------
def sentences(n: int, seed: int = SEED) -> pa.Table:
    """n rows: `id` 0..n-1 and `words`, 1..LONGEST word ids in 0..VOCAB-1 a row."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, LONGEST + 1, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.integers(0, VOCAB, int(lengths.sum()))
    words = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64()))
    return pa.table({"id": np.arange(n, dtype=np.int64), "words": words})


def tagger() -> object:
    from fusebridge.batch import BatchModel
    from fusebridge.models import assets

    return BatchModel(assets.path("tagger"))


# -- one process (the child) -----------------------------------------------------------------
def peak_rss_kb() -> int:
    """This process's peak RSS in KiB: VmHWM, the high-water mark of its own memory map.
    Not ru_maxrss: Linux carries the parent's RSS at fork over an exec into the child's
    ru_maxrss, so a child of a 500 MB driver would read >= 500 MB whatever it used."""
    try:
        with open("/proc/self/status") as f:
            return int(f.read().split("VmHWM:")[1].split()[0])
    except (OSError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def one_process(model_file: str, input_path: str, output_path: str, threads: int) -> dict:
    """Runs in the child: the model over the file, batch by batch; its timeline and peak RSS."""
    started = time.time()
    from fusebridge import kernels

    imported = time.time()
    kernels.set_num_threads(threads)
    model = pickle.loads(Path(model_file).read_bytes())
    model.session  # noqa: B018 - built before the first batch, as Predictor.__init__ does
    ready = time.time()
    reader = pq.ParquetFile(input_path).iter_batches(batch_size=BATCH)
    writer, pending, pending_rows = None, [], 0
    read_s = run_s = write_s = 0.0
    runs: list[float] = []
    first = last = None
    batches = 0
    while True:
        t0 = time.perf_counter()
        batch = next(reader, None)
        if batch is None:
            break
        table = pa.Table.from_batches([batch])
        t1 = time.perf_counter()
        if first is None:
            first = time.time()
        out = model(table)
        last = time.time()
        t2 = time.perf_counter()
        pending.append(out)
        pending_rows += out.num_rows
        if pending_rows >= FLUSH_ROWS:
            writer = writer or pq.ParquetWriter(output_path, out.schema)
            writer.write_table(pa.concat_tables(pending))
            pending, pending_rows = [], 0
        t3 = time.perf_counter()
        read_s += t1 - t0
        run_s += t2 - t1
        write_s += t3 - t2
        runs.append(t2 - t1)
        batches += 1
    t0 = time.perf_counter()
    if pending:
        writer = writer or pq.ParquetWriter(output_path, pending[0].schema)
        writer.write_table(pa.concat_tables(pending))
    writer.close()
    write_s += time.perf_counter() - t0
    return {
        "started": started,
        "imported": imported,
        "ready": ready,
        "first": first,
        "last": last,
        "done": time.time(),
        "batches": batches,
        "read_s": read_s,
        "run_s": run_s,
        "write_s": write_s,
        "run_ms_median": 1e3 * statistics.median(runs),
        "rss_kb": peak_rss_kb(),
    }


def run_one_process(model_file: Path, data: Path, out: Path, threads: int) -> dict:
    spawned = time.time()
    cmd = [sys.executable, "-m", "benchmarks.scale_out", "--one-process"]
    cmd += [str(model_file), str(data), str(out), str(threads)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    exited = time.time()
    if proc.returncode:
        raise RuntimeError(f"the one-process child failed:\n{proc.stderr[-4000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "kind": "one process",
        "actors": 1,
        "threads": threads,
        "steady_s": r["last"] - r["first"],
        "pipeline_s": exited - spawned,  # interpreter, imports, Session, read, run, write
        "total_s": exited - spawned,
        "fixed_s": r["first"] - spawned,
        "tail_s": exited - r["last"],
        "imports_s": r["imported"] - spawned,
        "session_s": r["ready"] - r["imported"],
        "batches": r["batches"],
        "call_ms": r["run_ms_median"],
        "read_ms": 1e3 * r["read_s"] / r["batches"],
        "write_ms": 1e3 * r["write_s"] / r["batches"],
        "busy": r["run_s"] / (r["last"] - r["first"]),
        "rss_mb": [r["rss_kb"] / 1024],
        "rows": [],
    }


# -- Ray Data --------------------------------------------------------------------------------
def probe_class() -> type:
    """fusebridge.ray.Predictor that also writes its pid, peak RSS and times into each row.
    Made in a function: Ray pickles the class by value, so the workers need not import the
    benchmarks package."""
    from fusebridge.ray import Predictor

    class Probe(Predictor):
        def __init__(self, model: object) -> None:
            self.ctor0 = time.time()
            super().__init__(model)
            self.ctor1 = time.time()
            self.pid = os.getpid()
            try:  # when the worker process started (Ray may have started it before)
                import psutil

                self.born = psutil.Process(self.pid).create_time()
            except ImportError:
                self.born = self.ctor0

        def __call__(self, batch: pa.Table) -> pa.Table:
            t0 = time.time()
            out = super().__call__(batch)
            t1 = time.time()
            try:  # VmHWM, as peak_rss_kb (inlined: Ray ships this class by value)
                with open("/proc/self/status") as f:
                    rss = int(f.read().split("VmHWM:")[1].split()[0])
            except (OSError, IndexError):
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            n = out.num_rows
            values = (self.pid, rss, t0, t1, self.born, self.ctor0, self.ctor1)
            for name, value in zip(PROBE, values):
                kind = pa.int64() if isinstance(value, int) else pa.float64()
                out = out.append_column(name, pa.array(np.full(n, value), kind))
            return out

    return Probe


@contextmanager
def environ(name: str, value: str | None):
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def run_ray(
    model: object,
    data: Path,
    out: Path,
    actors: int,
    threads: int,
    footer_actors: str | None = None,
    v1: bool = False,
) -> dict:
    """One local Ray, started and stopped here: read -> map_batches -> write_parquet."""
    import ray
    import ray.data

    from fusebridge import ray as fb_ray

    with environ(FOOTER_ENV, footer_actors):
        t_init = time.time()
        ray.init(num_cpus=actors * threads + 1, include_dashboard=False, log_to_driver=False)
        try:
            t_ds = time.time()
            context = ray.data.DataContext.get_current()
            context.target_max_block_size = BLOCK_BYTES
            context.enable_progress_bars = False
            context.use_datasource_v2 = not v1
            ds = ray.data.read_parquet(str(data))
            with mock.patch.object(fb_ray, "Predictor", probe_class()):
                mapped = fb_ray.map_batches(ds, model, actors=actors, threads=threads)
            t_planned = time.time()  # the schema read (map_batches checks the columns)
            mapped.write_parquet(str(out))
            t_done = time.time()
        finally:
            ray.shutdown()
            ray.data.DataContext.get_current().use_datasource_v2 = True
    table = pq.read_table(out)
    calls = (
        table.select([*PROBE, "id"])
        .group_by(["_pid", "_t0"])
        .aggregate([(c, "max") for c in PROBE[1:] if c != "_t0"] + [("id", "count")])
        .sort_by([("_pid", "ascending"), ("_t0", "ascending")])
    )
    pid = calls.column("_pid").to_numpy()
    t0 = calls.column("_t0").to_numpy()
    t1 = calls.column("_t1_max").to_numpy()
    rss = calls.column("_rss_kb_max").to_numpy()
    count = calls.column("id_count").to_numpy()
    born = calls.column("_born_max").to_numpy()
    ctor0 = calls.column("_ctor0_max").to_numpy()
    ctor1 = calls.column("_ctor1_max").to_numpy()
    gaps, durations, rows, rss_mb = [], t1 - t0, [], []
    for p in np.unique(pid):
        mine = pid == p
        gaps += (t0[mine][1:] - t1[mine][:-1]).tolist()
        rows.append(int(count[mine].sum()))
        rss_mb.append(float(rss[mine].max()) / 1024)
    rows += [0] * (actors - len(rows))  # an actor that got no block wrote no row
    first, last = float(t0.min()), float(t1.max())
    return {
        "kind": "ray",
        "actors": actors,
        "threads": threads,
        "steady_s": last - first,
        "pipeline_s": t_done - t_ds,
        "total_s": t_done - t_init,
        "fixed_s": first - t_init,
        "tail_s": t_done - last,
        "init_s": t_ds - t_init,
        "plan_s": t_planned - t_ds,
        "to_actor_s": float(ctor0.min()) - t_planned,
        "born_to_actor_s": float(np.median(ctor0 - born)),
        "prestarted": bool((born < t_planned).any()),
        "session_s": float(np.median(ctor1 - ctor0)),
        "to_first_call_s": first - float(ctor1.min()),
        "batches": len(t0),
        "call_ms": 1e3 * float(np.median(durations)),
        "gap_ms": 1e3 * float(np.median(gaps)) if gaps else float("nan"),
        "gap_mean_ms": 1e3 * float(np.mean(gaps)) if gaps else float("nan"),
        "busy": float(durations.sum()) / ((last - first) * actors),
        "rss_mb": rss_mb,
        "rows": rows,
        "table": table,
    }


# -- checks ----------------------------------------------------------------------------------
def outputs(table: pa.Table, names: list[str]) -> pa.Table:
    return table.select(["id", *names]).sort_by("id")


def check_same(reference: pa.Table, table: pa.Table, names: list[str], what: str) -> None:
    got = outputs(table, names)
    if (
        got.num_rows != reference.num_rows
        or not pc.all(pc.equal(got.column("id"), reference.column("id"))).as_py()
    ):
        raise AssertionError(f"{what}: rows {got.num_rows}, ids differ from the one process")
    for name in names:
        want = reference.column(name).combine_chunks()
        have = got.column(name).combine_chunks().cast(want.type)
        if not have.equals(want):
            bad = next(i for i in range(len(want)) if have[i] != want[i])
            raise AssertionError(
                f"{what}: output {name!r} differs from the one process at id {bad}: "
                f"{have[bad]} vs {want[bad]}"
            )


# -- the runs --------------------------------------------------------------------------------
def label(run: dict) -> str:
    if run["kind"] == "one process":
        return f"one process, {run['threads']} thread{'s' * (run['threads'] > 1)}"
    return f"Ray, {run['actors']} actor{'s' * (run['actors'] > 1)} x {run['threads']} thread" + (
        "s" * (run["threads"] > 1)
    )


def throughput_rounds(model: object, data: Path, tmp: Path, rounds: int, n: int) -> list[dict]:
    """Every configuration once a round, the order rotating; each run after SETTLE of idle.
    Outputs checked against the first one-process run."""
    model_file = tmp / "model.pkl"
    model_file.write_bytes(pickle.dumps(model))
    configs = [("one", t) for t in ONE_PROCESS] + [("ray", a, t) for a, t in RAY]
    names = model.output_names
    reference = None
    runs = []
    for r in range(rounds):
        order = configs[r % len(configs) :] + configs[: r % len(configs)]
        if reference is None:  # the reference first
            order = [configs[0]] + [c for c in order if c != configs[0]]
        for config in order:
            time.sleep(SETTLE)
            out = tmp / f"out-{r}-{'-'.join(map(str, config))}"
            if config[0] == "one":
                run = run_one_process(model_file, data, out.with_suffix(".parquet"), config[1])
                table = pq.read_table(out.with_suffix(".parquet"))
            else:
                run = run_ray(model, data, out, config[1], config[2])
                table = run.pop("table")
            run["round"] = r
            run["label"] = label(run)
            if reference is None:
                reference = outputs(table, names)
            check_same(reference, table, names, f"round {r}, {run['label']}")
            run["same_output"] = True
            del table
            shutil.rmtree(out, ignore_errors=True)
            out.with_suffix(".parquet").unlink(missing_ok=True)
            runs.append(run)
            print(
                f"  round {r}: {run['label']}: {n / run['steady_s']:.0f} rows/s steady, "
                f"{run['total_s']:.1f} s in all, same output",
                file=sys.stderr,
            )
    return runs


def start_costs(model: object, tmp: Path, repeats: int) -> list[dict]:
    """Ray's fixed costs on a small file (2 actors x 1 thread): the default reader (V2, its
    footer-reading actors), the footer actors cut to 1, and the V1 reader."""
    data = tmp / "small.parquet"
    pq.write_table(sentences(START_SENTENCES, SEED + 1), data)
    variants = [
        ("V2 reader (default), 32 footer actors", None, False),
        (f"V2 reader, {FOOTER_ENV}=1", "1", False),
        ("V1 reader (DataContext.use_datasource_v2 = False)", None, True),
    ]
    runs = []
    for r in range(repeats):
        for name, footer, v1 in variants:
            time.sleep(SETTLE)
            out = tmp / f"start-{r}-{len(runs)}"
            run = run_ray(model, data, out, 2, 1, footer_actors=footer, v1=v1)
            run.pop("table")
            shutil.rmtree(out, ignore_errors=True)
            run["variant"] = name
            runs.append(run)
            print(f"  start: {name}: {run['fixed_s']:.2f} s to the first call", file=sys.stderr)
    return runs


def block_splitting(tmp: Path, n: int) -> list[list[str]]:
    """How many blocks Ray 2.60 reads the input as, under each setting that might split it."""
    import ray
    import ray.data

    table = sentences(n)
    one = tmp / "blocks-one.parquet"
    pq.write_table(table, one)
    groups = tmp / "blocks-groups.parquet"
    pq.write_table(table, groups, row_group_size=max(1, n // 10))
    files = tmp / "blocks-files"
    files.mkdir()
    for i in range(8):
        part = table.slice(i * (n // 8), n // 8 if i < 7 else n)
        pq.write_table(part, files / f"part{i}.parquet")
    cases = [
        ("one file, one row group (default)", one, {}, {}),
        ("read_parquet(override_num_blocks=8)", one, {"override_num_blocks": 8}, {}),
        ("the file written as 10 row groups", groups, {}, {}),
        ("10 row groups + override_num_blocks=8", groups, {"override_num_blocks": 8}, {}),
        ("8 files", files, {}, {}),
        ("V1 reader (use_datasource_v2 = False)", one, {}, {"use_datasource_v2": False}),
        (
            f"DataContext.target_max_block_size = {BLOCK_BYTES >> 20} MiB",
            one,
            {},
            {"target_max_block_size": BLOCK_BYTES},
        ),
    ]
    rows = []
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    try:
        context = ray.data.DataContext.get_current()
        defaults = {k: getattr(context, k) for k in ("use_datasource_v2", "target_max_block_size")}
        context.enable_progress_bars = False
        for name, path, kwargs, settings in cases:
            for key, value in {**defaults, **settings}.items():
                setattr(context, key, value)
            refs = ray.data.read_parquet(str(path), **kwargs).to_arrow_refs()
            sizes = [t.num_rows for t in ray.get(refs)]
            rows.append([name, str(len(sizes)), f"{max(sizes)}"])
            print(f"  blocks: {name}: {len(sizes)}", file=sys.stderr)
        for key, value in defaults.items():
            setattr(context, key, value)
    finally:
        ray.shutdown()
    return rows


# -- the report ------------------------------------------------------------------------------
def spread(values: list[float], fmt: str) -> str:
    return (
        f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-"
        f"{format(max(values), fmt)})"
    )


def summarize(runs: list[dict], n: int) -> list[dict]:
    """Per configuration: medians and ranges over rounds, ratios within a round."""
    by_round = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["label"]] = run
    labels = list(dict.fromkeys(run["label"] for run in runs))
    summary = []
    for name in labels:
        mine = [run for run in runs if run["label"] == name]
        total = mine[0]["actors"] * mine[0]["threads"]
        peer = label({"kind": "one process", "threads": total, "actors": 1})
        row = {"label": name, "kind": mine[0]["kind"], "actors": mine[0]["actors"]}
        row["threads"], row["total_threads"] = mine[0]["threads"], total
        for key in ("steady", "pipeline", "total"):
            row[f"{key}_rows_s"] = [n / run[f"{key}_s"] for run in mine]
            row[f"{key}_ratio"] = [
                by_round[run["round"]][peer][f"{key}_s"] / run[f"{key}_s"]
                for run in mine
                if peer in by_round[run["round"]]
            ]
        for key in ("fixed_s", "tail_s", "call_ms", "gap_ms", "gap_mean_ms", "busy", "batches"):
            row[key] = [run[key] for run in mine if key in run]
        for key in ("init_s", "plan_s", "to_actor_s", "born_to_actor_s", "session_s",
                    "to_first_call_s"):  # fmt: skip
            row[key] = [run[key] for run in mine if key in run]
        for key in ("imports_s", "read_ms", "write_ms"):
            row[key] = [run[key] for run in mine if key in run]
        row["rss_mb"] = [max(run["rss_mb"]) for run in mine]
        row["rss_all_mb"] = [mb for run in mine for mb in run["rss_mb"]]
        row["rows_per_actor"] = [run["rows"] for run in mine]
        row["peer"] = peer
        summary.append(row)
    return summary


def chart(summary: list[dict], title: str) -> str:
    """Horizontal bars: steady rows/s (median, min-max whisker) and rows/s with every start
    cost, per configuration."""
    width, left, right, bar, gap = 760, 230, 90, 14, 16
    top = 48
    height = top + len(summary) * (2 * bar + gap) + 40
    scale_max = max(max(r["steady_rows_s"]) for r in summary) * 1.05
    x = lambda v: left + (width - left - right) * v / scale_max  # noqa: E731
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{title}</text>',
        f'<rect x="{left}" y="28" width="10" height="10" fill="#4878a8"/>'
        f'<text x="{left + 14}" y="37">steady rows/s (median, min-max)</text>'
        f'<rect x="{left + 230}" y="28" width="10" height="10" fill="#b8c8d8"/>'
        f'<text x="{left + 244}" y="37">rows/s with every start cost</text>',
    ]
    y = top
    for r in summary:
        color = "#4878a8" if r["kind"] == "one process" else "#d08030"
        light = "#b8c8d8" if r["kind"] == "one process" else "#f0c8a0"
        med = statistics.median(r["steady_rows_s"])
        lo, hi = min(r["steady_rows_s"]), max(r["steady_rows_s"])
        total = statistics.median(r["total_rows_s"])
        ratio = ""
        if r["kind"] == "ray":
            ratio = f" ({statistics.median(r['steady_ratio']):.2f}x)"
        parts += [
            f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">{r["label"]}</text>',
            f'<rect x="{left}" y="{y}" width="{x(med) - left:.1f}" height="{bar}" fill="{color}"/>',
            f'<line x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{y + bar / 2}" y2="{y + bar / 2}" '
            'stroke="black"/>',
            f'<text x="{x(max(hi, med)) + 4:.1f}" y="{y + bar - 3}">{med:.0f}{ratio}</text>',
            f'<rect x="{left}" y="{y + bar}" width="{x(total) - left:.1f}" height="{bar}" '
            f'fill="{light}"/>',
            f'<text x="{x(total) + 4:.1f}" y="{y + 2 * bar - 3}" fill="#555">{total:.0f}</text>',
        ]
        y += 2 * bar + gap
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top - 4}" y2="{y - gap + 4}" stroke="#888"/>')
    parts.append(
        f'<text x="{left}" y="{y + 14}" fill="#555">rows per second; in brackets: Ray / one '
        "process at equal total threads (steady)</text></svg>"
    )
    return "\n".join(parts) + "\n"


def report(
    summary: list[dict],
    start: list[dict],
    blocks: list[list[str]],
    meta: dict,
) -> str:
    n = meta["sentences"]
    head = [
        "configuration",
        "total threads",
        "steady rows/s",
        "steady / one process",
        "rows/s without Ray's start",
        "/ one process",
        "rows/s with every start",
        "/ one process",
    ]
    rows = []
    for r in summary:
        ray = r["kind"] == "ray"
        rows.append(
            [
                r["label"],
                str(r["total_threads"]),
                spread(r["steady_rows_s"], ".0f"),
                spread(r["steady_ratio"], ".2f") + "x" if ray else "-",
                spread(r["pipeline_rows_s"], ".0f"),
                spread(r["pipeline_ratio"], ".2f") + "x" if ray else "-",
                spread(r["total_rows_s"], ".0f"),
                spread(r["total_ratio"], ".2f") + "x" if ray else "-",
            ]
        )
    throughput = markdown_table(head, rows)

    head = [
        "configuration",
        "fixed cost to the first call s",
        "ray.init s",
        "dataset + schema s",
        "to the actor's constructor s",
        "Session build s",
        "to the first call s",
        "tail after the last call s",
        "peak RSS a process MB",
        "rows per actor",
    ]
    rows = []
    for r in summary:
        ray = r["kind"] == "ray"

        def cell(key: str, fmt: str = ".2f", r: dict = r) -> str:
            return spread(r[key], fmt) if r[key] else "-"

        actors = "; ".join("/".join(map(str, x)) for x in r["rows_per_actor"]) if ray else "-"
        rows.append(
            [
                r["label"],
                cell("fixed_s"),
                cell("init_s"),
                cell("plan_s"),
                cell("to_actor_s") if ray else f"{cell('imports_s')} (interpreter + imports)",
                cell("session_s", ".3f") if ray else "in the previous",
                cell("to_first_call_s"),
                cell("tail_s"),
                spread(r["rss_all_mb"], ".0f"),
                actors,
            ]
        )
    costs = markdown_table(head, rows)

    head = [
        "configuration",
        "calls",
        "model call ms (median)",
        "between calls ms (median / mean)",
        "busy (calls / steady window)",
        "one process: read + write ms a batch",
    ]
    rows = []
    for r in summary:
        ray = r["kind"] == "ray"
        rows.append(
            [
                r["label"],
                str(int(statistics.median(r["batches"]))),
                spread(r["call_ms"], ".1f"),
                (
                    f"{statistics.median(r['gap_ms']):.2f} / "
                    f"{statistics.median(r['gap_mean_ms']):.2f}"
                )
                if ray
                else "-",
                spread([100 * b for b in r["busy"]], ".0f") + " %",
                "-"
                if ray
                else f"{statistics.median(r['read_ms']):.2f} + "
                f"{statistics.median(r['write_ms']):.2f}",
            ]
        )
    where = markdown_table(head, rows)

    variants = list(dict.fromkeys(s["variant"] for s in start))
    rows = []
    for v in variants:
        mine = [s for s in start if s["variant"] == v]
        rows.append(
            [
                v,
                spread([s["init_s"] for s in mine], ".2f"),
                spread([s["plan_s"] for s in mine], ".2f"),
                spread([s["to_actor_s"] for s in mine], ".2f"),
                spread([s["to_first_call_s"] for s in mine], ".2f"),
                spread([s["fixed_s"] for s in mine], ".2f"),
                spread([s["total_s"] for s in mine], ".2f"),
            ]
        )
    start_table = markdown_table(
        [
            "reader",
            "ray.init s",
            "dataset + schema s",
            "to the actor s",
            "to the first call s",
            "fixed cost s",
            f"whole run of {START_SENTENCES} rows s",
        ],
        rows,
    )
    blocks_table = markdown_table(["input / setting", "blocks read", "largest block rows"], blocks)

    ratio_lines = []
    for r in summary:
        if r["kind"] == "ray":
            ratio_lines.append(
                f"- {r['label']} vs {r['peer']}: steady "
                f"{statistics.median(r['steady_ratio']):.2f}x "
                f"({min(r['steady_ratio']):.2f}-{max(r['steady_ratio']):.2f}), without Ray's "
                f"start {statistics.median(r['pipeline_ratio']):.2f}x, with every start "
                f"{statistics.median(r['total_ratio']):.2f}x (target >= 0.8x)"
            )
    return "\n".join(
        [
            "### Scale-out: Ray Data vs one process (bundled tagger, Parquet in and out)",
            "",
            f"Machine: {meta['machine']}; Ray {meta['ray']}, pyarrow {meta['pyarrow']}; "
            f"{meta['date']}.",
            "",
            f"{n:,} sentences of 1..{LONGEST} words ({meta['words']:,} words), one Parquet "
            f"file of {meta['file_bytes'] / 1e6:.1f} MB (one row group); calls of {BATCH} "
            f"rows; Ray: num_cpus = actors x threads + 1, target_max_block_size "
            f"{BLOCK_BYTES >> 20} MiB. {meta['rounds']} rounds, the configurations taking "
            f"turns (order rotating), {SETTLE:.0f} s of idle before each run; median "
            "(min-max over rounds); a ratio is taken within a round against the one-process "
            "run at the same total threads. Steady: first call to the end of the last call. "
            "Without Ray's start: dataset creation to the output written (one process: the "
            "child's whole life, interpreter and imports included). With every start: "
            "ray.init included. Not run back to back as well: the idle before a run falls "
            "before its fixed costs, not in its steady window. Every run's outputs equal the "
            "one-process output, row by row: checked.",
            "",
            throughput,
            "",
            *ratio_lines,
            "",
            "Fixed costs and memory (peak RSS: VmHWM of each actor process, of the "
            "one-process child; rows per actor: each round's split):",
            "",
            costs,
            "",
            "Where the time goes, per process (calls: blocks the model was called on; "
            "between calls: an actor's idle from the end of one call to the start of its "
            "next, Ray's own cost a call, batching included):",
            "",
            where,
            "",
            f"Ray's fixed costs alone: {START_SENTENCES} rows, 2 actors x 1 thread, "
            f"{meta['start_repeats']} run(s) each:",
            "",
            start_table,
            "",
            f"What splits the input into blocks (Ray {meta['ray']}; {n:,} rows, "
            f"{meta['in_memory_bytes'] / 1e6:.1f} MB in memory): only blocks let two "
            "actors share the work.",
            "",
            blocks_table,
        ]
    )


def measure(quick: bool, rounds: int | None, n: int | None) -> tuple[str, dict, str]:
    """The benchmark; returns (Markdown, JSON-able results, SVG)."""
    import ray

    n = n or (QUICK_SENTENCES if quick else SENTENCES)
    rounds = rounds or (QUICK_ROUNDS if quick else ROUNDS)
    repeats = QUICK_START_REPEATS if quick else START_REPEATS
    model = tagger()
    with tempfile.TemporaryDirectory(prefix="scale_out-") as name:
        tmp = Path(name)
        data = tmp / "sentences.parquet"
        table = sentences(n)
        pq.write_table(table, data)
        meta = {
            "machine": machine(),
            "date": str(datetime.date.today()),
            "ray": ray.__version__,
            "pyarrow": pa.__version__,
            "sentences": n,
            "words": len(table.column("words").combine_chunks().flatten()),
            "file_bytes": data.stat().st_size,
            "in_memory_bytes": table.nbytes,
            "rounds": rounds,
            "start_repeats": repeats,
            "settle_s": SETTLE,
            "batch_size": BATCH,
            "target_max_block_size": BLOCK_BYTES,
            "quick": quick,
        }
        del table
        print("block splitting", file=sys.stderr)
        blocks = block_splitting(tmp, n)
        print("throughput", file=sys.stderr)
        runs = throughput_rounds(model, data, tmp, rounds, n)
        print("start costs", file=sys.stderr)
        start = start_costs(model, tmp, repeats)
    summary = summarize(runs, n)
    text = report(summary, start, blocks, meta)
    results = {"meta": meta, "summary": summary, "runs": runs, "start": start, "blocks": blocks}
    svg = chart(summary, f"Tagger over {n:,} sentences: Ray Data vs one process (2 cores)")
    return text, results, svg


def run(
    quick: bool = False,
    threads: int = 2,
    rounds: int | None = None,
    n: int | None = None,
    out: Path = OUT,
) -> str:
    """The benchmark, as benchmarks.run calls a section: writes out/scale_out.{md,json,svg}
    (scale_out-quick.* with quick) and returns the Markdown. `threads` is not used: the
    configurations are fixed (1 and 2 threads)."""
    started = time.perf_counter()
    text, results, svg = measure(quick, rounds, n)
    minutes = (time.perf_counter() - started) / 60
    results["meta"]["minutes"] = minutes
    text += f"\n\nThe whole benchmark took {minutes:.1f} min.\n"
    stem = "scale_out-quick" if quick else "scale_out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{stem}.svg").write_text(svg)
    print(f"wrote {out / stem}.{{md,json,svg}}", file=sys.stderr)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 sentences, fewer rounds")
    parser.add_argument("--rounds", type=int, help=f"rounds (default {ROUNDS}, quick 2)")
    parser.add_argument("--sentences", type=int, help=f"rows (default {SENTENCES:,})")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the results")
    parser.add_argument("--one-process", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_process:
        model_file, data, out, threads = args.one_process
        print(json.dumps(one_process(model_file, data, out, int(threads))))
        return 0
    print(run(args.quick, rounds=args.rounds, n=args.sentences, out=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
